//! When a stream under [`DirectReads::UnderReclaim`](crate::DirectReads)
//! reads through O_DIRECT: while kswapd reclaims *and* the kernel takes the
//! stream's own pages out of the page cache before the stream drops them.
//!
//! Why both: kswapd running is not enough. Where the page cache has room
//! for the stream's few MiB, kswapd reclaims others' pages whatever the
//! stream does, and reading direct only costs the page cache's readahead
//! (0.67-0.94x; bench/runs/2026-11-27-fragmented). Where it has none, the
//! kernel reclaims what the stream just read, readahead included: every
//! page is then read, reclaimed and often read again, and a direct read is
//! faster and spares the reclaim (seq-read of 2 GiB with 512 MiB left to
//! the machine: 0.97x buffered through the cache, 185,923 pages reclaimed
//! per GB; 1.68x and 6,292 direct; bench/runs/2026-11-27-read-gap).
//!
//! How: the ranges read through the cache while kswapd runs are judged when
//! the stream is about to drop them (behind the read position): the share
//! of their pages already gone. Once [`PROBE_PAGES`] are judged, a loss of
//! at least [`LOSS_SHARE`] starts a direct phase of [`DIRECT_PHASE`]
//! bytes; after it the stream reads through the cache again, which judges
//! anew.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;

const PAGE: u64 = 4096;
/// Pages judged before a decision: 8 MiB.
pub const PROBE_PAGES: u64 = 2048;
/// The share of judged pages already gone that starts a direct phase.
pub const LOSS_SHARE: f64 = 0.25;
/// Bytes read direct before the stream looks through the cache again;
/// twice that after each phase whose next look found the loss again (each
/// look reads ~12 MiB through the cache, at the cost measured), up to
/// [`MAX_DIRECT_PHASE`].
pub const DIRECT_PHASE: u64 = 256 << 20;
/// The longest direct phase.
pub const MAX_DIRECT_PHASE: u64 = 4 << 30;
/// Ranges kept for judging at most (older ones are forgotten).
const MAX_UNJUDGED: usize = 64;

/// The decision and what it is based on; one per stream.
#[derive(Debug, Default)]
pub struct ReadSwitch {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Read through the cache while kswapd ran, not yet judged.
    unjudged: VecDeque<Range<u64>>,
    judged_pages: u64,
    lost_pages: u64,
    /// Bytes still to read direct in this phase.
    direct_left: u64,
    /// The length of the next direct phase.
    next_phase: u64,
    /// Direct phases started (statistics, tests).
    phases: u64,
}

impl ReadSwitch {
    /// Whether a read of `len` bytes goes direct: inside a direct phase,
    /// which it uses up by `len`.
    pub fn take_direct(&self, len: u64) -> bool {
        let mut st = self.lock();
        if st.direct_left == 0 {
            return false;
        }
        st.direct_left = st.direct_left.saturating_sub(len);
        if st.direct_left == 0 {
            // The next look judges only what it reads itself.
            st.judged_pages = 0;
            st.lost_pages = 0;
            st.unjudged.clear();
        }
        true
    }

    /// A read of `range` went through the page cache while kswapd ran.
    pub fn read_through_cache(&self, range: Range<u64>) {
        let mut st = self.lock();
        if st.unjudged.len() == MAX_UNJUDGED {
            st.unjudged.pop_front();
        }
        st.unjudged.push_back(range);
    }

    /// Whether there is anything to judge (so the caller need not look).
    pub fn has_unjudged(&self) -> bool {
        !self.lock().unjudged.is_empty()
    }

    /// The stream is about to drop `drops`: judge the parts of them read
    /// through the cache, `cached(range)` being how many of their pages are
    /// still there (None: cannot tell, not judged).
    pub fn judge(&self, drops: &[Range<u64>], cached: impl Fn(Range<u64>) -> Option<u64>) {
        let mut st = self.lock();
        for d in drops {
            let mut kept = VecDeque::with_capacity(st.unjudged.len());
            while let Some(u) = st.unjudged.pop_front() {
                let part = u.start.max(d.start)..u.end.min(d.end);
                if part.start < part.end {
                    let pages = (part.end - part.start) / PAGE;
                    if let Some(there) = cached(part) {
                        st.judged_pages += pages;
                        st.lost_pages += pages.saturating_sub(there);
                    }
                }
                // What lies past the drop is judged with a later one.
                if u.end > d.end {
                    kept.push_back(u.start.max(d.end)..u.end);
                }
            }
            st.unjudged = kept;
        }
        if st.judged_pages >= PROBE_PAGES {
            if st.lost_pages as f64 >= LOSS_SHARE * st.judged_pages as f64 {
                let phase = st.next_phase.max(DIRECT_PHASE);
                st.direct_left = phase;
                st.next_phase = (phase * 2).min(MAX_DIRECT_PHASE);
                st.phases += 1;
                log::debug!(
                    "direct reads for {} MiB: {} of {} pages read through the cache were gone before their drop",
                    phase >> 20,
                    st.lost_pages,
                    st.judged_pages
                );
            } else {
                st.next_phase = DIRECT_PHASE;
            }
            st.judged_pages = 0;
            st.lost_pages = 0;
        }
    }

