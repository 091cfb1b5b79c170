//! What to copy: the sources named on the command line, and with -r the trees
//! below them, as a flat list of steps in copy order (a directory before its
//! contents, its metadata after them).

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

pub enum Kind {
    File,
    /// Make the directory (its contents follow).
    DirStart,
    /// Its contents are done: set its mode and times.
    DirEnd,
    Symlink,
    Fifo,
}

pub struct Step {
    pub kind: Kind,
    pub src: PathBuf,
    pub dst: PathBuf,
    pub meta: Metadata,
}

/// A problem found while planning: reported, counted as a failure, and the
/// rest goes on.
pub struct Problem(pub String);

/// Plan the copy of `src` to `dst`. Without -r a command-line symlink is
/// followed and a directory is refused; with -r nothing is followed, fifos
/// are recreated and sockets and devices are skipped (both reported).
pub fn plan(
    src: &Path,
    dst: &Path,
    recursive: bool,
    steps: &mut Vec<Step>,
    problems: &mut Vec<Problem>,
) {
    let meta = if recursive {
        src.symlink_metadata()
    } else {
        src.metadata()
    };
    let meta = match meta {
        Ok(m) => m,
        Err(e) => {
            problems.push(Problem(
                ubio::error::context(e, "stat", Some(src)).to_string(),
            ));
            return;
        }
    };
    if meta.is_dir() {
        if !recursive {
            problems.push(Problem(format!(
                "-r not specified; omitting directory '{}'",
                src.display()
            )));
            return;
        }
        if let Some(inside) = inside_itself(src, dst) {
            problems.push(Problem(inside));
            return;
        }
    }
    walk(src, dst, meta, recursive, steps, problems);
}

fn walk(
    src: &Path,
    dst: &Path,
    meta: Metadata,
    recursive: bool,
    steps: &mut Vec<Step>,
    problems: &mut Vec<Problem>,
) {
    let ft = meta.file_type();
    let step = |kind, meta| Step {
        kind,
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
        meta,
    };
    if ft.is_dir() {
        steps.push(step(Kind::DirStart, meta.clone()));
        match read_dir_sorted(src) {
            Ok(entries) => {
                for name in entries {
                    let (s, d) = (src.join(&name), dst.join(&name));
                    match s.symlink_metadata() {
                        Ok(m) => walk(&s, &d, m, recursive, steps, problems),
                        Err(e) => problems.push(Problem(
                            ubio::error::context(e, "stat", Some(&s)).to_string(),
                        )),
                    }
                }
            }
            Err(e) => problems.push(Problem(
                ubio::error::context(e, "read directory", Some(src)).to_string(),
            )),
        }
        steps.push(step(Kind::DirEnd, meta));
    } else if ft.is_symlink() {
        steps.push(step(Kind::Symlink, meta));
    } else if ft.is_fifo() && recursive {
        steps.push(step(Kind::Fifo, meta));
    } else if recursive && (ft.is_socket() || ft.is_block_device() || ft.is_char_device()) {
        let what = if ft.is_socket() { "socket" } else { "device" };
        problems.push(Problem(format!(
            "skipping {what} '{}' (cp -r recreates fifos; sockets and devices are not copied)",
            src.display()
        )));
    } else {
        steps.push(step(Kind::File, meta));
    }
}

fn read_dir_sorted(dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    let mut names = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<Vec<_>>>()?;
    names.sort();
    Ok(names)
}

/// Copying a directory into itself (or below itself) would never end.
fn inside_itself(src: &Path, dst: &Path) -> Option<String> {
    let src_real = src.canonicalize().ok()?;
    // The destination may not exist yet: resolve its nearest existing ancestor.
    let mut existing = dst.to_path_buf();
    let mut rest = Vec::new();
    let dst_real = loop {
        if let Ok(r) = existing.canonicalize() {
            break rest.iter().rev().fold(r, |p: PathBuf, n| p.join(n));
        }
        rest.push(existing.file_name()?.to_owned());
        existing = match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
    };
    dst_real.starts_with(&src_real).then(|| {
        format!(
            "cannot copy a directory, '{}', into itself, '{}'",
            src.display(),
            dst.display()
        )
    })
}
