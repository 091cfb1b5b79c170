//! read and write, positional and vectored. On a managed descriptor the
//! data moves through the stream (the same bytes at the same offset:
//! preadv2/pwritev2 underneath), with the tracker around it; everything
//! else goes to libc as it came. A preadv2/pwritev2 with flags (RWF_*) is
//! passed through: its flags are the caller's business.
//!
//! read()/readv() and write()/writev() use the kernel's own position
//! (preadv2/pwritev2 at offset -1). A long call is made in pieces (the
//! stream's: each piece moves the position), serialised against the other
//! threads of this process by the stream's position lock; another process
//! using the same open file description at that moment could see the
//! position between two pieces (a program doing that has no defined split
//! of the data anyway).

use super::{bfd, io_call};
use crate::desc::{buf, buf_mut, iov, iov_mut};
use crate::real::f;
use crate::registry;
use libc::{c_int, c_void, iovec, off_t, size_t, ssize_t};

fn read_cur(fd: c_int, bufs: Option<&mut [std::io::IoSliceMut<'_>]>) -> Option<isize> {
    io_call(|| {
        let bufs = bufs?;
        let d = registry::managed_io(fd)?;
        Some(d.stream()?.read(bfd(fd), bufs, None))
    })
}

fn read_at(fd: c_int, bufs: Option<&mut [std::io::IoSliceMut<'_>]>, off: i64) -> Option<isize> {
    io_call(|| {
        let bufs = bufs?;
        let off = u64::try_from(off).ok()?;
        let d = registry::managed_io(fd)?;
        Some(d.stream()?.read_at(bfd(fd), bufs, off))
    })
}

/// `off` None: at the file position (the end for O_APPEND).
fn write_at(fd: c_int, bufs: Option<&[std::io::IoSlice<'_>]>, off: Option<i64>) -> Option<isize> {
    io_call(|| {
        let bufs = bufs?;
        let d = registry::managed_io(fd)?;
        let s = d.stream()?;
        let off = match off {
            None => None,
            // pwrite on O_APPEND appends without moving the position: leave
            // that to libc.
            Some(_) if s.is_append() => return None,
            Some(o) => Some(u64::try_from(o).ok()?),
        };
        Some(s.write_at(bfd(fd), bufs, off).map(|(_, n)| n))
    })
}

/// `off` None: at the file position.
fn read_any(
    fd: c_int,
    bufs: Option<&mut [std::io::IoSliceMut<'_>]>,
    off: Option<i64>,
) -> Option<isize> {
    match off {
        None => read_cur(fd, bufs),
        Some(off) => read_at(fd, bufs, off),
    }
}

/// `read`-style: one buffer, at `off` or (None) at the file position.
///
/// # Safety
/// `b`/`n` as the caller passed them to the interposed function.
unsafe fn read_buf(fd: c_int, b: *mut c_void, n: size_t, off: Option<off_t>) -> Option<isize> {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let mut bufs = unsafe { buf_mut(b, n) };
    read_any(fd, bufs.as_mut().map(|x| &mut x[..]), off)
}

/// `readv`-style: the caller's iovecs, at `off` or (None) at the file position.
///
/// # Safety
/// `v`/`cnt` as the caller passed them to the interposed function.
unsafe fn read_iov(fd: c_int, v: *const iovec, cnt: c_int, off: Option<off_t>) -> Option<isize> {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    read_any(fd, unsafe { iov_mut(v, cnt) }, off)
}

/// `write`-style: one buffer, at `off` or (None) at the file position.
///
/// # Safety
/// `b`/`n` as the caller passed them to the interposed function.
unsafe fn write_buf(fd: c_int, b: *const c_void, n: size_t, off: Option<off_t>) -> Option<isize> {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let bufs = unsafe { buf(b, n) };
    write_at(fd, bufs.as_ref().map(|x| &x[..]), off)
}

/// `writev`-style: the caller's iovecs, at `off` or (None) at the file position.
///
/// # Safety
/// `v`/`cnt` as the caller passed them to the interposed function.
unsafe fn write_iov(fd: c_int, v: *const iovec, cnt: c_int, off: Option<off_t>) -> Option<isize> {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    write_at(fd, unsafe { iov(v, cnt) }, off)
}

/// preadv2 without flags: at `off`, or at the file position for -1.
///
/// # Safety
/// The caller's arguments to preadv2/preadv64v2.
unsafe fn preadv2_common(
    fd: c_int,
    v: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> Option<isize> {
    if flags != 0 {
        return None;
    }
    // SAFETY: forwarding the caller's iovecs.
    unsafe { read_iov(fd, v, cnt, (off != -1).then_some(off)) }
}

/// pwritev2 without flags: at `off`, or at the file position for -1.
///
/// # Safety
/// The caller's arguments to pwritev2/pwritev64v2.
unsafe fn pwritev2_common(
    fd: c_int,
    v: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> Option<isize> {
    if flags != 0 || off < -1 {
        return None;
    }
    // SAFETY: forwarding the caller's iovecs.
    unsafe { write_iov(fd, v, cnt, (off != -1).then_some(off)) }
}

/// Each interposer: the shim's part (an unsafe helper above, given the
/// caller's arguments), else the real function of the same name with the
/// arguments unchanged. One line a shape: the names sharing it, their
/// arguments, the shim's part.
macro_rules! interpose {
    ($( [$($name:ident),+] $args:tt => $part:ident $pargs:tt; )*) => {
        $( $( interpose!(@one $name $args $part $pargs); )+ )*
    };
    (@one $name:ident ($($a:ident: $t:ty),*) $part:ident ($($pa:expr),*)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> ssize_t {
            // SAFETY: forwarding the caller's arguments; buffers are handed
            // to the kernel only.
            if let Some(r) = unsafe { $part($($pa),*) } {
                return r;
            }
            // SAFETY: the caller's arguments, passed on unchanged.
            unsafe { f::$name()($($a),*) }
        }
    };
}

interpose! {
    [read] (fd: c_int, b: *mut c_void, n: size_t) => read_buf(fd, b, n, None);
    [pread, pread64] (fd: c_int, b: *mut c_void, n: size_t, off: off_t)
        => read_buf(fd, b, n, Some(off));
    [readv] (fd: c_int, v: *const iovec, cnt: c_int) => read_iov(fd, v, cnt, None);
    [preadv, preadv64] (fd: c_int, v: *const iovec, cnt: c_int, off: off_t)
        => read_iov(fd, v, cnt, Some(off));
    [preadv2, preadv64v2] (fd: c_int, v: *const iovec, cnt: c_int, off: off_t, flags: c_int)
        => preadv2_common(fd, v, cnt, off, flags);
    [write] (fd: c_int, b: *const c_void, n: size_t) => write_buf(fd, b, n, None);
    [pwrite, pwrite64] (fd: c_int, b: *const c_void, n: size_t, off: off_t)
        => write_buf(fd, b, n, Some(off));
    [writev] (fd: c_int, v: *const iovec, cnt: c_int) => write_iov(fd, v, cnt, None);
    [pwritev, pwritev64] (fd: c_int, v: *const iovec, cnt: c_int, off: off_t)
        => write_iov(fd, v, cnt, Some(off));
    [pwritev2, pwritev64v2] (fd: c_int, v: *const iovec, cnt: c_int, off: off_t, flags: c_int)
        => pwritev2_common(fd, v, cnt, off, flags);
}
