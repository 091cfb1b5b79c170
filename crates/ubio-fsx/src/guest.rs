//! What the guest programs share (`ubio-powercut`, `ubio-diskfault`, run in
//! the QEMU guest of scripts/guest/run.sh, as root, with device-mapper):
//! the system's tools (losetup, dmsetup, mkfs, mount, the checkers) run as
//! commands whose failure is an error with their output, loop and
//! device-mapper devices removed when dropped, the data pattern, the
//! extents of a file, and the arguments both take.

use std::fs::File;
use std::io::{self, Write};
use std::ops::Range;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use ubio::sys::{self, FIEMAP_EXTENT_DELALLOC, FIEMAP_EXTENT_UNWRITTEN};
use ubio::BackendKind;
use ubio_testenv::rng::SplitMix64;

/// The arguments every guest suite takes.
#[derive(clap::Args)]
pub struct SuiteArgs {
    /// The filesystem to make on the device: ext4, xfs, btrfs, f2fs.
    #[arg(long)]
    pub fs: String,
    /// Backends, comma separated (buffered, which manages nothing, is the
    /// reference).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "buffered,emulated,direct,kernel"
    )]
    pub backends: Vec<BackendKind>,
    /// A directory for the images and the suite's other files, not on the
    /// device under test (ubio-powercut's replay points are reflinks: xfs,
    /// btrfs).
    #[arg(long)]
    pub work: PathBuf,
    /// The ubio binary (`ubio cp`, `ubio cat`, `ubio run`).
    #[arg(long, default_value = "ubio")]
    pub ubio: PathBuf,
    /// When the emulated backend writes through O_DIRECT (never,
    /// when-faster, always): `always` puts every aligned write of 512 KiB or
    /// more on the O_DIRECT path, which the race takes only where it wins.
    #[arg(long, default_value = "when-faster")]
    pub direct_writes: ubio::DirectWrites,
}

impl SuiteArgs {
    /// A ubio file opened with the suite's settings for `backend`.
    pub fn open_options(&self, backend: BackendKind) -> ubio::OpenOptions {
        let mut o = ubio::OpenOptions::new();
        o.backend(backend).direct_writes(self.direct_writes);
        o
    }

    /// The ubio command, with the suite's settings in its environment (the
    /// shim of `ubio run` reads them too).
    pub fn ubio_command(&self) -> std::process::Command {
        let mut c = std::process::Command::new(&self.ubio);
        c.env(ubio::DirectWrites::ENV, self.direct_writes.name());
        c
    }
}

/// Why ubio refuses `backend` on the filesystem holding `dir` (the refusal
/// of its own backend choice, from the probe), or None when it runs there.
pub fn refusal(dir: &Path, backend: BackendKind) -> io::Result<Option<String>> {
    let p = ubio::probe_path(dir)?;
    Ok(ubio::probe::choose(backend, &p.fs, true, 0, true)
        .err()
        .map(|e| e.to_string()))
}

/// Run `cmd`; its standard output (trimmed), or an error with its status
/// and output.
pub fn run(cmd: &mut Command) -> io::Result<String> {
    run_with_input(cmd, None)
}

/// [`run`], with `input` on its standard input.
pub fn run_with_input(cmd: &mut Command, input: Option<&str>) -> io::Result<String> {
    let what = format!("{cmd:?}");
    let fail = |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(fail)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(fail)?;
    }
    let out = child.wait_with_output().map_err(fail)?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{what}: {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn sh(cmd: &str, args: &[&str]) -> io::Result<String> {
    run(Command::new(cmd).args(args))
}

/// `len` bytes of seeded data with no even byte: a zero (a hole, an
/// unwritten extent) or [`STALE`] (a block the filesystem never wrote) read
/// back is then never the data's own.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    SplitMix64::new(seed).fill(&mut out);
    for b in &mut out {
        *b |= 1;
    }
    out
}

/// What every block of a device holds before mkfs (see [`stale_image`]):
/// even, so never a byte of [`pattern`], and not zero, so a file that shows
/// it shows a block that nothing wrote since (stale data on a real disk).
pub const STALE: u8 = 0xA4;

/// Make `path` a file of `len` bytes of [`STALE`]: the disk's old contents,
/// which a filesystem must never show in a file. Filesystems are then made
/// with mkfs's discard off ([`mkfs`]), so that they stay.
pub fn stale_image(path: &Path, len: u64) -> io::Result<()> {
    let f = File::create(path)?;
    let block = vec![STALE; 4 << 20];
    let mut at = 0;
    while at < len {
        let n = (block.len() as u64).min(len - at) as usize;
        f.write_all_at(&block[..n], at)?;
        at += n as u64;
    }
    f.sync_all()
}

/// The size a test filesystem gets (mkfs.xfs wants 300 MiB at least).
pub fn fs_bytes(fs: &str) -> u64 {
    if fs == "xfs" {
        320 << 20
    } else {
        256 << 20
    }
}

/// mkfs, without discarding the device first (a discard would zero the
/// [`STALE`] blocks of the device's old contents).
pub fn mkfs(fs: &str, dev: &str) -> io::Result<()> {
    match fs {
        "ext4" => sh(
            "mkfs.ext4",
            &["-q", "-F", "-b", "4096", "-E", "nodiscard", dev],
        ),
        "xfs" => sh("mkfs.xfs", &["-q", "-f", "-K", dev]),
        "btrfs" => sh("mkfs.btrfs", &["-q", "-f", "-K", dev]),
        "f2fs" => sh("mkfs.f2fs", &["-q", "-f", "-t", "0", dev]),
        _ => Err(io::Error::other(format!("unknown filesystem {fs}"))),
    }
    .map(drop)
}

