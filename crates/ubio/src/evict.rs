//! Dropping a whole file's clean pages from the page cache, as `ubio evict`,
//! the C API's `ubio_evict` and Python's `ubio.evict` do.

use crate::residency::{FileCount, PageHolder};
use crate::sys::{self, Advice};
use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;

/// The file's page-cache state before and after [`evict`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Evicted {
    pub before: FileCount,
    pub after: FileCount,
}

/// Drop the clean pages of the file behind `fd` (posix_fadvise DONTNEED over
/// the whole file); with `sync`, first write dirty pages back and wait
/// (sync_file_range WAIT_BEFORE|WRITE|WAIT_AFTER, which promises no
/// durability), so they can go too. On overlayfs the real file's pages are
/// the ones dropped and counted (through the overlay descriptor where the
/// real file cannot be found: fadvise is forwarded, fdatasync waits). Refused (EOPNOTSUPP) on tmpfs and ramfs,
/// where the cached pages are the file's storage. `path` names the file in
/// errors.
pub fn evict(fd: BorrowedFd<'_>, path: &Path, sync: bool) -> io::Result<Evicted> {
    let ctx = |op| move |e| crate::error::context(e, op, Some(path));
    let fs = sys::fs_magic(fd).map_err(ctx("statfs"))?;
    if fs.pages_are_storage() {
        // Kind Unsupported: the C API and Python report it as EOPNOTSUPP.
        let why = format!("on {} the cached pages are the file's storage", fs.name());
        return Err(ctx("evict")(io::Error::new(
            io::ErrorKind::Unsupported,
            why,
        )));
    }
    let holder = PageHolder::of(fd).map_err(ctx("find the pages of"))?;
    let before = FileCount::with(&holder, fd).map_err(ctx("cachestat"))?;
    if sync {
        holder.write_back(fd).map_err(ctx("write back"))?;
    }
    sys::fadvise(holder.fd(fd), 0, 0, Advice::DontNeed).map_err(ctx("fadvise"))?;
    let after = FileCount::with(&holder, fd).map_err(ctx("cachestat"))?;
    Ok(Evicted { before, after })
}
