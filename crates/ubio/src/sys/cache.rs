//! Page-cache control and inspection: posix_fadvise, sync_file_range,
//! cachestat and mincore.

use super::{cvt, page_size};
use std::io;
use std::ops::{BitOr, BitOrAssign, Range};
use std::os::fd::{AsRawFd, BorrowedFd};

/// A byte range of a file for [`cachestat`]: explicit bounds, or everything
/// from an offset to the end of the file (the kernel's length 0, which an
/// empty range must never turn into by accident).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRange {
    /// `[start, end)`; an empty range counts nothing.
    Bytes(Range<u64>),
    /// From the offset to the end of the file, however long it is by then.
    ToEnd(u64),
}

impl FileRange {
    /// The whole file.
    pub const WHOLE: FileRange = FileRange::ToEnd(0);

    /// `len` bytes from `offset`.
    pub fn at(offset: u64, len: u64) -> FileRange {
        FileRange::Bytes(offset..offset + len)
    }

    /// The bytes of a file `size` bytes long that the range covers.
    pub fn within(&self, size: u64) -> Range<u64> {
        match self {
            FileRange::Bytes(r) => r.start.min(size)..r.end.min(size),
            FileRange::ToEnd(o) => (*o).min(size)..size,
        }
    }
}

impl From<Range<u64>> for FileRange {
    fn from(r: Range<u64>) -> FileRange {
        FileRange::Bytes(r)
    }
}

/// Advice for [`fadvise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    Normal,
    Sequential,
    Random,
    WillNeed,
    /// Drop clean, unmapped pages of the range. Does nothing to dirty pages
    /// or pages under writeback: write them back first.
    DontNeed,
    /// Does nothing for read(2) on Linux 6.x.
    NoReuse,
}