pub fn mount(fs: &str, dev: &str, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    sh("mount", &["-t", fs, dev, &dir.to_string_lossy()]).map(drop)
}

pub fn umount(dir: &Path) -> io::Result<()> {
    sh("umount", &[&dir.to_string_lossy()]).map(drop)
}

/// The filesystem's own checker, read-only; an error with its output if it
/// finds anything.
pub fn check_fs(fs: &str, dev: &str) -> io::Result<()> {
    match fs {
        "ext4" => sh("e2fsck", &["-fn", dev]),
        "xfs" => sh("xfs_repair", &["-n", dev]),
        "btrfs" => sh("btrfs", &["check", "--readonly", dev]),
        "f2fs" => sh("fsck.f2fs", &["-f", "--dry-run", dev]),
        _ => Err(io::Error::other(format!("unknown filesystem {fs}"))),
    }
    .map(drop)
}

/// A loop device over a file, detached when dropped.
pub struct Loop(pub String);

impl Loop {
    pub fn attach(file: &Path) -> io::Result<Loop> {
        sh("losetup", &["-f", "--show", &file.to_string_lossy()]).map(Loop)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = sh("losetup", &["-d", &self.0]);
    }
}

/// A device-mapper device, removed when dropped.
pub struct Dm {
    pub name: String,
}

impl Dm {
    pub fn create(name: &str, table: &str) -> io::Result<Dm> {
        sh("dmsetup", &["create", name, "--table", table])?;
        let _ = sh("dmsetup", &["mknodes", name]);
        Ok(Dm { name: name.into() })
    }

    pub fn path(&self) -> String {
        format!("/dev/mapper/{}", self.name)
    }

    /// Swap the table (one line per target) under a mounted filesystem:
    /// load, suspend without freezing it (a freeze would write back its
    /// dirty pages first), resume.
    pub fn swap(&self, table: &str) -> io::Result<()> {
        run_with_input(
            Command::new("dmsetup").args(["load", &self.name]),
            Some(table),
        )?;
        sh("dmsetup", &["suspend", "--nolockfs", &self.name])?;
        sh("dmsetup", &["resume", &self.name]).map(drop)
    }
}

impl Drop for Dm {
    fn drop(&mut self) {
        let _ = sh("dmsetup", &["remove", &self.name]);
    }
}

/// What holds the bytes of a file that read back as zeroes, by its extents:
/// nothing (a hole: the size was written before any block), an unwritten
/// extent (allocated, the data's I/O not yet done or not yet recorded as
/// done), or a written one.
pub fn zero_kinds(path: &Path, zeroes: &[Range<u64>]) -> io::Result<Vec<&'static str>> {
    let f = File::open(path)?;
    let ext = sys::fiemap(f.as_fd(), false)
        .map_err(|e| io::Error::new(e.kind(), format!("FIEMAP {}: {e}", path.display())))?;
    let mut kinds = Vec::new();
    for z in zeroes {
        let mut at = z.start;
        while at < z.end {
            let (kind, end) = match ext
                .iter()
                .find(|e| e.logical + e.length > at && e.logical < z.end)
            {
                Some(e) if e.logical <= at => {
                    let kind = if e.flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
                        "unwritten"
                    } else if e.flags & FIEMAP_EXTENT_DELALLOC != 0 {
                        "delalloc"
                    } else {
                        "written"
                    };
                    (kind, (e.logical + e.length).min(z.end))
                }
                Some(e) => ("hole", e.logical),
                None => ("hole", z.end),
            };
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
            at = end;
        }
    }
    kinds.sort();
    Ok(kinds)
}

/// Runs of bytes equal to `b` in `data`, as ranges.
pub fn runs_of(data: &[u8], b: u8) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for (i, &x) in data.iter().enumerate() {
        if x != b {
            continue;
        }
        let i = i as u64;
        match out.last_mut() {
            Some(r) if r.end == i => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_never_holds_zero_or_stale() {
        let p = pattern(3, 1 << 16);
        assert!(p.iter().all(|&b| b != 0 && b != STALE));
        assert_eq!(p, pattern(3, 1 << 16));
    }

    /// ubio refuses exactly what the probe says cannot work: kernel without
    /// RWF_DONTCACHE, direct without O_DIRECT; buffered and emulated never.
    #[test]
    fn refusal_follows_the_probe() {
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let p = ubio::probe_path(dir.path()).unwrap();
        for (backend, works) in [
            (BackendKind::Buffered, true),
            (BackendKind::Emulated, true),
            (BackendKind::Kernel, p.fs.dontcache.available),
            (BackendKind::Direct, p.fs.direct_io.available),
        ] {
            let why = refusal(dir.path(), backend).unwrap();
            assert_eq!(why.is_none(), works, "{backend}: {why:?}");
        }
    }

    #[test]
    fn runs_are_found() {
        assert_eq!(runs_of(&[0, 0, 1, 0, 1, 1, 0], 0), vec![0..2, 3..4, 6..7]);
        assert!(runs_of(&[1, 2], 0).is_empty());
    }
}
