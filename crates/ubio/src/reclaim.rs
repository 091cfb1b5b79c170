//! What the kernel's background reclaim (kswapd) has done lately, as two
//! answers for the streams of this process:
//!
//! - [`kswapd_active`]: kswapd scanned pages lately. The first half of the
//!   emulated backend's switch to direct reads (the other: the stream's
//!   own pages gone before its drops, [`crate::read_switch`]). While
//!   kswapd is idle a stream neither judges nor switches.
//! - [`high_order_reclaim`]: kswapd reclaimed pages lately while every
//!   zone's free memory was above its high watermark, where kswapd woken
//!   for single pages stops: it reclaimed for high-order allocations (2 MiB
//!   readahead folios failing on fragmented memory), and, with a stream's
//!   own pages dropped, took other processes' pages
//!   (bench/runs/2026-12-07-neighbours-fragmentation). A stream then reads
//!   ahead in small folios ([`crate::readahead`]).
//!
//! /proc/vmstat and /proc/zoneinfo are looked at by whoever asks, at most
//! every [`LOOK_EVERY`], so that streams asking at each read cost two
//! small reads of /proc per interval for the whole process.

use crate::procfs::{self, Zone};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often /proc is read, at most.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// How long after kswapd's last scan (or last high-order reclaim) it
/// counts as under way: a stream that went back to the page cache, or to
/// the kernel's readahead, at once would wake kswapd again with its first
/// large folio.
pub const ACTIVE_FOR: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Look {
    at: Instant,
    scanned: u64,
    stolen: u64,
    zones: Vec<Zone>,
    last_scan: Option<Instant>,
    last_high_order: Option<Instant>,
}

static LOOK: Mutex<Option<Look>> = Mutex::new(None);
/// The last answers, for callers that find another thread looking.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HIGH_ORDER: AtomicBool = AtomicBool::new(false);
/// Someone asked [`high_order_reclaim`]: the looks read /proc/zoneinfo too
/// (a process whose streams only ask [`kswapd_active`] never reads it).
static WANT_ZONES: AtomicBool = AtomicBool::new(false);

/// True when kswapd scanned pages within [`ACTIVE_FOR`] (as far as this
/// process has looked: the first call only learns the count).
pub fn kswapd_active() -> bool {
    look();
    ACTIVE.load(Ordering::Relaxed)
}

/// True when, within [`ACTIVE_FOR`], kswapd reclaimed pages between two
/// looks while every zone's free memory was above its high watermark at
/// both ([`above_high`]).
pub fn high_order_reclaim() -> bool {
    if !WANT_ZONES.load(Ordering::Relaxed) {
        WANT_ZONES.store(true, Ordering::Relaxed);
    }
    look();
    HIGH_ORDER.load(Ordering::Relaxed)
}

/// Update the answers, unless another thread is at it or the last look is
/// recent.
fn look() {
    let Ok(mut look) = LOOK.try_lock() else {
        return;
    };
    let now = Instant::now();
    if look.as_ref().is_some_and(|l| now - l.at < LOOK_EVERY) {
        return;
    }
    let Some((scanned, stolen)) = kswapd_counts() else {
        return;
    };
    let zones = match WANT_ZONES.load(Ordering::Relaxed) {
        true => procfs::zones().unwrap_or_default(),
        false => Vec::new(),
    };
    let (last_scan, last_high_order) = match look.take() {
        Some(l) => (
            if scanned > l.scanned {
                Some(now)
            } else {
                l.last_scan
            },
            if stolen > l.stolen && above_high(&l.zones, &zones) {
                Some(now)
            } else {
                l.last_high_order
            },
        ),
        None => (None, None),
    };
    let recent = |t: Option<Instant>| t.is_some_and(|t| now - t < ACTIVE_FOR);
    ACTIVE.store(recent(last_scan), Ordering::Relaxed);
    HIGH_ORDER.store(recent(last_high_order), Ordering::Relaxed);
    *look = Some(Look {
        at: now,
        scanned,
        stolen,
        zones,
        last_scan,
        last_high_order,
    });
}

/// Pages kswapd has scanned and reclaimed since boot (/proc/vmstat
/// `pgscan_kswapd`, `pgsteal_kswapd`); None where /proc cannot be read.
fn kswapd_counts() -> Option<(u64, u64)> {
    let mut v = procfs::vmstat().ok()?;
    Some((v.remove("pgscan_kswapd")?, v.remove("pgsteal_kswapd")?))
}

/// Whether every zone with memory had more free pages than its high
/// watermark at both ends of an interval (kswapd, woken for order 0,
/// stops there: reclaim beyond it was asked for something else).
pub fn above_high(then: &[Zone], now: &[Zone]) -> bool {
    let populated = |z: &&Zone| z.managed > 0;
    let mut any = false;
    for z in now.iter().filter(populated) {
        any = true;
        let before = then
            .iter()
            .find(|t| t.name == z.name)
            .map_or(z.free, |t| t.free);
        if z.free.min(before) <= z.high {
            return false;
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_counts_kswapds_scans_and_reclaim() {
        assert!(
            kswapd_counts().is_some(),
            "no pgscan_kswapd or pgsteal_kswapd in /proc/vmstat"
        );
    }

    fn zone(name: &str, free: u64, high: u64, managed: u64) -> Zone {
        Zone {
            name: name.into(),
            free,
            high,
            managed,
        }
    }

    #[test]
    fn above_high_needs_every_populated_zone_above_at_both_ends() {
        let then = [
            zone("DMA32", 900, 100, 1000),
            zone("Normal", 5000, 400, 9000),
        ];
        let now = [
            zone("DMA32", 800, 100, 1000),
            zone("Normal", 4000, 400, 9000),
        ];
        assert!(above_high(&then, &now));
        // One zone at its watermark at the start: reclaim for the watermark.
        let low_then = [
            zone("DMA32", 900, 100, 1000),
            zone("Normal", 400, 400, 9000),
        ];
        assert!(!above_high(&low_then, &now));
        // An empty zone does not count; no populated zone at all is not above.
        let with_empty = [zone("Movable", 0, 0, 0), zone("Normal", 4000, 400, 9000)];
        assert!(above_high(&then, &with_empty));
        assert!(!above_high(&[], &[zone("Movable", 0, 0, 0)]));
    }
}
