//! Small statistics over benchmark samples: median, min, max, percentiles.
//!
//! Timings on a shared VM are noisy, so results are reported as a median with
//! its min and max, never as a single run or a mean. NaN samples are ignored.

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0..=100) of `samples`, by linear interpolation
/// between the closest ranks (p = 50 is the median). `None` for no samples.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = p.clamp(0.0, 100.0) / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (rank - lo as f64))
}

/// The median (the mean of the two middle samples for an even count).
pub fn median(samples: &[f64]) -> Option<f64> {
    percentile(samples, 50.0)
}

/// The smallest sample.
pub fn min(samples: &[f64]) -> Option<f64> {
    samples
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .reduce(f64::min)
}

/// The largest sample.
pub fn max(samples: &[f64]) -> Option<f64> {
    samples
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .reduce(f64::max)
}

/// The sample standard deviation (n - 1 in the denominator); 0 for a
/// single sample, `None` for none.
pub fn stddev(samples: &[f64]) -> Option<f64> {
    let v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    if v.len() == 1 {
        return Some(0.0);
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    Some(var.sqrt())
}

/// Median, min, max and standard deviation of a set of samples, and how
/// many there were.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    #[serde(default)]
    pub stddev: f64,
    pub n: usize,
}

impl Summary {
    /// `None` for no (non-NaN) samples.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        Some(Summary {
            median: median(samples)?,
            min: min(samples)?,
            max: max(samples)?,
            stddev: stddev(samples)?,
            n: samples.iter().filter(|x| !x.is_nan()).count(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn percentiles_interpolate() {
        let v = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(percentile(&v, 0.0), Some(10.0));
        assert_eq!(percentile(&v, 100.0), Some(50.0));
        assert_eq!(percentile(&v, 25.0), Some(20.0));
        assert_eq!(percentile(&v, 10.0), Some(14.0));
        assert_eq!(percentile(&v, 150.0), Some(50.0), "clamped");
    }

    #[test]
    fn min_max_ignore_nan() {
        let v = [2.0, f64::NAN, -1.0, 5.0];
        assert_eq!(min(&v), Some(-1.0));
        assert_eq!(max(&v), Some(5.0));
        assert_eq!(median(&v), Some(2.0));
        assert_eq!(min(&[f64::NAN]), None);
    }

    #[test]
    fn summary() {
        let s = Summary::of(&[3.0, 9.0, 1.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (3.5, 1.0, 9.0, 4));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn stddev_is_the_sample_deviation() {
        // mean 5, squared deviations 9+1+1+9 = 20, / (4-1)
        let s = stddev(&[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert!((s - (20.0f64 / 3.0).sqrt()).abs() < 1e-12, "{s}");
        assert_eq!(stddev(&[7.0]), Some(0.0));
        assert_eq!(stddev(&[]), None);
    }
}
