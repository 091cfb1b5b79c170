//! Error messages in the form GNU coreutils print and people grep for:
//! `ubio cp: cannot stat 'x': No such file or directory`: an action, the
//! file in single quotes, then strerror's text without Rust's "(os error N)".

use std::io;
use std::path::Path;

/// `path` quoted as GNU's messages quote names: 'name', with a single quote
/// inside written as '\''.
pub fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// `text` without the " (os error N)" that Rust appends to strerror's text.
pub fn strip_os_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + " (os error ".len()..];
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        if digits > 0 && tail[digits..].starts_with(')') {
            rest = &tail[digits + 1..];
        } else {
            out.push_str(" (os error ");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Why `e` happened, without the operation and file the library added:
/// "No such file or directory".
pub fn reason(e: &io::Error) -> String {
    match e
        .get_ref()
        .and_then(|i| i.downcast_ref::<ubio::error::Error>())
    {
        Some(c) => reason(&c.source),
        None => strip_os_error(&e.to_string()),
    }
}

/// GNU's words for an operation that failed on a file.
fn action(op: &str) -> String {
    match op {
        "read" => "error reading".into(),
        "write" | "write back" => "error writing".into(),
        "read directory" => "cannot open directory".into(),
        "preserve mode of" => "preserving permissions for".into(),
        "preserve timestamps of" => "preserving times for".into(),
        "preserve ownership of" => "failed to preserve ownership for".into(),
        "set attributes for" => "setting attributes for".into(),
        "list attributes of" => "listing attributes of".into(),
        "read attributes of" => "getting attribute of".into(),
        op => format!("cannot {op}"),
    }
}

/// `e` in GNU's form: "cannot stat 'x': No such file or directory" when the
/// library or this crate gave it an operation and a file, else its text.
pub fn io(e: &io::Error) -> String {
    match e
        .get_ref()
        .and_then(|i| i.downcast_ref::<ubio::error::Error>())
    {
        Some(c) => match &c.path {
            Some(p) => format!("{} {}: {}", action(c.op), quote(p), reason(&c.source)),
            None => format!("{}: {}", action(c.op), reason(&c.source)),
        },
        None => strip_os_error(&e.to_string()),
    }
}

/// A copy's error in GNU's words; a clone that --reflink=always asked for
/// and the filesystem refused names both files: "failed to clone 'dst'
/// from 'src': reason".
pub fn copy(e: &io::Error, src: &Path, dst: &Path) -> String {
    let op = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<ubio::error::Error>())
        .map(|c| c.op);
    match op {
        Some("clone to") => format!(
            "failed to clone {} from {}: {}",
            quote(dst),
            quote(src),
            reason(e)
        ),
        _ => io(e),
    }
}

/// `e` with its file: "cannot `op` 'path': reason", whatever context `e` has.
pub fn on(op: &str, path: &Path, e: &io::Error) -> String {
    format!("{} {}: {}", action(op), quote(path), reason(e))
}

/// An error that ends a command: its chain of contexts, as GNU prints them
/// (the io::Error at the bottom in GNU's form).
pub fn anyhow(e: &anyhow::Error) -> String {
    if let Some(io_err) = e.downcast_ref::<io::Error>() {
        if e.chain().len() == 1 {
            return io(io_err);
        }
    }
    strip_os_error(&format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gnu_form() {
        let e = ubio::error::context(
            io::Error::from_raw_os_error(libc::ENOENT),
            "stat",
            Some(Path::new("x")),
        );
        assert_eq!(io(&e), "cannot stat 'x': No such file or directory");
        assert_eq!(reason(&e), "No such file or directory");
        let e = ubio::error::context(
            io::Error::from_raw_os_error(libc::ENOSPC),
            "write",
            Some(Path::new("it's")),
        );
        assert_eq!(io(&e), r"error writing 'it'\''s': No space left on device");
        assert_eq!(
            strip_os_error("a: Permission denied (os error 13); b (os error x)"),
            "a: Permission denied; b (os error x)"
        );
        let a = anyhow::Error::from(io::Error::from_raw_os_error(libc::EACCES)).context("open /x");
        assert_eq!(anyhow(&a), "open /x: Permission denied");
    }
}
