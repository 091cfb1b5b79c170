//! What the C and Python binding tests share: skips, where data goes, and
//! running a command with its output shown. (Each test binary uses a part.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
#[allow(unused_imports)] // each test binary uses a part
pub use ubio_testenv::{profile_dir, skip};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .unwrap()
        .to_path_buf()
}

/// A new directory for test files, on a filesystem whose page cache ubio
/// manages: under UBIO_TEST_DIR, or target/ (ext4 here). None (after a
/// skip) on tmpfs and the like, where the residency contract means nothing.
pub fn data_dir(test: &str) -> Option<tempfile::TempDir> {
    let base = std::env::var_os("UBIO_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("ubio-test-")
        .tempdir_in(&base)
        .unwrap();
    let probe = ubio::probe_path(dir.path()).unwrap();
    if probe.fs.pages_are_storage || !probe.cachestat.available {
        skip(
            test,
            &format!(
                "{} is {} (cachestat: {}): point UBIO_TEST_DIR at ext4 or xfs",
                base.display(),
                probe.fs.fs_type,
                probe.cachestat.detail
            ),
        );
        return None;
    }
    Some(dir)
}

/// Whether `program` can be run (else skip `test`).
pub fn have(test: &str, program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(
            test,
            &format!("{program} not found (scripts/install-deps.sh installs it)"),
        );
    }
    ok
}

/// Run `cmd`, echo its output, and fail the test if it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed: {}", out.status);
    stdout
}
