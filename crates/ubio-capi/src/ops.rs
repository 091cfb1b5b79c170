//! What the C and Python bindings offer beyond a file handle: a file's
//! page-cache counts and eviction by path, and errno for ubio's errors. Shared by both bindings (the Python package links this crate).

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use ubio::evict::Evicted;
use ubio::residency::FileCount;

fn ctx<'a>(op: &'static str, path: &'a Path) -> impl Fn(io::Error) -> io::Error + 'a {
    move |e| ubio::error::context(e, op, Some(path))
}

/// The page-cache counts of the file at `path` (on overlayfs, of the real
/// file holding its pages).
pub fn cache_info(path: &Path) -> io::Result<FileCount> {
    let file = std::fs::File::open(path).map_err(ctx("open", path))?;
    FileCount::of(file.as_fd()).map_err(ctx("cachestat", path))
}

/// [`ubio::evict::evict`] of the file at `path`.
pub fn evict(path: &Path, sync: bool) -> io::Result<Evicted> {
    let file = std::fs::File::open(path).map_err(ctx("open", path))?;
    ubio::evict::evict(file.as_fd(), path, sync)
}

/// The errno for an error from ubio: the kernel's where there is one,
/// otherwise the closest for its kind (EIO when nothing fits).
pub fn errno_of(err: &io::Error) -> i32 {
    if let Some(n) = ubio::error::raw_os_error(err) {
        return n;
    }
    // "Try again": the source of a copy changed while it was read.
    if ubio::copy::SourceChanged::of(err).is_some() {
        return libc::EAGAIN;
    }
    use io::ErrorKind::*;
    match err.kind() {
        NotFound => libc::ENOENT,
        PermissionDenied => libc::EACCES,
        AlreadyExists => libc::EEXIST,
        InvalidInput | InvalidData => libc::EINVAL,
        Unsupported => libc::EOPNOTSUPP,
        Interrupted => libc::EINTR,
        WouldBlock => libc::EAGAIN,
        OutOfMemory => libc::ENOMEM,
        _ => libc::EIO,
    }
}
