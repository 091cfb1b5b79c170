//! The per-stream cache keeper: it knows what the stream brought into the
//! page cache and takes it out again, within the contract. It does no data
//! I/O itself: the handle (or the LD_PRELOAD shim) calls its hooks around
//! each read and write.

use crate::backend::Caps;
use crate::readbehind::ReadBehind;
use crate::residency::{Blindness, Residency, CHUNK};
use crate::sys::{self, Advice, SyncFlags};
use crate::writebehind::{Actions, WriteBehind};
use std::io;
use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

/// Settings of one stream.
#[derive(Debug, Clone, Copy)]
pub struct TrackerConfig {
    /// Dirty + writeback bytes a stream may have at once.
    pub window: u64,
    /// How far behind the read position read pages may stay.
    pub read_lag: u64,
    /// How far ahead of reads residency is snapshotted: more than the
    /// readahead the kernel may issue, so our own readahead is never taken
    /// for pages cached by someone else.
    pub lookahead: u64,
    /// Keep pages that were cached before the stream touched them.
    pub preserve_cached: bool,
}

/// Counters kept by the tracker.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackerCounts {
    pub pages_dropped: u64,
    pub drop_calls: u64,
    pub writeback_starts: u64,
    pub writeback_waits: u64,
    pub writeback_wait_time: Duration,
    pub residency_snapshots: u64,
}

#[derive(Debug)]
pub struct Tracker {
    caps: Caps,
    cfg: TrackerConfig,
    residency: Residency,
    read_behind: ReadBehind,
    write_behind: WriteBehind,
    /// A writeback error not yet reported to the caller.
    deferred: Option<io::Error>,
    /// A writeback error happened (reported once, by the call after it;
    /// the statistics keep saying so).
    pub(crate) failed: bool,
    counts: TrackerCounts,
}

impl Tracker {
    /// `blind`: why the file's residency cannot be known, if it cannot.
    pub fn new(caps: Caps, cfg: TrackerConfig, blind: Option<Blindness>) -> Tracker {
        let residency = Residency::new(cfg.preserve_cached, blind);
        Tracker {
            caps,
            cfg,
            residency,
            read_behind: ReadBehind::new(cfg.read_lag),
            write_behind: WriteBehind::new(cfg.window),
            deferred: None,
            failed: false,
            counts: TrackerCounts::default(),
        }
    }

    pub fn counts(&self) -> TrackerCounts {
        TrackerCounts {
            residency_snapshots: self.residency.snapshots,
            ..self.counts
        }
    }

    pub fn residency(&self) -> &Residency {
        &self.residency
    }

    /// Before reading `[off, off + len)`: snapshot what lies ahead.
    pub fn before_read(&mut self, fd: BorrowedFd<'_>, off: u64, len: u64) {
        self.residency
            .ensure_known(fd, off, off + len + self.cfg.lookahead);
    }

    /// After reading `n` bytes at `off`: drop what lags far enough behind.
    pub fn after_read(&mut self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        let ranges = self.read_behind.consumed(off, n);
        if !self.caps.kernel_drops_reads {
            self.drop_ranges(fd, ranges);
        }
    }

    /// Before writing `[off, off + len)`: snapshot it; true if it holds
    /// pages cached by others (the direct backend then writes it buffered).
    pub fn before_write(&mut self, fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
        self.residency.ensure_known(fd, off, off + len);
        self.residency.overlaps_precached(&(off..off + len))
    }

    /// A writeback error kept for the next write, flush or close.
    pub fn take_deferred(&mut self) -> Option<io::Error> {
        self.deferred.take()
    }

    /// After writing `n` bytes at `off`: write behind. Errors of earlier
    /// writeback are kept for the next call (this write itself succeeded).
    pub fn after_write(&mut self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        let actions = self.write_behind.written(off, n);
        self.apply(fd, actions);
    }

