//! Copying one file for `ubio cp`: opening both ends as GNU cp does, the
//! data through [`ubio::copy`] (clone, or a reader and a writer overlapped,
//! holes kept, a changing source reported), then the metadata.

use super::progress::Progress;
use super::{Options, Preserve};
use crate::msg;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;
use ubio::copy::Method;

/// One copied file, for the summary.
#[derive(Debug, serde::Serialize)]
pub struct FileReport {
    pub bytes: u64,
    /// None with --attributes-only (no data copied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    /// Bytes left as holes rather than written.
    pub hole_bytes: u64,
    pub seconds: f64,
    /// The streams' statistics (absent for a clone).
    pub src_stats: Option<ubio::Stats>,
    pub dst_stats: Option<ubio::Stats>,
}

/// A failed copy: the message (in GNU's form, naming the operation and the
/// file) and, once the destination was opened, how much of it was written.
pub struct CopyError {
    pub message: String,
    /// (bytes copied, bytes expected) when the destination exists but is partial.
    pub incomplete: Option<(u64, u64)>,
    /// The source changed while it was read (the destination holds what was read).
    pub source_changed: bool,
}

impl From<io::Error> for CopyError {
    fn from(error: io::Error) -> Self {
        CopyError {
            message: msg::io(&error),
            incomplete: None,
            source_changed: false,
        }
    }
}

impl CopyError {
    fn new(message: String) -> Self {
        CopyError {
            message,
            incomplete: None,
            source_changed: false,
        }
    }
}

fn ctx<'a>(op: &'static str, path: &'a Path) -> impl Fn(io::Error) -> io::Error + 'a {
    move |e| ubio::error::context(e, op, Some(path))
}

/// Copy the regular file (or, without -r, whatever `src` opens to) `src` to
/// `dst`, following a symlink at `dst` as GNU cp does. What to do with an
/// existing `dst` (-n, -u, -i, backups, the same file) was decided before;
/// `exclusive`: none can be there (its directory was just made), so one
/// that is fails the copy.
pub fn copy_file(
    src: &Path,
    dst: &Path,
    exclusive: bool,
    opts: &Options,
    progress: &mut Progress,
) -> Result<Box<FileReport>, CopyError> {
    copy_file_then(src, dst, exclusive, opts, progress, false)?.close()
}

/// A copied file whose destination is still open, its writeback started.
pub struct Pending {
    dst_file: ubio::File,
    report: Box<FileReport>,
    /// (bytes copied, bytes expected), for a failure at close.
    counts: (u64, u64),
}

impl Pending {
    /// Bytes that may still be dirty or under writeback.
    pub fn bytes(&self) -> u64 {
        self.report.bytes
    }

    /// Wait for the writeback (often done by now), drop the pages, close:
    /// the file's report, or the error with the destination named incomplete.
    pub fn close(self) -> Result<Box<FileReport>, CopyError> {
        let mut report = self.report;
        match self.dst_file.close() {
            Ok(stats) => {
                if report.method != Some(Method::Clone) {
                    report.dst_stats = Some(stats);
                }
                Ok(report)
            }
            Err(error) => Err(CopyError {
                message: msg::io(&error),
                incomplete: Some(self.counts),
                source_changed: false,
            }),
        }
    }
}

