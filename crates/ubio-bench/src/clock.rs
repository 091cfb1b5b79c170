//! One clock for every process of a benchmark.
//!
//! The parent and its worker processes time phases and per-second samples
//! against each other, so they need a clock that means the same in all of
//! them: `CLOCK_MONOTONIC` (what `std::time::Instant` uses on Linux, but
//! `Instant` cannot be sent to another process), as seconds since boot.

/// `clock_gettime(CLOCK_MONOTONIC)` in seconds: comparable across processes
/// on this machine, never goes backwards, does not count suspend.
pub fn monotonic_secs() -> f64 {
    ubio::sys::clock_monotonic().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_instant() {
        let (a, i) = (monotonic_secs(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, d) = (monotonic_secs(), i.elapsed().as_secs_f64());
        assert!(b - a >= 0.02 && (b - a - d).abs() < 0.005, "{a} {b} {d}");
    }
}