/// `posix_fadvise(fd, offset, len, advice)`; `len` 0 means "to the end".
///
/// See posix_fadvise(2); since Linux 2.6.
pub fn fadvise(fd: BorrowedFd<'_>, offset: u64, len: u64, advice: Advice) -> io::Result<()> {
    let advice = match advice {
        Advice::Normal => libc::POSIX_FADV_NORMAL,
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::Random => libc::POSIX_FADV_RANDOM,
        Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
        Advice::NoReuse => libc::POSIX_FADV_NOREUSE,
    };
    // SAFETY: no pointers are passed.
    let ret = unsafe {
        libc::posix_fadvise(
            fd.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            advice,
        )
    };
    // posix_fadvise returns the error number instead of setting errno.
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Flags for [`sync_file_range`], combined with `|`. Unknown bits are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncFlags(pub u32);

impl SyncFlags {
    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: SyncFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Wait for writeback already under way in the range.
    pub const WAIT_BEFORE: SyncFlags = SyncFlags(libc::SYNC_FILE_RANGE_WAIT_BEFORE);
    /// Start writeback of dirty pages in the range (does not wait).
    pub const WRITE: SyncFlags = SyncFlags(libc::SYNC_FILE_RANGE_WRITE);
    /// Wait for the writeback of the range to complete.
    pub const WAIT_AFTER: SyncFlags = SyncFlags(libc::SYNC_FILE_RANGE_WAIT_AFTER);
    /// All three: write the range out and wait for it.
    pub const WRITE_AND_WAIT: SyncFlags = SyncFlags(
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    );
}

impl BitOr for SyncFlags {
    type Output = SyncFlags;
    fn bitor(self, rhs: SyncFlags) -> SyncFlags {
        SyncFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for SyncFlags {
    fn bitor_assign(&mut self, rhs: SyncFlags) {
        self.0 |= rhs.0;
    }
}

/// `sync_file_range(fd, offset, nbytes, flags)`: start and/or wait for the
/// writeback of a byte range; `nbytes` 0 means "to the end". Persists no
/// metadata and promises no durability. With `WAIT_AFTER` it reports (and
/// consumes, for this open file) writeback errors such as `EIO`/`ENOSPC`.
///
/// See sync_file_range(2); since Linux 2.6.17.
pub fn sync_file_range(
    fd: BorrowedFd<'_>,
    offset: u64,
    nbytes: u64,
    flags: SyncFlags,
) -> io::Result<()> {
    // SAFETY: no pointers are passed.
    let ret = unsafe {
        libc::sync_file_range(
            fd.as_raw_fd(),
            offset as libc::off64_t,
            nbytes as libc::off64_t,
            flags.0,
        )
    };
    cvt(ret as libc::c_long).map(drop)
}

/// `fdatasync(fd)`: write back the file's dirty data and wait for it.
/// Reports (and consumes, for this open file) writeback errors. Unlike
/// sync_file_range(), overlayfs forwards it to the real file.
///
/// See fdatasync(2).
pub fn fdatasync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: no pointers are passed.
    let ret = unsafe { libc::fdatasync(fd.as_raw_fd()) };
    cvt(ret as libc::c_long).map(drop)
}

/// What [`cachestat`] reports for a range, in pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStat {
    pub nr_cache: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub nr_evicted: u64,
    pub nr_recently_evicted: u64,
}

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[cfg(target_arch = "x86_64")]
const SYS_CACHESTAT: libc::c_long = 451;
#[cfg(not(target_arch = "x86_64"))]
const SYS_CACHESTAT: libc::c_long = 451; // same number on every architecture (asm-generic)

/// `cachestat(fd, &range, &stat, 0)`: page-cache counts for a byte range of a
/// file: cached, dirty, under writeback, evicted and recently evicted pages.
/// An empty [`FileRange::Bytes`] counts nothing without a call.
///
/// `ENOSYS` before Linux 6.5; `EPERM` unless the caller can write the file or
/// owns it. See cachestat(2); since Linux 6.5.
pub fn cachestat(fd: BorrowedFd<'_>, range: impl Into<FileRange>) -> io::Result<CacheStat> {
    let range = match range.into() {
        FileRange::Bytes(r) if r.is_empty() => return Ok(CacheStat::default()),
        FileRange::Bytes(r) => CachestatRange {
            off: r.start,
            len: r.end - r.start,
        },
        // The kernel's "to the end of the file".
        FileRange::ToEnd(off) => CachestatRange { off, len: 0 },
    };
    let mut out = [0u64; 5];
    // SAFETY: `range` and `out` are valid for the call and laid out as the
    // kernel's struct cachestat_range and struct cachestat (five u64s).
    let ret = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            out.as_mut_ptr(),
            0 as libc::c_uint,
        )
    };
    cvt(ret)?;
    Ok(CacheStat {
        nr_cache: out[0],
        nr_dirty: out[1],
        nr_writeback: out[2],
        nr_evicted: out[3],
        nr_recently_evicted: out[4],
    })
}

/// Residency of each page of `[offset, offset + len)` of a file, one byte per
/// page (bit 0 set: resident), by mapping the range read-only and calling
/// `mincore(2)`. `offset` is rounded down to a page. The file must be open for
/// reading.
///
/// Since Linux 5.2 the kernel reports every page resident for a file the caller
/// can neither write nor owns: check that before trusting the answer.
/// See mincore(2), mmap(2).
pub fn mincore_range(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let page = page_size();
    let start = offset / page * page;
    let len = (offset + len - start) as usize;
    if len == 0 {
        return Ok(Vec::new());
    }
    let pages = len.div_ceil(page as usize);
    let mut vec = vec![0u8; pages];
    // SAFETY: a fresh shared read-only mapping that nothing else references;
    // it is unmapped below before returning.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            start as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `addr..addr+len` is the mapping made above; `vec` has one byte
    // per page of it.
    let ret = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmapping exactly the mapping created above.
    unsafe { libc::munmap(addr, len) };
    if ret < 0 {
        return Err(err);
    }
    Ok(vec)
}

/// How many pages of `[offset, offset + len)` are resident, by
/// [`mincore_range`] a GiB at a time (so the vector stays small for huge
/// files). The same caveat: every page looks resident for a file the caller
/// can neither write nor owns.
pub fn mincore_resident(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<u64> {
    const STEP: u64 = 1 << 30;
    let (mut resident, mut at, end) = (0, offset, offset + len);
    while at < end {
        let n = STEP.min(end - at);
        resident += mincore_range(fd, at, n)?
            .iter()
            .filter(|b| **b & 1 == 1)
            .count() as u64;
        at += n;
    }
    Ok(resident)
}
