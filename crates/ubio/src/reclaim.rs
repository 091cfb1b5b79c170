//! Whether the kernel's background reclaim (kswapd) has run lately: the
//! first half of the emulated backend's switch to direct reads (the other:
//! the stream's own pages gone before its drops, [`crate::read_switch`]).
//! While kswapd is idle a stream neither judges nor switches, at the cost
//! of this look.
//!
//! kswapd's page scans in /proc/vmstat are looked at by whoever asks, at
//! most every [`LOOK_EVERY`], so that a stream asking at each read costs
//! one small read of /proc per interval for the whole process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often /proc/vmstat is read, at most.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// How long after kswapd's last scan reclaim counts as under way: a stream
/// that went back to the page cache at once would wake kswapd again with
/// its first large folio.
pub const ACTIVE_FOR: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Look {
    at: Instant,
    scanned: u64,
    last_scan: Option<Instant>,
}

static LOOK: Mutex<Option<Look>> = Mutex::new(None);
/// The last answer, for callers that find another thread looking.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// True when kswapd scanned pages within [`ACTIVE_FOR`] (as far as this
/// process has looked: the first call only learns the count).
pub fn kswapd_active() -> bool {
    let Ok(mut look) = LOOK.try_lock() else {
        return ACTIVE.load(Ordering::Relaxed);
    };
    let now = Instant::now();
    if look.as_ref().is_some_and(|l| now - l.at < LOOK_EVERY) {
        return ACTIVE.load(Ordering::Relaxed);
    }
    let Some(scanned) = kswapd_scanned() else {
        return false;
    };
    let last_scan = match look.take() {
        Some(l) if scanned > l.scanned => Some(now),
        Some(l) => l.last_scan,
        None => None,
    };
    let active = last_scan.is_some_and(|t| now - t < ACTIVE_FOR);
    *look = Some(Look {
        at: now,
        scanned,
        last_scan,
    });
    ACTIVE.store(active, Ordering::Relaxed);
    active
}

/// Pages kswapd has scanned since boot (/proc/vmstat `pgscan_kswapd`);
/// None where /proc cannot be read.
fn kswapd_scanned() -> Option<u64> {
    crate::procfs::vmstat().ok()?.remove("pgscan_kswapd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_counts_kswapds_scans() {
        assert!(
            kswapd_scanned().is_some(),
            "no pgscan_kswapd in /proc/vmstat"
        );
    }
}
