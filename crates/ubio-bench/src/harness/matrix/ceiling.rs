//! The machine's memory bandwidth, as the physical limit drawn on the
//! matrix's plots: a memcpy between two buffers much larger than the CPU's
//! caches, by 1, 2, 4, ... threads at once. Buffered I/O copies every byte
//! at least once (page cache to user or back), so no buffered mode can
//! beat this line; over a loop device in /dev/shm a buffered read copies
//! twice (the loop device into the page cache, then to the reader) and an
//! O_DIRECT read once.
//!
//! The buffers are faulted in and copied once before timing (on a VM that
//! backs memory lazily the first touch would measure the host instead).

use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use std::io;
use std::sync::Barrier;
use std::time::Instant;
use ubio::size::human as human_bytes;

/// Timed passes per thread count (the figure is their median).
pub const PASSES: u32 = 5;
/// The buffers of each thread: twice this (source and destination).
pub const DEFAULT_BYTES: u64 = 256 << 20;

/// memcpy throughput by thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Each thread's source (and destination) buffer.
    pub buffer_bytes: u64,
    pub by_threads: Vec<ThreadsCeiling>,
}

/// Bytes copied per second by `threads` threads together (each byte read
/// once and written once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadsCeiling {
    pub threads: u32,
    pub mb_per_s: Summary,
}

impl Ceiling {
    /// The median MB/s at `threads` (the nearest measured count below it,
    /// else above it).
    pub fn at(&self, threads: u32) -> Option<f64> {
        let below = self.by_threads.iter().rfind(|c| c.threads <= threads);
        below
            .or_else(|| self.by_threads.first())
            .map(|c| c.mb_per_s.median)
    }

    /// "memcpy ceiling: 1 thread 9800 MB/s, 2 threads 15000 MB/s (256 MiB buffers)".
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .by_threads
            .iter()
            .map(|c| {
                format!(
                    "{} thread{} {:.0} MB/s [{:.0}-{:.0}]",
                    c.threads,
                    if c.threads == 1 { "" } else { "s" },
                    c.mb_per_s.median,
                    c.mb_per_s.min,
                    c.mb_per_s.max
                )
            })
            .collect();
        format!(
            "memcpy ceiling: {} ({} buffers per thread, median of {PASSES} passes)",
            each.join(", "),
            human_bytes(self.buffer_bytes)
        )
    }
}

/// Measures memcpy with each of `threads` (`bytes` per buffer, `passes`
/// timed passes each).
pub fn measure(threads: &[u32], bytes: u64, passes: u32) -> io::Result<Ceiling> {
    let len = usize::try_from(bytes).map_err(io::Error::other)?;
    let by_threads = threads
        .iter()
        .map(|&n| {
            let rates: Vec<f64> = copy_passes(n as usize, len, passes)
                .iter()
                .map(|secs| n as f64 * bytes as f64 / secs / 1e6)
                .collect();
            let mb_per_s = Summary::of(&rates)
                .ok_or_else(|| io::Error::other("memcpy ceiling: no pass was timed"))?;
            Ok(ThreadsCeiling {
                threads: n,
                mb_per_s,
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok(Ceiling {
        buffer_bytes: bytes,
        by_threads,
    })
}

/// `passes` timed copies of `len` bytes by `n` threads at once (after one
/// untimed copy): each pass's seconds, from the common start to the last
/// thread's end.
fn copy_passes(n: usize, len: usize, passes: u32) -> Vec<f64> {
    let start = Barrier::new(n + 1);
    let end = Barrier::new(n + 1);
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                let src = vec![0x5au8; len];
                let mut dst = vec![0u8; len];
                dst.copy_from_slice(&src);
                for _ in 0..passes {
                    start.wait();
                    dst.copy_from_slice(std::hint::black_box(&src));
                    std::hint::black_box(&dst);
                    end.wait();
                }
            });
        }
        (0..passes)
            .map(|_| {
                start.wait();
                let t = Instant::now();
                end.wait();
                t.elapsed().as_secs_f64()
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement is made of whole passes per thread count (its value
    /// is a timing, not asserted).
    #[test]
    fn one_figure_per_thread_count_from_every_pass() {
        let c = measure(&[1, 2], 4 << 20, 3).unwrap();
        assert_eq!(c.by_threads.len(), 2);
        for (t, want) in c.by_threads.iter().zip([1, 2]) {
            assert_eq!(t.threads, want);
            assert_eq!(t.mb_per_s.n, 3);
            assert!(t.mb_per_s.min > 0.0 && t.mb_per_s.min <= t.mb_per_s.max);
        }
        assert_eq!(c.at(1), Some(c.by_threads[0].mb_per_s.median));
        assert_eq!(
            c.at(4),
            Some(c.by_threads[1].mb_per_s.median),
            "nearest below"
        );
        assert!(c.describe().starts_with("memcpy ceiling: 1 thread "));
    }
}
