//! Standard output for the commands' reports: a closed pipe downstream
//! (`ubio stat -r / | head`) ends the output quietly instead of panicking;
//! the end of a report over many files.

/// Shared with `ubio-bench`.
pub use ubio_cmd::out::{print, print_json};

/// The exit status of a command over many files: failure if any failed.
pub fn status(errors: &[String]) -> std::process::ExitCode {
    if errors.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// The end of a per-file report (`ubio stat`, `ubio evict`): each error on
/// stderr as `ubio CMD: ...`, then the JSON report or the table on stdout.
pub fn finish(
    cmd: &str,
    errors: &[String],
    json: Option<&impl serde::Serialize>,
    table: impl FnOnce() -> String,
) -> anyhow::Result<std::process::ExitCode> {
    for e in errors {
        eprintln!("ubio {cmd}: {e}");
    }
    match json {
        Some(report) => print_json(report)?,
        None => print(&table())?,
    }
    Ok(status(errors))
}