    /// Start and wait for the writeback of everything written, drop it, and
    /// return any writeback error not yet reported.
    pub fn flush(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let actions = self.write_behind.take_all();
        self.apply(fd, actions);
        self.take_deferred().map_or(Ok(()), Err)
    }

    /// End of stream: flush, then drop everything the stream brought in
    /// (readahead past the last read included) that was not cached before,
    /// writing back first what was dirtied behind the stream. Returns the
    /// flush's error, else one of that last writeback.
    pub fn finish(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let flushed = self.flush(fd);
        let consumed = self.read_behind.take_all();
        self.drop_ranges(fd, consumed);
        let rest = self.residency.all_droppable();
        self.drop_exact(fd, rest, true);
        flushed?;
        self.take_deferred().map_or(Ok(()), Err)
    }

    fn apply(&mut self, fd: BorrowedFd<'_>, actions: Actions) {
        if !self.caps.kernel_starts_writeback {
            for r in &actions.start {
                self.counts.writeback_starts += 1;
                if let Err(e) = sys::sync_file_range(fd, r.start, r.end - r.start, SyncFlags::WRITE)
                {
                    self.record_error(e);
                }
            }
        }
        for r in actions.wait_and_drop {
            let t = Instant::now();
            let res = sys::sync_file_range(fd, r.start, r.end - r.start, SyncFlags::WRITE_AND_WAIT);
            self.counts.writeback_waits += 1;
            self.counts.writeback_wait_time += t.elapsed();
            match res {
                Ok(()) => self.drop_ranges(fd, vec![r]),
                Err(e) => self.record_error(e),
            }
        }
    }

    fn record_error(&mut self, e: io::Error) {
        log::warn!("writeback error kept for the next call: {e}");
        self.failed = true;
        if self.deferred.is_none() {
            self.deferred = Some(e);
        }
    }

    /// Drop the pages of `ranges` (widened to chunks, so that large folios
    /// go whole) that this stream may drop.
    fn drop_ranges(&mut self, fd: BorrowedFd<'_>, ranges: Vec<Range<u64>>) {
        let widened = ranges
            .into_iter()
            .map(|r| r.start / CHUNK * CHUNK..r.end.div_ceil(CHUNK) * CHUNK);
        let parts: Vec<_> = widened.flat_map(|r| self.residency.droppable(r)).collect();
        self.drop_exact(fd, parts, false);
    }

    /// Drop the pages of `ranges`; `closing`: write back dirty pages in
    /// them first (only at close, where nothing would drop them later).
    fn drop_exact(&mut self, fd: BorrowedFd<'_>, ranges: Vec<Range<u64>>, closing: bool) {
        for r in ranges {
            let len = r.end - r.start;
            let stat = sys::cachestat(fd, r.clone());
            let before = stat.as_ref().map(|c| c.nr_cache).unwrap_or(u64::MAX);
            if before == 0 {
                continue;
            }
            // At close, pages dirtied behind the stream (the zeroed edges of
            // a hole punched or a truncation through its descriptor) would
            // only be queued for writeback by fadvise(DONTNEED), and stay
            // cached: write them back and wait first.
            if closing && stat.is_ok_and(|c| c.nr_dirty + c.nr_writeback > 0) {
                if let Err(e) = sys::sync_file_range(fd, r.start, len, SyncFlags::WRITE_AND_WAIT) {
                    self.record_error(e);
                }
            }
            self.counts.drop_calls += 1;
            if let Err(e) = sys::fadvise(fd, r.start, len, Advice::DontNeed) {
                log::debug!("fadvise(DONTNEED) {}..{}: {e}", r.start, r.end);
                continue;
            }
            if before != u64::MAX {
                let after = sys::cachestat(fd, r.clone())
                    .map(|c| c.nr_cache)
                    .unwrap_or(before);
                self.counts.pages_dropped += before.saturating_sub(after);
            }
        }
    }
}
