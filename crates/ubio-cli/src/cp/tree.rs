//! What to copy: the sources named on the command line, and with -r the trees
//! below them, as a flat list of steps in copy order (a directory before its
//! contents, its metadata after them).

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::msg;

#[derive(Clone, Copy)]
pub enum Kind {
    File,
    /// Make the directory (its contents follow).
    DirStart,
    /// Its contents are done: set its mode and times.
    DirEnd,
    Symlink,
    Fifo,
}

#[derive(Clone)]
pub struct Step {
    pub kind: Kind,
    pub src: PathBuf,
    pub dst: PathBuf,
    pub meta: Metadata,
    /// A directory --parents made on the way to a source: -v prints it
    /// without quotes, as GNU does.
    pub parent: bool,
    /// Found where symlinks are followed (-L anywhere; -H, or a copy
    /// without -r, on the command line): another source may reach this
    /// file through a symlink, whatever its link count.
    pub via_symlinks: bool,
}

/// Which symlinks are followed (GNU's -P, -H, -L).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deref {
    Never,
    CommandLine,
    Always,
}

/// How to walk the sources.
pub struct Walk {
    pub recursive: bool,
    pub deref: Deref,
    /// -x: directories on other filesystems are made, but not entered.
    pub one_file_system: bool,
    /// --copy-contents: fifos and devices are read like files, also with -r.
    pub copy_contents: bool,
}

/// A problem found while planning: reported, counted as a failure, and the
/// rest goes on.
pub struct Problem(pub String);

/// Plan the copy of `src` to `dst`. Directories need -r; with -r, fifos are
/// recreated and sockets and devices are skipped (both reported).
pub fn plan(src: &Path, dst: &Path, w: &Walk, steps: &mut Vec<Step>, problems: &mut Vec<Problem>) {
    let meta = if w.deref == Deref::Never {
        src.symlink_metadata()
    } else {
        src.metadata()
    };
    let meta = match meta {
        Ok(m) => m,
        Err(e) => {
            problems.push(Problem(msg::on("stat", src, &e)));
            return;
        }
    };
    if meta.is_dir() {
        if !w.recursive {
            problems.push(Problem(format!(
                "-r not specified; omitting directory {}",
                msg::quote(src)
            )));
            return;
        }
        // GNU's order: overwriting a file with a directory is the error first.
        let onto_file = dst.metadata().is_ok_and(|m| !m.is_dir());
        if let Some(inside) = inside_itself(src, dst).filter(|_| !onto_file) {
            problems.push(Problem(inside));
            return;
        }
    }
    let root_dev = meta.dev();
    walk(
        src,
        dst,
        meta,
        w,
        root_dev,
        w.deref != Deref::Never,
        &mut Vec::new(),
        steps,
        problems,
    );
}

/// The directories `src` names on the way (a/b for a/b/f), for --parents:
/// each as a step that makes it below `dir` if missing.
pub fn parents(src: &Path, dir: &Path, steps: &mut Vec<Step>, problems: &mut Vec<Problem>) -> bool {
    let mut sofar = PathBuf::new();
    let comps: Vec<_> = src
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .collect();
    for c in comps {
        sofar.push(c);
        if matches!(
            c,
            std::path::Component::RootDir | std::path::Component::CurDir
        ) {
            continue;
        }
        match sofar.metadata() {
            Ok(m) if m.is_dir() => steps.push(Step {
                kind: Kind::DirStart,
                src: sofar.clone(),
                dst: below(dir, &sofar),
                meta: m,
                parent: true,
                via_symlinks: false,
            }),
            Ok(_) => {
                problems.push(Problem(format!(
                    "{} is not a directory",
                    msg::quote(&sofar)
                )));
                return false;
            }
            Err(e) => {
                problems.push(Problem(msg::on("stat", &sofar, &e)));
                return false;
            }
        }
    }
    true
}

/// `path` (relative or absolute) re-rooted below `dir`, for --parents.
pub fn below(dir: &Path, path: &Path) -> PathBuf {
    dir.join(path.strip_prefix("/").unwrap_or(path))
}

#[allow(clippy::too_many_arguments)]
fn walk(
    src: &Path,
    dst: &Path,
    meta: Metadata,
    w: &Walk,
    root_dev: u64,
    via_symlinks: bool,
    ancestors: &mut Vec<(u64, u64)>,
    steps: &mut Vec<Step>,
    problems: &mut Vec<Problem>,
) {
    let ft = meta.file_type();
    let step = |kind, meta| Step {
        kind,
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
        meta,
        parent: false,
        via_symlinks,
    };
    if ft.is_dir() {
        let id = (meta.dev(), meta.ino());
        if ancestors.contains(&id) {
            problems.push(Problem(format!(
                "cannot copy cyclic symbolic link {}",
                msg::quote(src)
            )));
            return;
        }
        steps.push(step(Kind::DirStart, meta.clone()));
        if w.one_file_system && meta.dev() != root_dev {
            // GNU cp -x makes the mount point but copies nothing below it.
            steps.push(step(Kind::DirEnd, meta));
            return;
        }
        ancestors.push(id);
        match read_dir_sorted(src) {
            Ok(entries) => {
                for name in entries {
                    let (s, d) = (src.join(&name), dst.join(&name));
                    let m = if w.deref == Deref::Always {
                        s.metadata()
                    } else {
                        s.symlink_metadata()
                    };
                    let via = w.deref == Deref::Always;
                    match m {
                        Ok(m) => walk(&s, &d, m, w, root_dev, via, ancestors, steps, problems),
                        Err(e) => problems.push(Problem(msg::on("stat", &s, &e))),
                    }
                }
            }
            Err(e) => problems.push(Problem(msg::on("read directory", src, &e))),
        }
        ancestors.pop();
        steps.push(step(Kind::DirEnd, meta));
    } else if ft.is_symlink() {
        steps.push(step(Kind::Symlink, meta));
    } else if ft.is_fifo() && w.recursive && !w.copy_contents {
        steps.push(step(Kind::Fifo, meta));
    } else if w.recursive
        && (ft.is_socket() || (!w.copy_contents && (ft.is_block_device() || ft.is_char_device())))
    {
        let what = if ft.is_socket() { "socket" } else { "device" };
        problems.push(Problem(format!(
            "skipping {what} {} (cp -r recreates fifos; sockets and devices are not copied)",
            msg::quote(src)
        )));
    } else {
        steps.push(step(Kind::File, meta));
    }
}

fn read_dir_sorted(dir: &Path) -> std::io::Result<Vec<std::ffi::OsString>> {
    let mut names = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()?;
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
            "cannot copy a directory, {}, into itself, {}",
            msg::quote(src),
            msg::quote(dst)
        )
    })
}
