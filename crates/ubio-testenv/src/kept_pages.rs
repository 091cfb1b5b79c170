//! Judging, in tests, whether pages that someone else had cached are still
//! cached, on a machine whose kernel reclaims on its own.
//!
//! This project's VM runs DAMON reclaim (paddr pageout): it pages out
//! freshly cached pages of idle physical regions within a second, so "the
//! page is gone" alone cannot tell whether ubio dropped it. Reclaim leaves a
//! workingset record that cachestat() counts as `nr_evicted`;
//! fadvise(DONTNEED) leaves none. A page ubio dropped is therefore neither
//! cached nor evicted.

use std::io;
use std::path::Path;
use ubio::sys;

/// Pages of `[off, off + len)` that are cached, and pages reclaim evicted.
/// Before Linux 6.5 (no cachestat()): mincore(), and no eviction records.
pub fn kept_or_reclaimed(path: &Path, off: u64, len: u64) -> io::Result<(u64, u64)> {
    let c = ubio::residency::count_path(path, sys::FileRange::at(off, len))?;
    Ok((c.cached, c.evicted.unwrap_or(0)))
}

/// Every page of a region cached by "another user" is still cached or was
/// reclaimed by the kernel: none was dropped.
pub fn check_kept(path: &Path, off: u64, len: u64) -> Result<(), String> {
    let (kept, reclaimed) = kept_or_reclaimed(path, off, len).map_err(|e| e.to_string())?;
    if reclaimed > 0 {
        eprintln!("  {reclaimed} pages of the region at {off} were reclaimed by the kernel (DAMON), not dropped");
    }
    match (len / sys::page_size()).saturating_sub(kept + reclaimed) {
        0 => Ok(()),
        n => Err(format!(
            "{n} pages of the region at {off} were dropped ({kept} cached, {reclaimed} reclaimed)"
        )),
    }
}

/// Run a check of kept pages up to three times, printing each retry. A page
/// that DAMON reclaims *before* ubio snapshots its region is (rightly) taken
/// by ubio as its own and dropped after use, leaving no record; that needs
/// DAMON to strike within a fraction of a second, so it does not happen
/// three times in a row, whereas a real bug drops pages on every attempt.
pub fn with_damon_retries(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    for attempt in 1..=3 {
        match check() {
            Ok(()) => return,
            Err(msg) if attempt < 3 => eprintln!("RETRY {what} (attempt {attempt}): {msg}"),
            Err(msg) => panic!("{what}: {msg} (on all 3 attempts)"),
        }
    }
}
