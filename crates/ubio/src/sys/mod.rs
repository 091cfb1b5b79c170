//! Thin, documented wrappers over the system calls ubio is built on.
//!
//! Each function is one call: it converts arguments, makes the call and maps
//! `-1`/errno to `io::Error`. Policy lives elsewhere. Unknown flag bits are
//! carried through unchanged, so a newer kernel's flag can be passed before
//! this module learns its name.

mod cache;
mod copy;
mod fanotify;
mod fs;
mod ids;
mod proc;
mod rw;

pub use cache::{
    cachestat, fadvise, fdatasync, mincore_range, mincore_resident, sync_file_range, Advice,
    CacheStat, FileRange, SyncFlags,
};
pub use copy::{
    copy_file_range, ficlone, fiemap, link_following, mkfifo, mknod, seek_data, seek_hole,
    set_times_nofollow, Extent, FIEMAP_EXTENT_DELALLOC, FIEMAP_EXTENT_LAST,
    FIEMAP_EXTENT_UNWRITTEN,
};
pub use fanotify::{
    fanotify_init, fanotify_mark, fanotify_mark_fd, fanotify_read, Event as FanEvent, EventMask,
    InitFlags as FanInit, MarkFlags,
};
pub use fs::{
    access, access_fd, close, dup_at_least, fallocate, fs_magic, fstat, ftruncate, geteuid, getfl,
    kernel_at_least, kernel_release, lseek, lseek_cur, lseek_set, mounted_read_only, reopen,
    statx_birth, statx_dio_align, DioAlign, FsMagic,
};
pub use ids::{group_id, peer_cred, user_id, PeerCred};
pub use proc::{
    address_space_limit, clock_boottime, clock_monotonic, clock_ticks, cpu_time, demote_on_sigxcpu,
    demotions, fifo_priority, forget_on_sigxcpu, gettid, kill, open_files_limit, pidfd_getfd,
    pidfd_open, poll_readable, poll_readable_any, raise_default, raise_open_files_limit, set_nice,
    set_rttime_limit, set_scheduler, setns, Namespaces, Scheduler, Usage,
};
pub use rw::{max_rw_count, preadv2, pwritev2, RwFlags};

use std::io;

/// Map a libc return value of `-1` to the thread's errno.
pub(crate) fn cvt(ret: libc::c_long) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// `path` as the C string a call takes (InvalidInput if it holds a NUL).
pub(crate) fn c_path(path: &std::path::Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// The system page size, read once.
pub fn page_size() -> u64 {
    use std::sync::OnceLock;
    static PAGE: OnceLock<u64> = OnceLock::new();
    // SAFETY: sysconf has no memory-safety preconditions.
    *PAGE.get_or_init(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64)
}
