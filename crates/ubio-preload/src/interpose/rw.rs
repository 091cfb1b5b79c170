//! read and write, positional and vectored. On a managed descriptor the
//! data moves through the stream (the same bytes at the same offset:
//! preadv2/pwritev2 underneath), with the tracker around it; everything
//! else goes to libc as it came. A preadv2/pwritev2 with flags (RWF_*) is
//! passed through: its flags are the caller's business.
//!
//! read()/readv() read at the file position and then move it; threads of
//! this process sharing the description are serialised around that, but two
//! processes reading one shared description at the same time could see the
//! position move between the two steps (a program doing that has no defined
//! split of the data anyway). write()/writev() use the kernel's own position
//! (pwritev2 at offset -1), atomic as write(2).

use super::{bfd, io_call};
use crate::desc::{self, buf, buf_mut, iov, iov_mut};
use crate::real::f;
use libc::{c_int, c_void, iovec, off_t, size_t, ssize_t};

fn read_cur(fd: c_int, bufs: Option<&mut [std::io::IoSliceMut<'_>]>) -> Option<isize> {
    io_call(|| {
        let bufs = bufs?;
        let d = desc::managed(fd)?;
        Some(d.read_current(bfd(fd), bufs))
    })
}

fn read_at(fd: c_int, bufs: Option<&mut [std::io::IoSliceMut<'_>]>, off: i64) -> Option<isize> {
    io_call(|| {
        let bufs = bufs?;
        let off = u64::try_from(off).ok()?;
        let d = desc::managed(fd)?;
        Some(d.stream()?.read_at(bfd(fd), bufs, off))
    })
}

/// `off` None: at the file position (the end for O_APPEND).
fn write_at(fd: c_int, bufs: Option<&[std::io::IoSlice<'_>]>, off: Option<i64>) -> Option<isize> {
    io_call(|| {
        let bufs = bufs?;
        let d = desc::managed(fd)?;
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

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let mut bufs = unsafe { buf_mut(b, n) };
    if let Some(r) = read_cur(fd, bufs.as_mut().map(|x| &mut x[..])) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::read()(fd, b, n) }
}

#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, b: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let mut bufs = unsafe { buf_mut(b, n) };
    if let Some(r) = read_at(fd, bufs.as_mut().map(|x| &mut x[..]), off) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pread()(fd, b, n, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, b: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let mut bufs = unsafe { buf_mut(b, n) };
    if let Some(r) = read_at(fd, bufs.as_mut().map(|x| &mut x[..]), off) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pread64()(fd, b, n, off) }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, v: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    if let Some(r) = read_cur(fd, unsafe { iov_mut(v, cnt) }) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::readv()(fd, v, cnt) }
}

#[no_mangle]
pub unsafe extern "C" fn preadv(fd: c_int, v: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    if let Some(r) = read_at(fd, unsafe { iov_mut(v, cnt) }, off) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::preadv()(fd, v, cnt, off) }
}

#[no_mangle]
pub unsafe extern "C" fn preadv64(fd: c_int, v: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    if let Some(r) = read_at(fd, unsafe { iov_mut(v, cnt) }, off) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::preadv64()(fd, v, cnt, off) }
}

/// preadv2 without flags: at `off`, or at the file position for -1.
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
    // SAFETY: the caller's iovecs, handed to the kernel only.
    let bufs = unsafe { iov_mut(v, cnt) };
    if off == -1 {
        read_cur(fd, bufs)
    } else {
        read_at(fd, bufs, off)
    }
}

#[no_mangle]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    v: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: forwarding the caller's arguments.
    if let Some(r) = unsafe { preadv2_common(fd, v, cnt, off, flags) } {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::preadv2()(fd, v, cnt, off, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn preadv64v2(
    fd: c_int,
    v: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: forwarding the caller's arguments.
    if let Some(r) = unsafe { preadv2_common(fd, v, cnt, off, flags) } {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::preadv64v2()(fd, v, cnt, off, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let bufs = unsafe { buf(b, n) };
    if let Some(r) = write_at(fd, bufs.as_ref().map(|x| &x[..]), None) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::write()(fd, b, n) }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, b: *const c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let bufs = unsafe { buf(b, n) };
    if let Some(r) = write_at(fd, bufs.as_ref().map(|x| &x[..]), Some(off)) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pwrite()(fd, b, n, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, b: *const c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the caller's buffer, handed to the kernel only.
    let bufs = unsafe { buf(b, n) };
    if let Some(r) = write_at(fd, bufs.as_ref().map(|x| &x[..]), Some(off)) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pwrite64()(fd, b, n, off) }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, v: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    if let Some(r) = write_at(fd, unsafe { iov(v, cnt) }, None) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::writev()(fd, v, cnt) }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev(fd: c_int, v: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    if let Some(r) = write_at(fd, unsafe { iov(v, cnt) }, Some(off)) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pwritev()(fd, v, cnt, off) }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev64(fd: c_int, v: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: the caller's iovecs, handed to the kernel only.
    if let Some(r) = write_at(fd, unsafe { iov(v, cnt) }, Some(off)) {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pwritev64()(fd, v, cnt, off) }
}

/// pwritev2 without flags: at `off`, or at the file position for -1.
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
    // SAFETY: the caller's iovecs, handed to the kernel only.
    let bufs = unsafe { iov(v, cnt) };
    write_at(fd, bufs, (off != -1).then_some(off))
}

#[no_mangle]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    v: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: forwarding the caller's arguments.
    if let Some(r) = unsafe { pwritev2_common(fd, v, cnt, off, flags) } {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pwritev2()(fd, v, cnt, off, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn pwritev64v2(
    fd: c_int,
    v: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: forwarding the caller's arguments.
    if let Some(r) = unsafe { pwritev2_common(fd, v, cnt, off, flags) } {
        return r;
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f::pwritev64v2()(fd, v, cnt, off, flags) }
}
