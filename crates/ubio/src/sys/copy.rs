//! Copying without moving bytes through user space, and finding a file's
//! data: the FICLONE ioctl, copy_file_range, lseek SEEK_DATA/SEEK_HOLE; and
//! the bits of metadata `ubio cp` recreates that std cannot (fifos, symlink
//! timestamps).

use super::{c_path, cvt};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
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

/// One extent of a file's mapping, as FS_IOC_FIEMAP reports it: bytes
/// `logical..logical + length` of the file are at byte `physical` of the
/// device; `flags` are the `FIEMAP_EXTENT_*` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: u32,
}

/// `FIEMAP_EXTENT_LAST`: the file's last extent.
pub const FIEMAP_EXTENT_LAST: u32 = 0x1;
/// `FIEMAP_EXTENT_DELALLOC`: not allocated yet (delayed allocation).
pub const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
/// `FIEMAP_EXTENT_UNWRITTEN`: allocated but not written: reads as zeroes.
pub const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;

/// `_IOWR('f', 11, struct fiemap)` from include/uapi/linux/fs.h.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;

/// `ioctl(fd, FS_IOC_FIEMAP, ...)`, repeated until the end: every extent of
/// the file (holes are the gaps between them). With `sync`
/// (`FIEMAP_FLAG_SYNC`), dirty data is written back first.
///
/// See Documentation/filesystems/fiemap.rst; since Linux 2.6.28. `EOPNOTSUPP`
/// where the filesystem cannot map (tmpfs).
pub fn fiemap(fd: BorrowedFd<'_>, sync: bool) -> io::Result<Vec<Extent>> {
    // struct fiemap (32 bytes: start, length, flags, mapped, count, reserved)
    // followed by `COUNT` struct fiemap_extent (56 bytes: logical, physical,
    // length, 2 reserved u64, flags, 3 reserved u32), as u64 words.
    const COUNT: usize = 128;
    const HEAD: usize = 4;
    const EXT: usize = 7;
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let mut buf = vec![0u64; HEAD + COUNT * EXT];
        buf[0] = start;
        buf[1] = u64::MAX - start;
        // fm_flags (FIEMAP_FLAG_SYNC or 0) and fm_mapped_extents, then
        // fm_extent_count and fm_reserved.
        buf[2] = pair(u32::from(sync), 0);
        buf[3] = pair(COUNT as u32, 0);
        // SAFETY: `buf` is a struct fiemap with room for `COUNT` extents,
        // valid and exclusively borrowed for the call.
        let ret = unsafe { libc::ioctl(fd.as_raw_fd(), FS_IOC_FIEMAP as _, buf.as_mut_ptr()) };
        cvt(ret as libc::c_long)?;
        let mapped = unpair(buf[2]).1 as usize;
        let mut last = mapped == 0;
        for i in 0..mapped.min(COUNT) {
            let e = &buf[HEAD + i * EXT..HEAD + (i + 1) * EXT];
            let ext = Extent {
                logical: e[0],
                physical: e[1],
                length: e[2],
                flags: unpair(e[5]).0,
            };
            last |= ext.flags & FIEMAP_EXTENT_LAST != 0;
            start = ext.logical + ext.length;
            out.push(ext);
        }
        if last || mapped < COUNT {
            return Ok(out);
        }
    }
}

/// Two u32 fields (the first at the lower address) as the u64 word that
/// holds them, and back.
fn pair(first: u32, second: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&first.to_ne_bytes());
    b[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(b)
}
fn unpair(word: u64) -> (u32, u32) {
    let b = word.to_ne_bytes();
    (
        u32::from_ne_bytes(b[..4].try_into().unwrap()),
        u32::from_ne_bytes(b[4..].try_into().unwrap()),
    )
}

/// `mkfifo(path, mode)`: create a named pipe (`mode` before the umask).
///
/// See mkfifo(3), which is this mknod(2).
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    mknod(path, libc::S_IFIFO | (mode & 0o7777), 0)
}

/// `mknod(path, mode, dev)`: create a special file (a fifo, a socket, a
/// block or character device: `mode`'s file type; its permissions before
/// the umask; `dev` for a device). Devices need CAP_MKNOD.
///
/// See mknod(2).
pub fn mknod(path: &Path, mode: u32, dev: u64) -> io::Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let ret = unsafe { libc::mknod(path.as_ptr(), mode as libc::mode_t, dev as libc::dev_t) };
    cvt(ret as libc::c_long).map(drop)
}

/// `linkat(AT_FDCWD, old, AT_FDCWD, new, AT_SYMLINK_FOLLOW)`: make `new` a
/// hard link to the file `old` names, following `old` if it is a symlink
/// (std's `hard_link` links to the symlink itself).
///
/// See linkat(2); since Linux 2.6.18.
pub fn link_following(old: &Path, new: &Path) -> io::Result<()> {
    let (old, new) = (c_path(old)?, c_path(new)?);
    // SAFETY: both paths are NUL-terminated strings that outlive the call.
    let ret = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            old.as_ptr(),
            libc::AT_FDCWD,
            new.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_skip as skip;
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileExt;

    /// On the tree's filesystem (ext4 here): data, a hole, and a range
    /// allocated but never written, told apart by the extents.
    #[test]
    fn fiemap_tells_data_holes_and_unwritten_apart() {
        const NAME: &str = "fiemap_tells_data_holes_and_unwritten_apart";
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let f = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("mapped"))
            .unwrap();
        let block = 1 << 20;
        f.write_all_at(&vec![7u8; block], 0).unwrap();
        // Bytes block..2*block stay a hole; 2*block..3*block allocated.
        if let Err(e) = super::super::fallocate(f.as_fd(), 0, 2 * block as u64, block as u64) {
            skip(NAME, &format!("fallocate: {e}"));
            return;
        }
        let ext = match fiemap(f.as_fd(), true) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                skip(NAME, &e.to_string());
                return;
            }
            r => r.unwrap(),
        };
        let at = |off: u64| {
            ext.iter()
                .find(|e| (e.logical..e.logical + e.length).contains(&off))
        };
        let data = at(0).expect("the written block is mapped");
        assert_eq!(data.flags & FIEMAP_EXTENT_UNWRITTEN, 0, "{ext:?}");
        assert!(
            at(block as u64 + 4096).is_none(),
            "a hole is no extent: {ext:?}"
        );
        let prealloc = at(2 * block as u64 + 4096).expect("the allocated range is mapped");
        assert_ne!(prealloc.flags & FIEMAP_EXTENT_UNWRITTEN, 0, "{ext:?}");
        assert_ne!(ext.last().unwrap().flags & FIEMAP_EXTENT_LAST, 0, "{ext:?}");
    }
}