    /// Direct phases started so far.
    pub fn phases(&self) -> u64 {
        self.lock().phases
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Reads 1 MiB at a time through the cache from `from`, each judged 4
    /// MiB later with `share_left` of its pages still cached.
    fn stream(s: &ReadSwitch, from: u64, mib: u64, share_left: f64) {
        for i in 0..mib {
            let off = from + i * MIB;
            s.read_through_cache(off..off + MIB);
            if off >= 4 * MIB {
                let d = off - 4 * MIB;
                s.judge(std::slice::from_ref(&(d..d + MIB)), |r| {
                    Some(((r.end - r.start) / PAGE) as f64 * share_left).map(|p| p as u64)
                });
            }
        }
    }

    #[test]
    fn no_loss_stays_in_the_cache() {
        let s = ReadSwitch::default();
        stream(&s, 0, 64, 1.0);
        assert_eq!(s.phases(), 0);
        assert!(!s.take_direct(MIB));
    }

    #[test]
    fn a_small_loss_stays_in_the_cache() {
        let s = ReadSwitch::default();
        stream(&s, 0, 64, 0.8);
        assert_eq!(s.phases(), 0);
        assert!(!s.take_direct(MIB));
    }

    #[test]
    fn losing_own_pages_goes_direct_for_a_phase_then_looks_again() {
        let s = ReadSwitch::default();
        // 8 MiB must be judged first: the 4 MiB lag, then 8 ranges.
        stream(&s, 0, 11, 0.3);
        assert!(!s.take_direct(MIB), "decided before 8 MiB were judged");
        stream(&s, 11 * MIB, 2, 0.3);
        assert_eq!(s.phases(), 1);
        let phase_mib = DIRECT_PHASE / MIB;
        for _ in 0..phase_mib {
            assert!(s.take_direct(MIB));
        }
        assert!(!s.take_direct(MIB), "the phase ends");
        // The ranges read before the phase and judged after it count for
        // nothing stale: the next decision needs a new probe.
        stream(&s, 512 * MIB, 64, 1.0);
        assert_eq!(s.phases(), 1);
    }

    /// Reads direct until the phase ends; returns its length in MiB.
    fn phase_mib(s: &ReadSwitch) -> u64 {
        let mut n = 0;
        while s.take_direct(MIB) {
            n += 1;
        }
        n
    }

    #[test]
    fn a_loss_found_again_doubles_the_phase_and_a_clean_look_resets_it() {
        let s = ReadSwitch::default();
        let mut at = 0;
        let mut lossy_look = |s: &ReadSwitch, share| {
            stream(s, at, 13, share);
            at += 1 << 30;
        };
        let phase = DIRECT_PHASE >> 20;
        lossy_look(&s, 0.3);
        assert_eq!(phase_mib(&s), phase);
        lossy_look(&s, 0.3);
        assert_eq!(phase_mib(&s), 2 * phase);
        lossy_look(&s, 0.3);
        assert_eq!(phase_mib(&s), 4 * phase);
        lossy_look(&s, 1.0);
        assert_eq!(phase_mib(&s), 0, "a clean look reads through the cache");
        lossy_look(&s, 0.3);
        assert_eq!(phase_mib(&s), phase);
        for _ in 0..10 {
            lossy_look(&s, 0.3);
        }
        assert_eq!(phase_mib(&s), MAX_DIRECT_PHASE >> 20);
    }

    #[test]
    fn unknown_residency_is_not_judged() {
        let s = ReadSwitch::default();
        for i in 0..64 {
            s.read_through_cache(i * MIB..(i + 1) * MIB);
            s.judge(std::slice::from_ref(&(i * MIB..(i + 1) * MIB)), |_| None);
        }
        assert_eq!(s.phases(), 0);
        assert!(!s.has_unjudged());
    }

    #[test]
    fn ranges_never_dropped_are_forgotten_not_hoarded() {
        let s = ReadSwitch::default();
        for i in 0..1000 {
            s.read_through_cache(i * MIB..(i + 1) * MIB);
        }
        assert_eq!(s.lock().unjudged.len(), MAX_UNJUDGED);
    }
}
