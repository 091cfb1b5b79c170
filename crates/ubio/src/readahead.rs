//! A stream's own readahead in small folios, where the kernel's would cost
//! other processes their cache.
//!
//! Why: where a device's readahead is 2 MiB or more, the kernel's
//! readahead asks for 2 MiB folios. On fragmented memory each one fails
//! and wakes kswapd for order 9, which reclaims from the inactive list's
//! tail whatever the free memory; a stream under ubio has dropped its own
//! pages, so what kswapd takes is other processes' (beside PostgreSQL, 6 of
//! 6 copies under ubio left 0-22 MiB of its 276, where plain copies kept
//! 246-253: bench/runs/2026-12-07-neighbours-fragmentation). Reading ahead
//! with POSIX_FADV_WILLNEED allocates single pages, which never wake
//! kswapd for more than the watermarks: a prototype doing so kept all 276
//! MiB in 3 of 3 copies at the same copy speed. Single pages cost a fast
//! reader CPU (a cold 2 GiB file on ext4 over /dev/shm: 2,433 MB/s
//! against 11,541 with the kernel's readahead), so they are used only
//! while kswapd reclaims for high-order allocations
//! ([`crate::reclaim::high_order_reclaim`]).
//!
//! How: POSIX_FADV_RANDOM on the stream's open file turns the kernel's
//! readahead off for it (a read of pages not cached then reads just those,
//! in single pages), and before each read through the page cache that goes
//! on from near the last one the stream asks for the next [`AHEAD`] bytes
//! with POSIX_FADV_WILLNEED, in steps of [`STEP`] (a random read is given
//! its own pages only, as the kernel's readahead would). The residency
//! snapshot before the read covers them (the tracker's lookahead is
//! longer), so they count as the stream's own and are dropped behind it.
//! Meanwhile the stream's large aligned reads go through O_DIRECT instead
//! where they may (`DirectReads`): faster than single pages, and no page
//! cache at all. Back to the kernel's readahead (and at the stream's end),
//! POSIX_FADV_NORMAL: a program's own POSIX_FADV_SEQUENTIAL (GNU cp's) is
//! not restored.

use crate::setting::{from_str_by_name, Setting};
use crate::sys::{self, Advice};
use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How far past the end of each read the stream has asked for its pages:
/// a few steps, within the tracker's lookahead (at least 16 MiB).
pub const AHEAD: u64 = 12 << 20;
/// Bytes asked for in one POSIX_FADV_WILLNEED.
pub const STEP: u64 = 4 << 20;

/// When a stream of the emulated backend reads ahead in small folios
/// itself instead of through the kernel's readahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SmallReadahead {
    Never,
    /// Where the device's readahead reaches 2 MiB folios, while kswapd
    /// reclaims for high-order allocations (within
    /// [`crate::reclaim::ACTIVE_FOR`] of the last time it did).
    #[default]
    WhenFragmented,
    /// Always, whatever the device: for tests.
    Always,
}

impl Setting for SmallReadahead {
    const ALL: &'static [Self] = &[
        SmallReadahead::Never,
        SmallReadahead::WhenFragmented,
        SmallReadahead::Always,
    ];
    const WHAT: &'static str = "small readahead";
    const ENV: &'static str = "UBIO_SMALL_READAHEAD";
    fn name(self) -> &'static str {
        match self {
            SmallReadahead::Never => "never",
            SmallReadahead::WhenFragmented => "when-fragmented",
            SmallReadahead::Always => "always",
        }
    }
}
from_str_by_name!(SmallReadahead);

/// How the next read through the page cache reads ahead ([`Readahead::now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folios {
    /// The kernel's readahead.
    Kernel,
    /// Small folios, because the settings say always.
    SmallAlways,
    /// Small folios, because kswapd reclaims for high-order allocations:
    /// reads that may go through O_DIRECT then do.
    SmallFragmented,
}

impl Folios {
    fn is_small(self) -> bool {
        self != Folios::Kernel
    }

    fn why(self) -> &'static str {
        match self {
            Folios::Kernel => "the kernel's again",
            Folios::SmallAlways => "small folios (always)",
            Folios::SmallFragmented => "small folios (kswapd reclaims for high-order allocations)",
        }
    }
}