/// [`copy_file`] up to the destination's close; with `defer` (and without
/// --sync) its writeback is started but not waited for: close the
/// [`Pending`] later, after other files were copied meanwhile.
pub fn copy_file_then(
    src: &Path,
    dst: &Path,
    exclusive: bool,
    opts: &Options,
    progress: &mut Progress,
    defer: bool,
) -> Result<Pending, CopyError> {
    let start = Instant::now();
    // Stat before opening: opening probes the file with a read at its end,
    // which updates its access time, and -p must keep the old one.
    let before_open = std::fs::metadata(src).ok();
    let src_file = opts
        .data_path
        .apply(ubio::OpenOptions::new().read(true).backend(opts.backend))
        .open(src)
        .map_err(|e| {
            CopyError::new(format!(
                "cannot open {} for reading: {}",
                msg::quote(src),
                msg::reason(&e)
            ))
        })?;
    let src_meta = src_file.get_ref().metadata().map_err(ctx("stat", src))?;
    let src_meta = before_open
        .filter(|m| m.dev() == src_meta.dev() && m.ino() == src_meta.ino())
        .unwrap_or(src_meta);
    let dst_file = open_destination(dst, exclusive, src_meta.mode(), opts).map_err(|e| {
        CopyError::new(format!(
            "cannot create regular file {}: {}",
            msg::quote(dst),
            msg::reason(&e)
        ))
    })?;
    let expected = if opts.attributes_only {
        0
    } else {
        src_meta.len()
    };
    let mut copied = 0u64;
    let result = (|| -> io::Result<(Option<Method>, u64)> {
        let done = if opts.attributes_only {
            None
        } else {
            let copy = ubio::copy::copy(&src_file, &dst_file, &opts.copy, &mut |n| progress.add(n));
            Some(copy.map_err(|e| {
                copied = e.complete;
                e.error
            })?)
        };
        copied = done.map_or(0, |d| d.bytes);
        if defer && !opts.sync {
            dst_file.start_writeback();
        } else {
            dst_file.flush_writeback()?;
        }
        if opts.preserve.any() {
            preserve_metadata(dst_file.get_ref(), dst, src, &src_meta, &opts.preserve)?;
        }
        if opts.sync {
            dst_file.sync_all()?;
        }
        Ok((done.map(|d| d.method), done.map_or(0, |d| d.hole_bytes)))
    })();
    let src_stats = src_file.close();
    let total = if src_meta.is_file() { expected } else { copied };
    match result {
        Ok((method, hole_bytes)) => Ok(Pending {
            dst_file,
            report: Box::new(FileReport {
                bytes: copied,
                method,
                hole_bytes,
                seconds: start.elapsed().as_secs_f64(),
                src_stats: (method != Some(Method::Clone))
                    .then(|| src_stats.ok())
                    .flatten(),
                dst_stats: None,
            }),
            counts: (copied, total),
        }),
        Err(error) => {
            // The copy's error is the one to report; the close's is lost.
            let _ = dst_file.close();
            Err(CopyError {
                source_changed: ubio::copy::SourceChanged::of(&error).is_some(),
                message: msg::copy(&error, src, dst),
                incomplete: Some((copied, total)),
            })
        }
    }
}

/// Open (create or truncate) the destination; with -f, remove a destination
/// that cannot be opened and try once more, as GNU cp does. `exclusive`:
/// create it, never open what is there (nor remove it).
fn open_destination(
    dst: &Path,
    exclusive: bool,
    src_mode: u32,
    opts: &Options,
) -> io::Result<ubio::File> {
    let open = || {
        opts.data_path
            .apply(
                ubio::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .create_new(exclusive)
                    .truncate(!opts.attributes_only)
                    .mode(opts.preserve.new_file_mode(src_mode))
                    .backend(opts.backend)
                    .window(opts.window),
            )
            .open(dst)
    };
    match open() {
        Err(e) if opts.force && !exclusive && dst.symlink_metadata().is_ok() => {
            std::fs::remove_file(dst).map_err(|_| e)?;
            open()
        }
        r => r,
    }
}

