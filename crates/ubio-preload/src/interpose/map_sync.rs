//! mmap of a file, fsync, fdatasync, posix_fadvise.
//!
//! A mapped file's pages belong to the mapping: mmap marks the description
//! pass-through (the write-behind is flushed first) and the shim leaves its
//! pages alone from then on, at close too. (The kernel would not drop mapped
//! pages anyway; this also keeps the shim from dropping pages the mapping
//! has not touched yet but is about to.)
//!
//! fsync/fdatasync push the write-behind out first, then make the real
//! call; a deferred writeback error is reported by them.
//!
//! posix_fadvise(SEQUENTIAL) on a managed file is accepted and not made:
//! it doubles the readahead window, so readahead would run past the range
//! the stream snapshots before each read and the stream would take its own
//! readahead for pages cached by others (and keep them). Other advice is
//! passed on. Advice changes no data, only caching.

use super::{bfd, shim};
use crate::desc::set_errno;
use crate::fdtable;
use crate::real::f;
use crate::registry;
use libc::{c_int, c_void, off_t, size_t};

/// mmap of a file: the description becomes pass-through, then the real
/// call, made in every case.
macro_rules! mmap_fns {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            addr: *mut c_void,
            len: size_t,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            off: off_t,
        ) -> *mut c_void {
            if fd >= 0 && flags & libc::MAP_ANONYMOUS == 0 {
                shim(|| registry::lookup_or_create(fd).map(|d| d.pass_through(bfd(fd))));
            }
            // SAFETY: the caller's arguments, passed on unchanged.
            unsafe { f::$name()(addr, len, prot, flags, fd, off) }
        }
    )*};
}

mmap_fns!(mmap, mmap64);

fn sync(fd: c_int, real: unsafe extern "C" fn(c_int) -> c_int) -> c_int {
    let flushed = shim(|| Some(fdtable::get(fd)?.stream()?.flush(bfd(fd))));
    // SAFETY: the caller's argument, passed on unchanged.
    let r = unsafe { real(fd) };
    match flushed {
        Some(Err(e)) if r == 0 => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
        _ => r,
    }
}

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    sync(fd, f::fsync())
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    sync(fd, f::fdatasync())
}

unsafe fn fadvise_common(
    real: unsafe extern "C" fn(c_int, off_t, off_t, c_int) -> c_int,
    fd: c_int,
    off: off_t,
    len: off_t,
    advice: c_int,
) -> c_int {
    if advice == libc::POSIX_FADV_SEQUENTIAL && shim(|| registry::managed(fd)).is_some() {
        return 0;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { real(fd, off, len, advice) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: off_t, len: off_t, advice: c_int) -> c_int {
    // SAFETY: forwarding the caller's call.
    unsafe { fadvise_common(f::posix_fadvise(), fd, off, len, advice) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise64(
    fd: c_int,
    off: off_t,
    len: off_t,
    advice: c_int,
) -> c_int {
    // SAFETY: forwarding the caller's call.
    unsafe { fadvise_common(f::posix_fadvise64(), fd, off, len, advice) }
}
