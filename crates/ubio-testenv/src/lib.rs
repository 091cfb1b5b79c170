//! ubio's test environment: the fixtures every test suite and the benchmark
//! harness (ubio-bench) share.
//!
//! Benchmarks and integration tests need environments that a plain `cargo test`
//! does not give: a filesystem of a chosen kind (`scratchfs`), a memory limit
//! that makes page-cache growth visible (`cgroup`), a device that fails
//! writeback on purpose (`scratchfs::ScratchFs::create_eio`). Every fixture here
//! is a guard that removes what it made when dropped, when a test panics, and
//! when the process gets SIGINT, SIGTERM or SIGHUP (`cleanup`): a benchmark that
//! is interrupted must not leave loop devices, mounts or cgroups behind.
//!
//! All of it needs root and Linux; tests print `SKIP <name>: <reason>` where
//! that is missing.

pub mod balloon;
pub mod cgroup;
pub mod cleanup;
pub mod faults;
pub mod kept_pages;
pub mod podman;
pub mod reclaim_trace;
pub mod residency_sampler;
pub mod rng;
pub mod sampler_thread;
pub mod scratchfs;
pub mod stackfs;
pub mod tracefs;

use std::ffi::OsStr;
use std::fmt::Display;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python venv scripts/install-deps.sh makes for the tests (maturin,
/// pytest, kubernetes-validate): UBIO_PYENV, else ~/.cache/ubio/pyenv.
pub fn pyenv() -> PathBuf {
    std::env::var_os("UBIO_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ubio/pyenv")
        })
}

/// Directories searched after `$PATH`: mkfs and losetup live in sbin, which a
/// non-login shell or a CI runner may leave out of `$PATH`.
const EXTRA_TOOL_DIRS: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The Debian package that ships `tool`, for the "install it" hint.
fn package_of(tool: &str) -> &'static str {
    match tool {
        "mkfs.xfs" | "xfs_io" => "xfsprogs",
        "mkfs.btrfs" | "btrfs" => "btrfs-progs",
        "mkfs.ext4" | "mke2fs" | "chattr" => "e2fsprogs",
        "mount" | "umount" => "mount",
        "fio" => "fio",
        _ => "util-linux",
    }
}

/// Finds an external tool by name, in `$PATH` and then in the sbin directories.
///
/// Fails with `NotFound` and a message that says which package to install, e.g.
/// "mkfs.xfs not found: install xfsprogs (scripts/test.sh does)".
pub fn require_tool(name: &str) -> io::Result<PathBuf> {
    let from_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let dirs = from_path
        .into_iter()
        .chain(EXTRA_TOOL_DIRS.iter().map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(name);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{name} not found: install {} (scripts/test.sh does)",
            package_of(name)
        ),
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Reports a test that cannot run here as `SKIP name: reason` on stderr
/// (scripts/test.sh counts these lines). With `UBIO_NO_SKIP=1` (CI as root,
/// where every fixture exists) a skip is a failure instead.
pub fn skip(name: &str, reason: &str) {
    let line = format!("SKIP {name}: {reason}");
    if std::env::var_os("UBIO_NO_SKIP").is_some_and(|v| v == "1") {
        panic!("{line} (UBIO_NO_SKIP=1 turns skips into failures)");
    }
    eprintln!("{line}");
}

/// target/<profile>/ of a running test binary (which lives in
/// target/<profile>/deps/): where the workspace's programs were built.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binaries live in target/<profile>/deps/")
        .to_path_buf()
}

/// Whether the process runs with effective uid 0. Loop devices, mounts, cgroups
/// and blkio throttling all need it.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Adds context ("what failed, on which path") to an error, keeping its kind.
pub fn context(err: io::Error, what: impl Display) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

/// [`context`] for an operation on a path: "{what} {path}: {err}".
pub fn path_context(err: io::Error, what: &str, path: &Path) -> io::Error {
    context(err, format_args!("{what} {}", path.display()))
}

/// Runs an external tool to completion and returns its stdout.
///
/// A non-zero exit becomes an error that names the command line, the exit
/// status and the tool's stderr, so a failed `mkfs` or `losetup` explains
/// itself.
pub fn run_tool(tool: &Path, args: &[&OsStr]) -> io::Result<String> {
    let cmdline = || {
        let mut s = tool.display().to_string();
        for a in args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    };
    log::debug!("running {}", cmdline());
    let out = Command::new(tool)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| context(e, format_args!("cannot run `{}`", cmdline())))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`{}` failed ({}): {}",
            cmdline(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_names_the_package() {
        let err = require_tool("mkfs.ubio-does-not-exist").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("not found: install"), "{err}");
    }

    #[test]
    fn xfs_hint_names_xfsprogs() {
        assert_eq!(package_of("mkfs.xfs"), "xfsprogs");
        assert_eq!(package_of("mkfs.btrfs"), "btrfs-progs");
    }

    #[test]
    fn finds_sh() {
        assert!(require_tool("sh").is_ok());
    }
}
