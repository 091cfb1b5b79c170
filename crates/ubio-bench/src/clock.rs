//! One clock for every process of a benchmark, and dates for names.
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

/// "2026-11-22-061502" for a time in seconds since the epoch (UTC).
pub fn utc_stamp(secs: u64) -> String {
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// "2026-11-22" for a time in seconds since the epoch (UTC).
pub fn utc_date(secs: u64) -> String {
    utc_stamp(secs)[..10].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_utc() {
        assert_eq!(utc_stamp(0), "1970-01-01-000000");
        assert_eq!(utc_stamp(951_782_400 + 3661), "2000-02-29-010101");
        assert_eq!(utc_stamp(1_795_330_502), "2026-11-22-065502");
        assert_eq!(utc_date(1_795_330_502), "2026-11-22");
    }

    #[test]
    fn agrees_with_instant() {
        let (a, i) = (monotonic_secs(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, d) = (monotonic_secs(), i.elapsed().as_secs_f64());
        assert!(b - a >= 0.02 && (b - a - d).abs() < 0.005, "{a} {b} {d}");
    }
}
