//! What the C and Python bindings offer beyond a file handle: copying a file
//! through two streams, and a file's page-cache counts and eviction by path. Shared by both bindings (the Python package links this crate).

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use ubio::evict::Evicted;
use ubio::residency::FileCount;

/// Chunk size of [`copy`]: large enough that per-call costs vanish.
const COPY_CHUNK: usize = 1 << 20;

fn ctx<'a>(op: &'static str, path: &'a Path) -> impl Fn(io::Error) -> io::Error + 'a {
    move |e| ubio::error::context(e, op, Some(path))
}

/// What [`copy`] did.
#[derive(Debug, Clone)]
pub struct Copied {
    pub bytes: u64,
    pub src: ubio::Stats,
    pub dst: ubio::Stats,
}

/// Copy `src` to `dst` (created or truncated, with the source's permission
/// bits) through two ubio streams opened with `opts`: neither file's new
/// pages stay in the page cache. Holes are written as zeros and nothing is
/// cloned: `ubio cp` does both, and trees.
pub fn copy(src: &Path, dst: &Path, opts: &ubio::OpenOptions) -> io::Result<Copied> {
    let input = opts.clone().read(true).write(false).open(src)?;
    let mode = input
        .get_ref()
        .metadata()
        .map_err(ctx("stat", src))?
        .permissions()
        .mode();
    let output = opts
        .clone()
        .read(false)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode & 0o7777)
        .open(dst)?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut off = 0u64;
    loop {
        let n = match input.read_at(&mut buf, off) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        output.write_all_at(&buf[..n], off)?;
        off += n as u64;
    }
    let dst_stats = output.close()?;
    let src_stats = input.close()?;
    Ok(Copied {
        bytes: off,
        src: src_stats,
        dst: dst_stats,
    })
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
