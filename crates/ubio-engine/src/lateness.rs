//! How late the engine's looks come: each look that was due (its interval
//! ran out, rather than an event waking it early) is late by how long after
//! its due time it began. A look comes late when its thread waits for a CPU
//! (a loaded machine) or behind a call that blocks; what a followed writer
//! writes meanwhile goes beyond its window. Kept as a histogram with fixed
//! bounds (what the metrics endpoint exports as
//! `ubio_policy_look_lateness_seconds`), the sum and the worst.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The histogram's upper bounds, in seconds: 0.1 ms to 1 s.
pub const BOUNDS: [f64; 12] = [
    0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
];

/// Lateness of the looks that were due.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Looks late by at most each of [`BOUNDS`] (cumulative, as Prometheus
    /// buckets are); looks later than the last bound count in `count` only.
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_s: f64,
    pub max_s: f64,
}

impl Lateness {
    /// Count one due look that began `late` after its due time.
    pub fn record(&mut self, late: Duration) {
        if self.buckets.len() != BOUNDS.len() {
            self.buckets = vec![0; BOUNDS.len()];
        }
        let s = late.as_secs_f64();
        for (b, bound) in self.buckets.iter_mut().zip(BOUNDS) {
            if s <= bound {
                *b += 1;
            }
        }
        self.count += 1;
        self.sum_s += s;
        self.max_s = self.max_s.max(s);
    }

    /// The lateness below which a fraction `q` of the looks came, as the
    /// histogram's bound, or the worst seen where that is less (None
    /// without looks).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let want = (q * self.count as f64).ceil() as u64;
        let bound = self
            .buckets
            .iter()
            .zip(BOUNDS)
            .find(|(n, _)| **n >= want)
            .map(|(_, b)| b);
        Some(bound.map_or(self.max_s, |b| b.min(self.max_s)))
    }

    /// Add another's counts (a finished engine's to a daemon's).
    pub fn merge(&mut self, o: &Lateness) {
        if o.count == 0 {
            return;
        }
        if self.buckets.len() != BOUNDS.len() {
            self.buckets = vec![0; BOUNDS.len()];
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum_s += o.sum_s;
        self.max_s = self.max_s.max(o.max_s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_quantiles_are_bounds() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile(0.5), None);
        for ms in [0.05, 0.3, 0.3, 3.0, 40.0, 2000.0] {
            l.record(Duration::from_secs_f64(ms / 1000.0));
        }
        assert_eq!(l.count, 6);
        assert_eq!(l.buckets[0], 1, "0.1 ms");
        assert_eq!(l.buckets[1], 3, "0.5 ms");
        assert_eq!(l.buckets[4], 4, "5 ms");
        assert_eq!(*l.buckets.last().unwrap(), 5, "1 s: the 2 s look is beyond");
        assert_eq!(l.quantile(0.5), Some(0.0005));
        assert_eq!(l.quantile(1.0), Some(2.0));
        assert!((l.max_s - 2.0).abs() < 1e-9);
        let mut m = Lateness::default();
        m.merge(&l);
        m.merge(&l);
        assert_eq!((m.count, m.buckets[1]), (12, 6));
    }
}
