//! Copying without moving bytes through user space, and finding a file's
//! data: the FICLONE ioctl, copy_file_range, lseek SEEK_DATA/SEEK_HOLE; and
//! the bits of metadata `ubio cp` recreates that std cannot (fifos, symlink
//! timestamps).

use super::cvt;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `_IOW(0x94, 9, int)` from include/uapi/linux/fs.h.
const FICLONE: libc::c_ulong = 0x4004_9409;

/// `ioctl(dst, FICLONE, src)`: make `dst` share all of `src`'s extents
/// (a reflink copy): no data is read or written and no page cache is filled.
/// `dst` must be open for writing; its old contents are replaced.
///
/// `EOPNOTSUPP` where the filesystem cannot share extents (ext4, tmpfs; xfs
/// made without reflink), `EXDEV` across filesystems, `EINVAL` on some
/// filesystems for files it cannot clone. See ioctl_ficlone(2); since Linux 4.5
/// (btrfs's own BTRFS_IOC_CLONE before that).
pub fn ficlone(dst: BorrowedFd<'_>, src: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: FICLONE takes the source descriptor as its integer argument.
    let ret = unsafe { libc::ioctl(dst.as_raw_fd(), FICLONE as _, src.as_raw_fd()) };
    cvt(ret as libc::c_long).map(drop)
}

/// `copy_file_range(src, &src_off, dst, &dst_off, len, flags)`: copy up to
/// `len` bytes between files in the kernel; returns the bytes copied (0 at
/// the source's end). Neither file position moves. `flags` must be 0 today.
///
/// Filesystems that can share extents (btrfs, xfs with reflink) or copy on the
/// server (NFS 4.2, SMB) do so; others (ext4) copy through the page cache of
/// both files, filling it. See copy_file_range(2); since Linux 4.5, across
/// filesystems since 5.19.
pub fn copy_file_range(
    src: BorrowedFd<'_>,
    src_off: u64,
    dst: BorrowedFd<'_>,
    dst_off: u64,
    len: usize,
    flags: u32,
) -> io::Result<usize> {
    let mut src_off = src_off as libc::loff_t;
    let mut dst_off = dst_off as libc::loff_t;
    // SAFETY: both offsets are valid for the call; no buffers are passed.
    let ret = unsafe {
        libc::copy_file_range(
            src.as_raw_fd(),
            &mut src_off,
            dst.as_raw_fd(),
            &mut dst_off,
            len,
            flags as libc::c_uint,
        )
    };
    cvt(ret as libc::c_long)
}

/// `lseek(fd, offset, SEEK_DATA)`: the start of the first data at or after
/// `offset`, or `None` if only a hole follows (`ENXIO`). Filesystems without
/// hole tracking report the whole file as data.
///
/// See lseek(2); since Linux 3.1.
pub fn seek_data(fd: BorrowedFd<'_>, offset: u64) -> io::Result<Option<u64>> {
    // SAFETY: no pointers are passed.
    let ret = unsafe { libc::lseek(fd.as_raw_fd(), offset as libc::off_t, libc::SEEK_DATA) };
    match cvt(ret as libc::c_long) {
        Ok(pos) => Ok(Some(pos as u64)),
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `lseek(fd, offset, SEEK_HOLE)`: the start of the first hole at or after
/// `offset`; the end of the file counts as a hole.
///
/// See lseek(2); since Linux 3.1.
pub fn seek_hole(fd: BorrowedFd<'_>, offset: u64) -> io::Result<u64> {
    // SAFETY: no pointers are passed.
    let ret = unsafe { libc::lseek(fd.as_raw_fd(), offset as libc::off_t, libc::SEEK_HOLE) };
    cvt(ret as libc::c_long).map(|pos| pos as u64)
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// `mkfifo(path, mode)`: create a named pipe (`mode` before the umask).
///
/// See mkfifo(3), mknod(2).
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let ret = unsafe { libc::mkfifo(path.as_ptr(), mode as libc::mode_t) };
    cvt(ret as libc::c_long).map(drop)
}

/// `utimensat(AT_FDCWD, path, [atime, mtime], AT_SYMLINK_NOFOLLOW)`: set the
/// access and modification times of `path` itself, not of what a symlink
/// points to. Times are (seconds, nanoseconds) since the epoch.
///
/// See utimensat(2); since Linux 2.6.22.
pub fn set_times_nofollow(path: &Path, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
    let path = c_path(path)?;
    let ts = |(sec, nsec): (i64, i64)| libc::timespec {
        tv_sec: sec as libc::time_t,
        tv_nsec: nsec as _,
    };
    let times = [ts(atime), ts(mtime)];
    // SAFETY: `path` is NUL-terminated and `times` holds two timespecs, both
    // valid for the call.
    let ret = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            path.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    cvt(ret as libc::c_long).map(drop)
}
