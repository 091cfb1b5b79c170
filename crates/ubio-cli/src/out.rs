//! Standard output for the commands' reports: a closed pipe downstream
//! (`ubio stat -r / | head`) ends the output quietly instead of panicking.

use std::io::{self, Write};

/// Write `text` to stdout; a broken pipe is not an error.
pub fn print(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// Pretty JSON of `value`, then a newline, on stdout.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    print(&format!("{}\n", serde_json::to_string_pretty(value)?))?;
    Ok(())
}

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
