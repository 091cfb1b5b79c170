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
