//! dup, dup2, dup3, fcntl (F_DUPFD*, F_SETFL), close, close_range. Duplicates
//! share their description's state; the stream is finished when the last
//! descriptor of this process that refers to it closes, before the real
//! close (the finish needs the descriptor). A writeback error the finish
//! reports comes back from close, as from the library's `File::close`.

use super::{bfd, shim};
use crate::desc::{self, set_errno};
use crate::real::f;
use crate::registry;
use crate::{fdtable, interpose};
use libc::{c_int, c_uint, c_ulong};

/// Before a dup: the state of `old` (made now for a regular file, so that
/// both descriptors share one stream from the start).
fn source(old: c_int) -> Option<std::sync::Arc<desc::Desc>> {
    shim(|| registry::lookup_or_create(old))
}

/// After a dup: `new` refers to `old`'s description.
fn dup_done(d: Option<std::sync::Arc<desc::Desc>>, new: c_int) -> c_int {
    if new >= 0 {
        shim(|| {
            match d {
                Some(d) => registry::share(d, new),
                None => registry::forget(new),
            }
            Some(())
        });
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    let d = source(old);
    // SAFETY: the caller's argument, passed on unchanged.
    dup_done(d, unsafe { f::dup()(old) })
}

/// dup2/dup3 close `new` first if it is open: finish its stream then.
fn before_dup_onto(old: c_int, new: c_int) -> Option<std::sync::Arc<desc::Desc>> {
    shim(|| {
        let d = registry::lookup_or_create(old);
        let _ = registry::before_close(new);
        d
    })
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        // SAFETY: the caller's arguments, passed on unchanged.
        return unsafe { f::dup2()(old, new) };
    }
    let d = before_dup_onto(old, new);
    // SAFETY: the caller's arguments, passed on unchanged.
    dup_done(d, unsafe { f::dup2()(old, new) })
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old == new {
        // SAFETY: the caller's arguments, passed on unchanged (EINVAL).
        return unsafe { f::dup3()(old, new, flags) };
    }
    let d = before_dup_onto(old, new);
    // SAFETY: the caller's arguments, passed on unchanged.
    dup_done(d, unsafe { f::dup3()(old, new, flags) })
}

/// fcntl's third argument is an int or a pointer depending on the command;
/// it arrives in the same register either way and is passed on whole.
unsafe fn fcntl_common(
    real: unsafe extern "C" fn(c_int, c_int, ...) -> c_int,
    fd: c_int,
    cmd: c_int,
    arg: c_ulong,
) -> c_int {
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let d = source(fd);
            // SAFETY: the caller's arguments, passed on unchanged.
            dup_done(d, unsafe { real(fd, cmd, arg) })
        }
        libc::F_SETFL => {
            // SAFETY: F_GETFL takes no argument.
            let before = unsafe { real(fd, libc::F_GETFL) };
            // SAFETY: the caller's arguments, passed on unchanged.
            let r = unsafe { real(fd, cmd, arg) };
            let changed = (before ^ arg as c_int) & (libc::O_DIRECT | libc::O_APPEND);
            if r == 0 && before >= 0 && changed != 0 {
                // The stream was chosen for the old flags: stop managing.
                shim(|| fdtable::get(fd).map(|d| d.pass_through(bfd(fd))));
            }
            r
        }
        // SAFETY: the caller's arguments, passed on unchanged.
        _ => unsafe { real(fd, cmd, arg) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarding the caller's call.
    unsafe { fcntl_common(f::fcntl(), fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarding the caller's call.
    unsafe { fcntl_common(f::fcntl64(), fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let finished = interpose::shim(|| Some(registry::before_close(fd)));
    // SAFETY: the caller's argument, passed on unchanged.
    let r = unsafe { f::close()(fd) };
    match finished {
        Some(Err(e)) if r == 0 => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
        _ => r,
    }
}

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    // With CLOSE_RANGE_CLOEXEC nothing closes now.
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 && first <= last {
        shim(|| {
            for fd in fdtable::fds_in(first, last) {
                let _ = registry::before_close(fd);
            }
            Some(())
        });
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::close_range()(first, last, flags) }
}