/// --preserve on an open file, in GNU cp's order: owner and group first
/// (chown clears file capabilities and setuid bits), then extended
/// attributes, then the mode, then access and modification times.
pub fn preserve_metadata(
    file: &std::fs::File,
    path: &Path,
    src_path: &Path,
    src: &std::fs::Metadata,
    what: &Preserve,
) -> io::Result<()> {
    let mut owned_as_source = true;
    if what.ownership {
        let now = file.metadata().map_err(ctx("stat", path))?;
        let chown = |uid, gid| std::os::unix::fs::fchown(file, uid, gid);
        owned_as_source = preserve_owner(chown, (now.uid(), now.gid()), src, true)
            .map_err(ctx("preserve ownership of", path))?;
    }
    super::copier::preserve_xattrs(src_path, file, path, what)?;
    if what.mode {
        let mut mode = special_bits_kept(src.mode() & 0o7777, owned_as_source);
        // As GNU cp: a source without setuid, setgid and sticky gives its
        // permissions only, and the copy keeps such bits as it has (a new
        // directory's setgid from its parent, an existing destination's own).
        if src.mode() & 0o7000 == 0 {
            mode |= file.metadata().map_err(ctx("stat", path))?.mode() & 0o7000;
        }
        preserve_mode(file, path, src_path, mode, src.is_dir())?;
    }
    if what.timestamps {
        let times = std::fs::FileTimes::new()
            .set_accessed(src.accessed().map_err(ctx("stat", path))?)
            .set_modified(src.modified().map_err(ctx("stat", path))?);
        file.set_times(times)
            .map_err(ctx("preserve timestamps of", path))?;
    }
    Ok(())
}

/// The POSIX ACLs (a directory's default one too) are part of the mode
/// (GNU cp -p keeps them; --preserve=xattr alone does not): the copy gets
/// `mode` and then exactly the source's ACLs, through the system.posix_acl_*
/// attributes that hold them. A source without one makes the copy's go.
fn preserve_mode(
    file: &std::fs::File,
    path: &Path,
    src_path: &Path,
    mode: u32,
    is_dir: bool,
) -> io::Result<()> {
    use xattr::FileExt;
    const ACCESS: &str = "system.posix_acl_access";
    const DEFAULT: &str = "system.posix_acl_default";
    let acls: &[&str] = if is_dir {
        &[ACCESS, DEFAULT]
    } else {
        &[ACCESS]
    };
    let unsupported =
        |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENODATA));
    let perms = ctx("preserve permissions for", path);
    // The mode first: an ACL holds no setuid, setgid or sticky bit, and
    // removing an ACL leaves the mode as it is.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(&perms)?;
    for acl in acls {
        let wanted = match xattr::get_deref(src_path, acl) {
            Ok(v) => v,
            Err(e) if unsupported(&e) => None,
            Err(e) => return Err(ctx("read the ACL of", src_path)(e)),
        };
        match wanted {
            Some(value) => file.set_xattr(acl, &value).map_err(&perms)?,
            None => match file.remove_xattr(acl) {
                Err(e) if !unsupported(&e) => return Err(perms(e)),
                _ => {}
            },
        }
    }
    Ok(())
}

/// Give a copy the source's owner and group with `chown` (fchown or
/// lchown), its owner and group being `now`. As GNU cp: one who may not
/// give it away (not root) still gives it the source's group if they are
/// in it (`group_alone`: GNU does not try that for symlinks); what cannot
/// be kept is not an error. Whether both were kept.
pub fn preserve_owner(
    chown: impl Fn(Option<u32>, Option<u32>) -> io::Result<()>,
    now: (u32, u32),
    src: &std::fs::Metadata,
    group_alone: bool,
) -> io::Result<bool> {
    let want = (src.uid(), src.gid());
    if now == want {
        return Ok(true);
    }
    let not_allowed = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EPERM | libc::EINVAL));
    match chown(Some(want.0), Some(want.1)) {
        Ok(()) => Ok(true),
        Err(e) if not_allowed(&e) && !group_alone => Ok(false),
        Err(e) if not_allowed(&e) => match chown(None, Some(want.1)) {
            Ok(()) => Ok(false),
            Err(e) if not_allowed(&e) => Ok(false),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// The mode to give a copy: setuid, setgid and sticky only where the copy
/// has the source's owner and group (GNU cp; a user's copy of a setuid
/// root program is not setuid).
pub fn special_bits_kept(mode: u32, owned_as_source: bool) -> u32 {
    if owned_as_source {
        mode
    } else {
        mode & 0o777
    }
}
