//! Errors with context: which operation failed on which file.
//!
//! The library's I/O traits must return `io::Error`, so the context travels
//! inside one: `io::Error::new(kind, Error)`. The original errno stays
//! reachable through [`raw_os_error`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An I/O error annotated with the operation and the file it concerned.
#[derive(Debug)]
pub struct Error {
    pub op: &'static str,
    pub path: Option<PathBuf>,
    pub source: io::Error,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{} {}: {}", self.op, p.display(), self.source),
            None => write!(f, "{}: {}", self.op, self.source),
        }
    }
}

// No `source()`: Display already ends with the cause, and error reporters
// that walk the chain (anyhow's `{:#}`) would print it twice.
impl std::error::Error for Error {}

/// Wrap `err` with the operation and path, keeping its kind. Errors that
/// already carry context are returned unchanged.
pub fn context(err: io::Error, op: &'static str, path: Option<&Path>) -> io::Error {
    if err.get_ref().is_some_and(|e| e.is::<Error>()) {
        return err;
    }
    let kind = err.kind();
    io::Error::new(
        kind,
        Error {
            op,
            path: path.map(Path::to_path_buf),
            source: err,
        },
    )
}

/// The errno behind an error, looking through the context added by this crate.
pub fn raw_os_error(err: &io::Error) -> Option<i32> {
    err.raw_os_error().or_else(|| {
        err.get_ref()
            .and_then(|e| e.downcast_ref::<Error>())
            .and_then(|e| raw_os_error(&e.source))
    })
}
