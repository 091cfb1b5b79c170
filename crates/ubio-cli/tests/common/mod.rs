//! Helpers that the command tests share: running `ubio`, scratch data and
//! cache checks, skips; and for the `ubio demo` tests one demo run with its
//! JSON report and the check that a demo left nothing behind.
// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
pub use ubio_testenv::skip;

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

/// `len` bytes that differ with `seed` and along the file.
pub fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
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

/// Our memory cgroup, or why the demo cannot run here.
pub fn demo_possible() -> Result<PathBuf, String> {
    if !ubio_testenv::is_root() {
        return Err("needs root (the demo makes a memory cgroup)".into());
    }
    ubio_testenv::cgroup::own_memory_cgroup().map_err(|e| e.to_string())
}

/// An empty directory for the demo to work in, on the target filesystem;
/// removed when the guard drops, also when the test fails.
pub fn scratch_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// Runs `ubio demo ARGS --json --dir DIR`, asserts that it succeeded and
/// showed its table (with `table_mark` in it) on stderr, and returns its
/// pid, its stderr and its JSON report.
pub fn run_demo_json(
    name: &str,
    args: &[&str],
    dir: &Path,
    table_mark: &str,
) -> (u32, String, serde_json::Value) {
    let child = Command::new(UBIO)
        .arg("demo")
        .args(args)
        .arg("--json")
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{name}: ubio demo failed ({}):\n{stderr}",
        out.status
    );
    // --json still shows the table, on stderr.
    assert!(stderr.contains(table_mark), "{name}: no table:\n{stderr}");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (pid, stderr, report)
}

/// Asserts that the demo run by `pid` left no cgroup in `own_cg` (the
/// harness names them ubio-bench-PID-N) and nothing in `dir`, then removes
/// `dir`.
pub fn assert_clean(pid: u32, own_cg: &Path, dir: &Path) {
    let prefix = format!("ubio-bench-{pid}-");
    let left: Vec<String> = std::fs::read_dir(own_cg)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(
        left.is_empty(),
        "cgroups left behind in {}: {left:?}",
        own_cg.display()
    );
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.is_empty(), "left behind: {files:?}");
    std::fs::remove_dir(dir).unwrap();
}

/// Reads a child's stderr line by line until a line satisfies `stop` (or
/// the stream ends): the lines read, and the rest of the stream.
pub fn read_until(
    stderr: std::process::ChildStderr,
    stop: impl Fn(&str) -> bool,
) -> (
    Vec<String>,
    std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
) {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = stop(&line);
        seen.push(line);
        if done {
            break;
        }
    }
    (seen, lines)
}
