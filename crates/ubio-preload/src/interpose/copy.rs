//! copy_file_range, sendfile, splice: the kernel copies; the shim applies
//! the contract to the ranges it touched, drop-behind on a regular source
//! and write-behind on a regular destination. A copy of a whole file in one
//! call would fill the cache before anything could be dropped, so the shim
//! makes the real call in pieces of `ubio::PIECE` bytes and returns the total, as
//! the single call would have (a piece that fails after others succeeded
//! ends the call with the bytes copied; the caller's next call sees the
//! error). splice moves at most a pipe's worth and is made once, clamped.

use super::{bfd, shim};
use crate::desc::{self, errno, set_errno, Desc};
use crate::real::f;
use crate::registry;
use libc::{c_int, c_uint, off64_t, off_t, size_t, ssize_t};
use std::sync::Arc;
use ubio::PIECE;

/// One side of a copy: a managed regular file, where the kernel takes the
/// offset from (`off` when not null, else the file position).
struct Side {
    fd: c_int,
    d: Arc<Desc>,
    off: *mut i64,
}

impl Side {
    fn new(fd: c_int, off: *mut i64) -> Option<Side> {
        Some(Side {
            fd,
            d: registry::managed_io(fd)?,
            off,
        })
    }
    /// Its stream, descriptor and offset for the next piece, if managed.
    fn piece(&self) -> Option<(&ubio::Stream, std::os::fd::BorrowedFd<'_>, u64)> {
        Some((self.d.stream()?, bfd(self.fd), self.offset()?))
    }
    fn offset(&self) -> Option<u64> {
        if self.off.is_null() {
            desc::position(bfd(self.fd))
        } else {
            // SAFETY: the caller's offset pointer, which the kernel also uses.
            u64::try_from(unsafe { *self.off }).ok()
        }
    }
}

/// Make `call(len)` (the real copy) in pieces, with the tracker around each.
/// `None` when neither side is managed: the caller makes the real call.
fn copy(
    src: Option<Side>,
    dst: Option<Side>,
    len: size_t,
    once: bool,
    mut call: impl FnMut(size_t) -> ssize_t,
) -> Option<(ssize_t, c_int)> {
    if src.is_none() && dst.is_none() {
        return None;
    }
    let mut done: size_t = 0;
    loop {
        let want = (len - done).min(PIECE);
        let (from, to) = (
            src.as_ref().and_then(Side::piece),
            dst.as_ref().and_then(Side::piece),
        );
        if let Some((st, fd, o)) = from {
            st.before_external_read(fd, o, want as u64);
        }
        if let Some((st, fd, o)) = to {
            st.before_external_io(fd, o, want as u64);
        }
        let n = call(want);
        if n < 0 {
            let e = errno();
            return Some(if done > 0 {
                (done as ssize_t, 0)
            } else {
                (-1, e)
            });
        }
        if let Some((st, fd, o)) = from {
            st.after_external_read(fd, o, n as u64);
        }
        if let Some((st, fd, o)) = to {
            st.after_external_write(fd, o, n as u64);
        }
        done += n as size_t;
        if once || n == 0 || (n as size_t) < want || done >= len {
            return Some((done as ssize_t, 0));
        }
    }
}

fn finish(r: Option<(ssize_t, c_int)>) -> Option<ssize_t> {
    let (n, e) = r?;
    if n < 0 {
        set_errno(e);
    }
    Some(n)
}

/// The shim's copy between the sides `sides` finds (looked up under the
/// guard), or, when it stays out, `call(len)`: the real call unchanged.
fn copy_or_real(
    sides: impl FnOnce() -> (Option<Side>, Option<Side>),
    len: size_t,
    once: bool,
    mut call: impl FnMut(size_t) -> ssize_t,
) -> ssize_t {
    let r = shim(|| {
        let (src, dst) = sides();
        copy(src, dst, len, once, &mut call)
    });
    if let Some(n) = finish(r) {
        return n;
    }
    call(len)
}

unsafe fn sendfile_common(
    real: unsafe extern "C" fn(c_int, c_int, *mut off_t, size_t) -> ssize_t,
    out_fd: c_int,
    in_fd: c_int,
    off: *mut off_t,
    count: size_t,
) -> ssize_t {
    copy_or_real(
        || {
            let dst = Side::new(out_fd, std::ptr::null_mut());
            (Side::new(in_fd, off), dst)
        },
        count,
        false,
        |n| {
            // SAFETY: the caller's arguments, with this length (`count` or
            // shorter).
            unsafe { real(out_fd, in_fd, off, n) }
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out_fd: c_int,
    in_fd: c_int,
    off: *mut off_t,
    count: size_t,
) -> ssize_t {
    // SAFETY: forwarding the caller's call.
    unsafe { sendfile_common(f::sendfile(), out_fd, in_fd, off, count) }
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    off: *mut off_t,
    count: size_t,
) -> ssize_t {
    // SAFETY: forwarding the caller's call.
    unsafe { sendfile_common(f::sendfile64(), out_fd, in_fd, off, count) }
}

/// copy_file_range and splice (made `once`): the same arguments, either
/// offset may be given.
macro_rules! range_fns {
    ($( $name:ident, once: $once:expr; )*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            fd_in: c_int,
            off_in: *mut off64_t,
            fd_out: c_int,
            off_out: *mut off64_t,
            len: size_t,
            flags: c_uint,
        ) -> ssize_t {
            copy_or_real(
                || (Side::new(fd_in, off_in), Side::new(fd_out, off_out)),
                len,
                $once,
                |n| {
                    // SAFETY: the caller's arguments, with this length
                    // (`len` or shorter).
                    unsafe { f::$name()(fd_in, off_in, fd_out, off_out, n, flags) }
                },
            )
        }
    )*};
}

range_fns! {
    copy_file_range, once: false;
    splice, once: true;
}
