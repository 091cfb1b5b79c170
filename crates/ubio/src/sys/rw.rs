//! preadv2(2) / pwritev2(2) with per-call flags.

use super::cvt;
use std::io::{self, IoSlice, IoSliceMut};
use std::ops::{BitOr, BitOrAssign};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Per-call read/write flags (`RWF_*`), combined with `|`. Unknown bits are
/// carried, not rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RwFlags(pub u32);

impl RwFlags {
    pub const NONE: RwFlags = RwFlags(0);
    /// `RWF_HIPRI` (Linux 4.6).
    pub const HIPRI: RwFlags = RwFlags(0x01);
    /// `RWF_NOWAIT` (Linux 4.14).
    pub const NOWAIT: RwFlags = RwFlags(0x08);
    /// `RWF_DONTCACHE` (Linux 6.14, include/uapi/linux/fs.h): the pages this
    /// call brings into the page cache are dropped once the copy (reads) or
    /// their writeback (writes) completes. Gated per file by `FOP_DONTCACHE`:
    /// older kernels and unsupported filesystems answer `EOPNOTSUPP`.
    pub const DONTCACHE: RwFlags = RwFlags(0x80);

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: RwFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for RwFlags {
    type Output = RwFlags;
    fn bitor(self, rhs: RwFlags) -> RwFlags {
        RwFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for RwFlags {
    fn bitor_assign(&mut self, rhs: RwFlags) {
        self.0 |= rhs.0;
    }
}

/// The most one read(2)/write(2)-family call moves, `MAX_RW_COUNT`
/// (include/linux/fs.h: INT_MAX rounded down to a page): a longer request
/// is cut to this length by the kernel and comes back short.
pub fn max_rw_count() -> usize {
    (i32::MAX as u64 & !(super::page_size() - 1)) as usize
}

/// The `offset` argument of preadv2/pwritev2: -1 for the file position; an
/// offset past `off_t` is EINVAL (as a cast it would turn into -1, the position).
fn file_offset(offset: Option<u64>) -> io::Result<libc::off_t> {
    offset.map_or(Ok(-1), |o| {
        libc::off_t::try_from(o).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    })
}

/// `preadv2(fd, iov, iovcnt, offset, flags)`: scatter read at `offset`, or at
/// (and advancing) the file position when `offset` is `None` (`-1`).
///
/// See preadv2(2); since Linux 4.6.
pub fn preadv2(
    fd: BorrowedFd<'_>,
    bufs: &mut [IoSliceMut<'_>],
    offset: Option<u64>,
    flags: RwFlags,
) -> io::Result<usize> {
    let off = file_offset(offset)?;
    // SAFETY: IoSliceMut is ABI-compatible with struct iovec and every slice
    // is a valid, writable buffer for the duration of the call.
    cvt(unsafe {
        libc::preadv2(
            fd.as_raw_fd(),
            bufs.as_mut_ptr().cast(),
            bufs.len().min(libc::c_int::MAX as usize) as libc::c_int,
            off,
            flags.0 as libc::c_int,
        )
    } as libc::c_long)
}

/// `pwritev2(fd, iov, iovcnt, offset, flags)`: gather write at `offset`, or at
/// (and advancing) the file position when `offset` is `None` (`-1`); on an
/// `O_APPEND` file the data always goes to the end.
///
/// See pwritev2(2); since Linux 4.6.
pub fn pwritev2(
    fd: BorrowedFd<'_>,
    bufs: &[IoSlice<'_>],
    offset: Option<u64>,
    flags: RwFlags,
) -> io::Result<usize> {
    let off = file_offset(offset)?;
    // SAFETY: IoSlice is ABI-compatible with struct iovec and every slice is a
    // valid, readable buffer for the duration of the call.
    cvt(unsafe {
        libc::pwritev2(
            fd.as_raw_fd(),
            bufs.as_ptr().cast(),
            bufs.len().min(libc::c_int::MAX as usize) as libc::c_int,
            off,
            flags.0 as libc::c_int,
        )
    } as libc::c_long)
}
