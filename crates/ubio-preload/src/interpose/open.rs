//! open and friends, fopen/fclose. A new descriptor gets no state (that is
//! made at its first read or write); any state left in its slot belonged to
//! a descriptor closed behind our back (a raw close syscall) and is dropped.
//! fclose finishes the stream of its descriptor like close.
//!
//! The variadic `mode` of open/openat is taken as a third fixed argument: on
//! x86_64 and aarch64 Linux a variadic int travels in the same register, and
//! it is passed on unchanged (open ignores it without O_CREAT/O_TMPFILE).

use super::shim;
use crate::desc::set_errno;
use crate::real::f;
use crate::registry;
use libc::{c_char, c_int, c_long, c_uint, FILE};

fn new_fd(fd: c_int) -> c_int {
    if fd >= 0 {
        shim(|| {
            registry::forget(fd);
            Some(())
        });
    }
    fd
}

#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::open()(path, flags, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::open64()(path, flags, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::openat()(dirfd, path, flags, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::openat64()(dirfd, path, flags, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn creat(path: *const c_char, mode: libc::mode_t) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::creat()(path, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: libc::mode_t) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::creat64()(path, mode) })
}

// The _FORTIFY_SOURCE entry points (open without a mode).
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::__open_2()(path, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::__open64_2()(path, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::__openat_2()(dirfd, path, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_fd(unsafe { f::__openat64_2()(dirfd, path, flags) })
}

/// syscall(2): only openat2 (which glibc 2.36 has no wrapper for) is looked
/// at. The six argument registers are passed on as they came (a caller that
/// passed fewer leaves unused values that the kernel ignores).
#[no_mangle]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    // SAFETY: the caller's arguments, passed on unchanged.
    let r = unsafe { f::syscall()(n, a1, a2, a3, a4, a5, a6) };
    if n == libc::SYS_openat2 && r >= 0 {
        new_fd(r as c_int);
    }
    r
}

fn new_stream(fp: *mut FILE) -> *mut FILE {
    if !fp.is_null() {
        // SAFETY: a FILE that fopen just returned.
        new_fd(unsafe { libc::fileno(fp) });
    }
    fp
}

// stdio reads and writes go through glibc's internal read/write, which no
// LD_PRELOAD can see: a stdio-only file is not managed, but the state of its
// descriptor is kept right (a stale slot cleared here, finished at fclose).
#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_stream(unsafe { f::fopen()(path, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE {
    // SAFETY: the caller's arguments, passed on unchanged.
    new_stream(unsafe { f::fopen64()(path, mode) })
}

#[no_mangle]
pub unsafe extern "C" fn fclose(fp: *mut FILE) -> c_int {
    let finished = if fp.is_null() {
        None
    } else {
        shim(|| {
            // SAFETY: the caller's open FILE.
            let fd = unsafe { libc::fileno(fp) };
            crate::fdtable::get(fd)?;
            // Push stdio's buffer out first so the write-behind sees the tail.
            // SAFETY: as above.
            unsafe { libc::fflush(fp) };
            Some(registry::before_close(fd))
        })
    };
    // SAFETY: the caller's argument, passed on unchanged.
    let r = unsafe { f::fclose()(fp) };
    match finished {
        Some(Err(e)) if r == 0 => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            libc::EOF
        }
        _ => r,
    }
}