/// The readahead of one stream.
#[derive(Debug)]
pub(crate) struct Readahead {
    when: SmallReadahead,
    state: Mutex<State>,
    /// Bytes asked for with POSIX_FADV_WILLNEED (statistics, tests).
    asked: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// POSIX_FADV_RANDOM is set on the open file: the stream reads ahead.
    small: bool,
    /// Asked for up to here (from the last read's position on).
    asked_to: u64,
    /// Where the last read ended.
    last_end: u64,
    /// Times the stream went over to small folios.
    phases: u64,
}

impl Readahead {
    /// The readahead of a stream on a device whose readahead reaches 2 MiB
    /// folios (`large_folios`), or None where it never reads ahead itself.
    pub fn new(when: SmallReadahead, large_folios: bool) -> Option<Readahead> {
        let may = match when {
            SmallReadahead::Never => false,
            SmallReadahead::WhenFragmented => large_folios,
            SmallReadahead::Always => true,
        };
        may.then(|| Readahead {
            when,
            state: Mutex::new(State::default()),
            asked: AtomicU64::new(0),
        })
    }

    /// How the next read reads ahead, `fragmented` saying whether kswapd
    /// reclaims for high-order allocations (asked only where it matters).
    pub fn now(&self, fragmented: impl FnOnce() -> bool) -> Folios {
        match self.when {
            SmallReadahead::Always => Folios::SmallAlways,
            SmallReadahead::WhenFragmented if fragmented() => Folios::SmallFragmented,
            _ => Folios::Kernel,
        }
    }

    /// Before a read of `range` through the page cache of `fd`, after the
    /// residency snapshot of the range and the lookahead past it: go over
    /// to small folios or back as [`now`](Self::now) said, and, in small
    /// folios, ask for what the read and the next [`AHEAD`] bytes need.
    pub fn before_read(&self, fd: BorrowedFd<'_>, range: Range<u64>, folios: Folios) {
        let small = folios.is_small();
        let asks = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            // Only a reader that goes on from near its last read is read
            // ahead of (a random read gets its own pages only, as the
            // kernel's readahead would give it).
            let goes_on =
                (st.last_end.saturating_sub(AHEAD)..=st.last_end + STEP).contains(&range.start);
            st.last_end = range.end;
            if small != st.small {
                let advice = if small {
                    Advice::Random
                } else {
                    Advice::Normal
                };
                if let Err(e) = sys::fadvise(fd, 0, 0, advice) {
                    log::debug!("readahead: fadvise {advice:?}: {e}");
                    return;
                }
                log::debug!("readahead: {} at offset {}", folios.why(), range.start);
                st.small = small;
                st.phases += u64::from(small);
                st.asked_to = range.start;
            }
            if !small || !goes_on {
                return;
            }
            // A seek (back, or past what was asked for) starts over here.
            if st.asked_to < range.start || st.asked_to > range.end + AHEAD + STEP {
                st.asked_to = range.start;
            }
            let from = st.asked_to;
            // Whole steps: one batch of asks (and one fstat) per STEP read.
            let steps = (range.end + AHEAD).saturating_sub(from).div_ceil(STEP);
            let mut to = from + steps * STEP;
            if to > from {
                // Not past the end of file, where the kernel reads nothing
                // (a file that grows is asked for as it grows).
                let size = sys::fstat(fd).map_or(u64::MAX, |s| s.st_size as u64);
                to = to.min(size.max(from));
            }
            st.asked_to = to;
            (from..to)
                .step_by(STEP as usize)
                .map(move |at| (at, STEP.min(to - at)))
        };
        for (at, len) in asks {
            if sys::fadvise(fd, at, len, Advice::WillNeed).is_ok() {
                self.asked.fetch_add(len, Ordering::Relaxed);
            }
        }
    }

    /// At the end of the stream: the kernel's readahead back on the open
    /// file, which others may go on reading (a description inherited by
    /// another process outlives the stream).
    pub fn finish(&self, fd: BorrowedFd<'_>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.small {
            st.small = false;
            let _ = sys::fadvise(fd, 0, 0, Advice::Normal);
        }
    }

    /// Times the stream went over to small folios.
    pub fn phases(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).phases
    }

    /// Bytes asked for with POSIX_FADV_WILLNEED.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }
}
