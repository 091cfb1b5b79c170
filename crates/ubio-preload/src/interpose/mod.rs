//! The interposed libc functions, by family. Each one makes the real call
//! unchanged unless the shim has something to add; `shim` runs the shim's
//! part under the re-entrancy guard, catches panics, and keeps errno as the
//! program would have seen it.

mod copy;
mod dup_close;
mod map_sync;
mod open;
mod rw;
mod signal;

use crate::desc::{errno, set_errno};
use crate::guard;
use std::io;
use std::os::fd::BorrowedFd;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Run the shim's part of a call; `None` when the shim must stay out (not
/// ready, re-entered, in a signal handler, panicked, or nothing to do).
/// errno is restored afterwards: what the shim did must not show.
pub(crate) fn shim<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    let saved = errno();
    let r = {
        let _g = guard::enter()?;
        catch_unwind(AssertUnwindSafe(f)).ok().flatten()
    };
    set_errno(saved);
    r
}

/// Run a managed I/O call: `Some(C return value)` with errno set as the
/// kernel set it, or `None` for the real call.
pub(crate) fn io_call(f: impl FnOnce() -> Option<io::Result<usize>>) -> Option<isize> {
    let r = shim(f)?;
    Some(crate::desc::c_result(r))
}

/// A descriptor the caller passed, valid for the call.
pub(crate) fn bfd<'a>(fd: libc::c_int) -> BorrowedFd<'a> {
    // SAFETY: used only for the duration of the interposed call, during
    // which the caller's descriptor is open (or the kernel says EBADF).
    unsafe { BorrowedFd::borrow_raw(fd) }
}
