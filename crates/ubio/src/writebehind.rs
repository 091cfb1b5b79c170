//! The write-behind window (seed 004, and Linus's streaming-write pattern).
//!
//! Written ranges collect in `pending`. Once half a window is pending, its
//! writeback is started asynchronously and it moves to `inflight`; once more
//! than half a window is in flight, the oldest in-flight range is waited for
//! and its pages dropped. So a stream's dirty + writeback footprint stays
//! within one window plus one I/O, and the writer waits only for writeback
//! it started one step earlier: the device always has the next half window
//! queued. Random writers are handled per range the same way.
//!
//! This module decides *what* to do; the tracker does it.

use crate::sys::page_size;
use std::collections::VecDeque;
use std::ops::Range;

/// More scattered ranges than this are pushed out regardless of their size,
/// so the bookkeeping of a random writer stays small.
const MAX_PENDING_RANGES: usize = 256;

#[derive(Debug)]
pub struct WriteBehind {
    /// Bytes that may be dirty or under writeback at once.
    window: u64,
    pending: Vec<Range<u64>>,
    inflight: VecDeque<Range<u64>>,
    inflight_bytes: u64,
}

/// What the tracker must do after a write.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Actions {
    /// Start writeback of these ranges (sync_file_range WRITE).
    pub start: Vec<Range<u64>>,
    /// Wait for these ranges' writeback, then drop their pages.
    pub wait_and_drop: Vec<Range<u64>>,
}

fn len(r: &Range<u64>) -> u64 {
    r.end - r.start
}

impl WriteBehind {
    pub fn new(window: u64) -> Self {
        WriteBehind {
            window: window.max(2 * page_size()),
            pending: Vec::new(),
            inflight: VecDeque::new(),
            inflight_bytes: 0,
        }
    }

    fn step(&self) -> u64 {
        self.window / 2
    }

    pub fn pending_bytes(&self) -> u64 {
        self.pending.iter().map(len).sum()
    }

    /// Record a write of `[off, off + n)`; return what to do now.
    pub fn written(&mut self, off: u64, n: u64) -> Actions {
        if n == 0 {
            return Actions::default();
        }
        let page = page_size();
        let r = off / page * page..(off + n).div_ceil(page) * page;
        self.insert_pending(r);

        let mut actions = Actions::default();
        if self.pending_bytes() >= self.step() || self.pending.len() > MAX_PENDING_RANGES {
            // Keep the last, partly written page of a sequential stream
            // pending: the next write will dirty it again.
            let tail_page = (off + n) / page * page;
            let mut keep = Vec::new();
            for mut r in std::mem::take(&mut self.pending) {
                if r.end == (off + n).div_ceil(page) * page
                    && tail_page > r.start
                    && tail_page < r.end
                {
                    keep.push(tail_page..r.end);
                    r.end = tail_page;
                }
                self.inflight_bytes += len(&r);
                self.inflight.push_back(r.clone());
                actions.start.push(r);
            }
            self.pending = keep;
        }
        while self.inflight_bytes > self.step() {
            let r = self
                .inflight
                .pop_front()
                .expect("inflight bytes imply a range");
            self.inflight_bytes -= len(&r);
            actions.wait_and_drop.push(r);
        }
        actions
    }

    /// Everything outstanding (for flush and close): start it all, wait for it all.
    pub fn take_all(&mut self) -> Actions {
        let start = std::mem::take(&mut self.pending);
        let mut wait: Vec<_> = self.inflight.drain(..).collect();
        wait.extend(start.iter().cloned());
        self.inflight_bytes = 0;
        Actions {
            start,
            wait_and_drop: wait,
        }
    }

    /// Merge `r` into the pending ranges (kept sorted and disjoint).
    fn insert_pending(&mut self, mut r: Range<u64>) {
        // Fast path: a sequential stream extends its last range.
        if let Some(last) = self.pending.last_mut() {
            if r.start >= last.start && r.start <= last.end {
                last.end = last.end.max(r.end);
                return;
            }
        }
        let mut merged = Vec::with_capacity(self.pending.len() + 1);
        for p in self.pending.drain(..) {
            if p.end < r.start || p.start > r.end {
                merged.push(p);
            } else {
                r = r.start.min(p.start)..r.end.max(p.end);
            }
        }
        merged.push(r);
        merged.sort_by_key(|p| p.start);
        self.pending = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Simulate a stream where every started range completes only when
    /// waited for: the largest dirty + writeback total ever outstanding.
    fn peak_footprint(window: u64, io: u64, total: u64) -> u64 {
        let mut wb = WriteBehind::new(window);
        let mut outstanding: u64 = 0;
        let mut peak = 0;
        let mut off = 0;
        while off < total {
            outstanding += io;
            peak = peak.max(outstanding);
            let a = wb.written(off, io);
            for r in a.wait_and_drop {
                outstanding -= r.end - r.start;
            }
            off += io;
        }
        peak
    }

    #[test]
    fn sequential_footprint_stays_within_window_plus_one_io() {
        for io in [4096, 65536, MIB, 3 * MIB + 17] {
            let peak = peak_footprint(16 * MIB, io, 256 * MIB);
            assert!(peak <= 16 * MIB + io + 2 * 4096, "io {io}: peak {peak}");
        }
    }

    #[test]
    fn waits_only_for_the_previous_step() {
        let mut wb = WriteBehind::new(16 * MIB);
        let mut starts = 0;
        for i in 0..8 {
            let a = wb.written(i * MIB, MIB);
            starts += a.start.len();
            if i < 15 {
                assert!(a.wait_and_drop.is_empty(), "write {i} waited too early");
            }
        }
        assert_eq!(
            starts, 1,
            "writeback started once half a window was pending"
        );
        let a = wb.written(8 * MIB, 8 * MIB);
        assert_eq!(a.start, vec![8 * MIB..16 * MIB]);
        assert_eq!(a.wait_and_drop, vec![0..8 * MIB]);
    }

    #[test]
    fn random_writes_are_merged_and_flushed() {
        let mut wb = WriteBehind::new(16 * MIB);
        wb.written(10 * MIB, 100);
        wb.written(0, 100);
        wb.written(50, 4096);
        let a = wb.take_all();
        assert_eq!(a.start, vec![0..8192, 10 * MIB..10 * MIB + 4096]);
    }
}
