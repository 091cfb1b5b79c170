//! Backends: how bytes move between a file and the caller. One trait, with
//! capability flags that tell the core (the tracker) what is left for it to
//! do, instead of special cases by name.

mod buffered;
mod direct;
mod emulated;
mod kernel;

pub use buffered::Buffered;
pub use direct::Direct;
pub use emulated::Emulated;
pub use kernel::Kernel;

use crate::sys::RwFlags;
use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;
use std::str::FromStr;

/// The backends a caller can ask for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Pick the fastest backend that keeps the contract for this file.
    #[default]
    Auto,
    /// preadv2()/pwritev2() with RWF_DONTCACHE (Linux 6.14+, some filesystems).
    Kernel,
    /// Plain buffered I/O plus fadvise(DONTNEED), sync_file_range() and
    /// cachestat()/mincore(): every kernel and filesystem.
    Emulated,
    /// O_DIRECT through aligned bounce buffers.
    Direct,
    /// Plain buffered I/O: the baseline; the page cache is not managed.
    Buffered,
}

impl BackendKind {
    pub const ALL: [BackendKind; 5] = [
        BackendKind::Auto,
        BackendKind::Kernel,
        BackendKind::Emulated,
        BackendKind::Direct,
        BackendKind::Buffered,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Kernel => "kernel",
            BackendKind::Emulated => "emulated",
            BackendKind::Direct => "direct",
            BackendKind::Buffered => "buffered",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown backend '{s}' (expected auto, kernel, emulated, direct or buffered)"
                )
            })
    }
}

/// What a backend does by itself; the tracker does the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    /// The kernel drops pages read during the stream (only leftovers remain).
    pub kernel_drops_reads: bool,
    /// The kernel starts writeback right after each write.
    pub kernel_starts_writeback: bool,
    /// Plain reads through the page cache, which may go through O_DIRECT
    /// instead while the kernel reclaims ([`crate::DirectReads`]).
    pub direct_reads: bool,
    /// Reads go through O_DIRECT: what the kernel caches of them anyway
    /// (its buffered fallback) is dropped right after each call.
    pub reads_o_direct: bool,
}

/// Where a read comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAt {
    /// At this offset; the file position does not move (pread(2)).
    Offset(u64),
    /// At the file position, which the caller has just read as this offset;
    /// the position moves past the data (read(2)).
    Position(u64),
}

impl ReadAt {
    /// Where the data is expected to come from.
    pub fn offset(self) -> u64 {
        match self {
            ReadAt::Offset(o) | ReadAt::Position(o) => o,
        }
    }
}

/// Where a write goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAt {
    /// At this offset; the file position does not move (pwrite(2)).
    Offset(u64),
    /// At the file position, which the caller has just read as this offset;
    /// the position moves past the data (write(2)).
    Position(u64),
    /// At the end of file, wherever it is when the write lands (O_APPEND);
    /// the position moves past the data.
    End,
    /// At the end of file (O_APPEND), from pwrite(2): the position does not move.
    EndPositional,
}

/// A backend bound to one open file. The page-cache backends differ only in
/// their per-call flags and capabilities; `direct` overrides `read`/`write`.
pub trait Backend: Send + Sync + fmt::Debug {
    /// What the kernel does for this backend (by default: nothing).
    fn caps(&self) -> Caps {
        Caps::default()
    }
    /// The `RWF_*` flags of every read and write.
    fn flags(&self) -> RwFlags {
        RwFlags::NONE
    }
    /// Read into `bufs` where `at` says. Short only at end of file (or on a
    /// signal).
    fn read(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &mut [IoSliceMut<'_>],
        at: ReadAt,
    ) -> io::Result<usize> {
        match at {
            ReadAt::Offset(off) => crate::sys::preadv2(fd, bufs, Some(off), self.flags()),
            // -1: the kernel reads at the position and moves it, atomically
            // against every other user of the open file description.
            ReadAt::Position(_) => crate::sys::preadv2(fd, bufs, None, self.flags()),
        }
    }
    /// Write `bufs` where `at` says. `keep_cached`: the range holds pages
    /// cached by others. Returns the offset written at and the count.
    fn write(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        at: WriteAt,
        _keep_cached: bool,
    ) -> io::Result<(u64, usize)> {
        pwrite_with_flags(fd, bufs, at, self.flags())
    }
}

/// A write through the page cache with per-call flags: pwritev2 at an
/// offset, or at the file position (-1), which the kernel moves.
pub(crate) fn pwrite_with_flags(
    fd: BorrowedFd<'_>,
    bufs: &[IoSlice<'_>],
    at: WriteAt,
    flags: crate::sys::RwFlags,
) -> io::Result<(u64, usize)> {
    use crate::sys;
    match at {
        WriteAt::Offset(off) => Ok((off, sys::pwritev2(fd, bufs, Some(off), flags)?)),
        WriteAt::Position(pos) => Ok((pos, sys::pwritev2(fd, bufs, None, flags)?)),
        WriteAt::End => {
            // The kernel picks the offset and leaves the position after it.
            let n = sys::pwritev2(fd, bufs, None, flags)?;
            let end = sys::lseek_cur(fd)?;
            Ok((end - n as u64, n))
        }
        WriteAt::EndPositional => {
            // O_APPEND: the kernel appends whatever the offset, and the
            // position stays; the end after the write says where it went.
            let n = sys::pwritev2(fd, bufs, Some(0), flags)?;
            let end = sys::fstat(fd)?.st_size as u64;
            Ok((end.saturating_sub(n as u64), n))
        }
    }
}
