//! Helpers that the harness's tests share: running `ubio-bench` (and finding
//! the `ubio` it measures), scratch directories, skips; for the demo tests
//! one demo run with its JSON report and the check that a demo left nothing
//! behind.
// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
#[allow(unused_imports)] // not every test file skips
pub use ubio_testenv::skip;

pub const UBIO_BENCH: &str = env!("CARGO_BIN_EXE_ubio-bench");

pub fn ubio_bench() -> Command {
    Command::new(UBIO_BENCH)
}

/// The `ubio` that the ubio-cat, ubio-cp and ubio-run-* modes run: the
/// harness finds it beside itself, where a workspace build puts it; or why
/// those modes cannot run (`cargo test -p ubio-bench` alone does not build
/// it).
pub fn ubio_beside() -> Result<PathBuf, String> {
    let ubio = Path::new(UBIO_BENCH).with_file_name("ubio");
    let shim = ubio.with_file_name("libubio_preload.so");
    if ubio.is_file() && shim.is_file() {
        Ok(ubio)
    } else {
        Err(format!(
            "{} or its shim is not built (cargo build --release -p ubio-cli -p ubio-preload)",
            ubio.display()
        ))
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scratch directory on the working filesystem (ext4 here; not tmpfs,
/// where pages are the storage).
pub fn workdir() -> tempfile::TempDir {
    tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap()
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

/// Runs `ubio-bench demo ARGS --json --dir DIR`, asserts that it succeeded and
/// showed its table (with `table_mark` in it) on stderr, and returns its
/// pid, its stderr and its JSON report.
pub fn run_demo_json(
    name: &str,
    args: &[&str],
    dir: &Path,
    table_mark: &str,
) -> (u32, String, serde_json::Value) {
    let child = ubio_bench()
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
        "{name}: ubio-bench demo failed ({}):\n{stderr}",
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
