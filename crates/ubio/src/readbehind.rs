//! Drop-behind for reads: pages this stream read are dropped soon after they
//! are consumed, in windows that lag behind the read position and are aligned
//! to large folios (dropping exactly the block just read silently fails once
//! readahead builds large folios).

use crate::residency::CHUNK;
use std::ops::Range;

/// Bytes of consumed data to accumulate before issuing a drop.
pub const DROP_BATCH: u64 = 8 << 20;

#[derive(Debug)]
pub struct ReadBehind {
    /// How far behind the read position pages may stay (aligned to CHUNK).
    lag: u64,
    /// The current sequential run: `[run_start, run_end)` read, and
    /// `[run_start, dropped_to)` already dropped.
    run_start: u64,
    run_end: u64,
    /// Consumed ranges from earlier, non-sequential reads, waiting for a drop.
    scattered: Vec<Range<u64>>,
    scattered_bytes: u64,
}

impl ReadBehind {
    pub fn new(lag: u64) -> Self {
        ReadBehind {
            lag,
            run_start: 0,
            run_end: 0,
            scattered: Vec::new(),
            scattered_bytes: 0,
        }
    }

    /// Record that `[off, off + n)` was consumed; return the ranges to drop now.
    pub fn consumed(&mut self, off: u64, n: u64) -> Vec<Range<u64>> {
        if n == 0 {
            return Vec::new();
        }
        if off != self.run_end {
            // A seek: the old run becomes scattered leftovers.
            if self.run_end > self.run_start {
                self.push_scattered(self.run_start..self.run_end);
            }
            self.run_start = off / CHUNK * CHUNK;
            self.run_end = off;
        }
        self.run_end = off + n;
        let mut out = Vec::new();
        let behind = self.run_end.saturating_sub(self.lag) / CHUNK * CHUNK;
        if behind >= self.run_start + DROP_BATCH {
            out.push(self.run_start..behind);
            self.run_start = behind;
        }
        if self.scattered_bytes >= DROP_BATCH {
            out.append(&mut self.scattered);
            self.scattered_bytes = 0;
        }
        out
    }

    fn push_scattered(&mut self, r: Range<u64>) {
        // Widen to whole chunks so large folios go too.
        let r = r.start / CHUNK * CHUNK..r.end.div_ceil(CHUNK) * CHUNK;
        self.scattered_bytes += r.end - r.start;
        self.scattered.push(r);
    }

    /// Everything consumed and not yet dropped (for flush and close).
    pub fn take_all(&mut self) -> Vec<Range<u64>> {
        if self.run_end > self.run_start {
            let r = self.run_start..self.run_end;
            self.push_scattered(r);
            self.run_start = self.run_end;
        }
        self.scattered_bytes = 0;
        std::mem::take(&mut self.scattered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_reads_drop_aligned_lagging_windows() {
        let mut rb = ReadBehind::new(4 << 20);
        let mut dropped = Vec::new();
        for i in 0..64u64 {
            dropped.extend(rb.consumed(i << 20, 1 << 20));
        }
        assert!(!dropped.is_empty());
        for r in &dropped {
            assert_eq!(r.start % CHUNK, 0);
            assert_eq!(r.end % CHUNK, 0);
            assert!(r.end <= (64 << 20) - (4 << 20));
        }
        // Contiguous, no overlap.
        for w in dropped.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        let rest = rb.take_all();
        assert_eq!(rest.last().unwrap().end, 64 << 20);
    }

    #[test]
    fn random_reads_are_batched() {
        let mut rb = ReadBehind::new(4 << 20);
        let mut out = Vec::new();
        for i in 0..8u64 {
            out.extend(rb.consumed((i * 100) << 20, 4096));
        }
        // Seven finished runs of one chunk each (14 MiB) passed the batch.
        assert!(!out.is_empty());
        assert!(out.iter().all(|r| r.end - r.start == CHUNK));
    }
}
