//! Standard output for the programs' reports: a closed pipe downstream
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
