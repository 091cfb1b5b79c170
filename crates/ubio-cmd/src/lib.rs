//! What the two programs, `ubio` (the product) and `ubio-bench` (the
//! benchmark harness), share, so that neither depends on the other: the
//! version with the git description, output that survives a closed pipe,
//! size arguments, man pages and completions made from the clap definitions,
//! and how each finds the other.

#![deny(unsafe_code)]

pub mod docs;
pub mod out;
pub mod size;

use std::path::PathBuf;
use std::process::ExitCode;

/// "0.1.0 (git 7dd5c53)": the crate version and the source tree's `git
/// describe` (see build.rs); `--version` prints it.
pub const VERSION: &str = env!("UBIO_VERSION_LONG");

/// The source tree's `git describe` at build time, if it was known.
pub fn git_describe() -> Option<&'static str> {
    Some(env!("UBIO_GIT_DESCRIBE_BUILD")).filter(|d| !d.is_empty())
}

/// The log both programs write to stderr: warnings by default, more with
/// UBIO_LOG (`UBIO_LOG=debug`: each file's backend choice).
pub fn init_log() {
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("UBIO_LOG", "warn"))
        .format_timestamp(None)
        .init();
}

/// How a command ends: its exit code, or its error on stderr as `WHO:
/// MESSAGE` (WHO: "ubio cp", or "cp" for ubio invoked as cp; `render`
/// makes the message) and failure.
pub fn finish(
    who: &str,
    result: anyhow::Result<ExitCode>,
    render: impl Fn(&anyhow::Error) -> String,
) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("{who}: {}", render(&e));
        ExitCode::FAILURE
    })
}

/// Another program of ubio's (`ubio-bench` for `ubio`, `ubio` for
/// `ubio-bench`): beside this binary first (a build tree, or one install
/// prefix), then on PATH, as git and cargo find their external subcommands.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(name)));
    beside
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        }))
        .find(|c| is_executable(c))
}

fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
