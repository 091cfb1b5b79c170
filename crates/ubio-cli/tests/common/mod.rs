//! Helpers that the command tests share: running `ubio`, scratch data and
//! cache checks, skips.
// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};
pub use ubio_testenv::skip;

pub mod gnu;
pub mod policy;

pub const UBIO: &str = env!("CARGO_BIN_EXE_ubio");

/// Root is needed for loop filesystems, ownership and other users: true if
/// we have it, else a skip.
pub fn root_or_skip(name: &str) -> bool {
    let root = ubio_testenv::is_root();
    if !root {
        skip(name, "needs root");
    }
    root
}

pub fn ubio() -> Command {
    Command::new(UBIO)
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit status 0 and nothing on stderr (a command whose reader went away).
pub fn assert_quiet_success(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    assert!(out.stderr.is_empty(), "{}", stderr(out));
}

/// Start `cmd` with its output piped, read the first `n` bytes of its
/// stdout and close the pipe (like `| head -c N`); returns those bytes and
/// how the command ended.
pub fn head_then_close(cmd: &mut Command, n: usize) -> (Vec<u8>, Output) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = vec![0u8; n];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    drop(child.stdout.take());
    (head, child.wait_with_output().unwrap())
}

/// A scratch directory on the working filesystem (ext4 here; not tmpfs,
/// where pages are the storage).
pub fn workdir() -> tempfile::TempDir {
    tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap()
}

/// A directory holding a link to (or copy of) `ubio` and nothing else,
/// and the `ubio` in it: what `cargo install` installs.
pub fn lone_ubio() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = workdir();
    let ubio = dir.path().join("ubio");
    if std::fs::hard_link(UBIO, &ubio).is_err() {
        std::fs::copy(UBIO, &ubio).unwrap();
    }
    (dir, ubio)
}

/// `len` bytes that differ with `seed` and along the file.
pub fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

/// A tmpfs mounted at a directory it makes (root only), so that a tree can
/// hold another filesystem where a test needs one; unmounted when dropped,
/// also when the test fails.
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn at(at: &Path) -> Tmpfs {
        Tmpfs::sized(at, "1m")
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// One of `size` (mount's size=, "64m").
    pub fn sized(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size}"))
            .arg("ubio-cli-test")
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs at {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    /// Unmounted also when busy (lazily then, and said): a mount left
    /// behind outlives the test's directory.
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            Command::new("umount")
                .args(lazy.then_some("--lazy"))
                .arg(&self.0)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !umount(false) && !umount(true) {
            eprintln!("cannot unmount the test tmpfs at {}", self.0.display());
        }
    }
}

/// The file's page-cache counts (cachestat, or mincore where it is missing).
pub fn count(path: &Path) -> ubio::residency::Count {
    ubio::residency::count_path(path, ubio::sys::FileRange::WHOLE).unwrap()
}

/// Write, make durable and drop from the cache.
pub fn write_cold(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    ubio::sys::fadvise(f.as_fd(), 0, 0, ubio::sys::Advice::DontNeed).unwrap();
}

/// The bounds every program the engine follows keeps (`ubio run` and `ubio
/// policy`): docs/guide/commands.md ("The engine"), `ubio run --help`.
pub mod engine {
    use std::path::Path;
    use std::process::Command;
    use std::time::Duration;
    use ubio_testenv::residency_sampler::Peaks;

    pub const MIB: u64 = 1 << 20;
    pub const PAGE: u64 = 4096;
    /// The programs' cold input.
    pub const SIZE: u64 = 256 * MIB;
    /// The input's and each output's page cache at any moment.
    pub const PEAK_LIMIT: u64 = 64 * MIB;
    /// Dirty + writeback of a writer the engine follows, on a device that
    /// keeps up: the window (16 MiB) plus what a writer writes between two
    /// looks, plus the step under writeback.
    pub const WRITE_BOUND: u64 = 64 * MIB;
    pub const SAMPLE_EVERY: Duration = Duration::from_millis(2);
    /// What the engine may keep of a stream's own pages when it first sees
    /// a file that is not cold (best effort, docs/guide/commands.md: what the stream read
    /// before the engine's first look at the file is taken as others' when
    /// others' pages are cached further on): the stream's first reads and
    /// their readahead (8 MiB here) before that look, on a slow machine a
    /// few of them.
    pub const FIRST_SIGHT: u64 = 32 * MIB;

    /// What a followed run broke of the bounds: the input's and the
    /// outputs' cache peaks, the outputs' dirty + writeback, bytes left
    /// cached after exit (`left`: the input's, then the outputs').
    pub fn beyond_bounds(pin: &Peaks, pout: &Peaks, left: &[u64]) -> Vec<String> {
        let mib = |pages: u64| pages * PAGE / MIB;
        let mut v = Vec::new();
        if pin.max_cached * PAGE > PEAK_LIMIT {
            v.push(format!("input peak {} MiB cached", mib(pin.max_cached)));
        }
        if pout.max_cached * PAGE > PEAK_LIMIT {
            v.push(format!("outputs peak {} MiB cached", mib(pout.max_cached)));
        }
        if pout.max_dirty_writeback * PAGE > WRITE_BOUND {
            let peak = mib(pout.max_dirty_writeback);
            let (d, w) = (mib(pout.max_dirty), mib(pout.max_writeback));
            v.push(format!(
                "outputs' dirty + writeback peak {peak} MiB (peaks: dirty {d}, writeback {w})"
            ));
        }
        if left.iter().any(|&b| b > 0) {
            v.push(format!(
                "left cached after exit (input, outputs): {left:?} bytes"
            ));
        }
        v
    }

    /// Whether `tool` is on PATH.
    pub fn have(tool: &str) -> bool {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The static Go copy of the run_programs tests (io.Copy: one
    /// copy_file_range per file; `-rw`: a read/write loop), built in `dir`,
    /// or the one UBIO_TEST_GOCOPY names, built beforehand (a QEMU guest
    /// has no Go toolchain: scripts/guest/run.sh builds it on the host);
    /// Err says why it cannot be (a skip).
    pub fn build_gocopy(dir: &Path) -> Result<std::path::PathBuf, String> {
        if let Some(built) = std::env::var_os("UBIO_TEST_GOCOPY") {
            return Ok(built.into());
        }
        if !have("go") {
            return Err("no go toolchain (golang)".into());
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_programs/gocopy.go");
        let exe = dir.join("gocopy");
        let out = Command::new("go")
            .args(["build", "-o"])
            .arg(&exe)
            .arg(src)
            .env("CGO_ENABLED", "0")
            .current_dir(dir)
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(format!(
                "go build: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(exe)
    }

    /// Bytes of `path` in the page cache.
    pub fn cached(path: &Path) -> u64 {
        super::count(path).cached * PAGE
    }

    /// Drop `path`'s pages until none is left: a test whose input was not
    /// cold would see the engine keep it as others' cache. Pages a process
    /// is still reading (a killed one's readahead: locked pages survive a
    /// drop) go at a later try.
    pub fn evict(path: &Path) {
        let f = std::fs::File::open(path).unwrap();
        for _ in 0..200 {
            ubio::sys::fadvise(
                std::os::fd::AsFd::as_fd(&f),
                0,
                0,
                ubio::sys::Advice::DontNeed,
            )
            .unwrap();
            if super::count(path).cached == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("{}: pages stay cached after 200 drops", path.display());
    }
}
