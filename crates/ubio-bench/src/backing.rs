//! Backing memory before a baseline runs: on a VM with free page reporting
//! (see [`crate::page_reporting`]) free memory goes back to the host about
//! 2 s after it is freed, and a buffered run that takes its page-cache pages
//! from there pays a host fault for each, which bare metal never does.
//! [`prefault_and_release`] faults in anonymous memory of the size the run
//! will take and frees it at once, so the run that starts right after (well
//! within those 2 s) gets pages that are already backed: the figure a
//! bare-metal machine would see.
//!
//! The memory is asked for in transparent huge pages (MADV_HUGEPAGE): freed,
//! they are whole 2 MiB blocks, which is what the page cache's large folios
//! (ext4 here) take. Measured here (a cold 1 GiB `cat` 3 s after its pages
//! were dropped, 3 rounds): 1.0-1.2 s of system time with nothing before
//! it, 1.0-1.8 s after 1 GiB of 4 KiB pages was faulted and freed (those
//! free pages do not serve the large folios), 0.14-0.17 s after 1 GiB of huge
//! pages, the same as right after the drop (0.11-0.14 s).

use memmap2::{Advice, MmapMut};
use std::io;

/// Faults in `bytes` of fresh anonymous memory (huge pages where the
/// kernel gives them), a write to every page, and releases it (munmap);
/// returns the bytes touched.
pub fn prefault_and_release(bytes: u64) -> io::Result<u64> {
    let len = usize::try_from(bytes).map_err(io::Error::other)?;
    if len == 0 {
        return Ok(0);
    }
    let mut map = MmapMut::map_anon(len)
        .map_err(|e| io::Error::new(e.kind(), format!("mmap {} MiB: {e}", bytes >> 20)))?;
    // Without THP (enabled=never) the advice is refused or ignored: the
    // pages are still faulted in, 4 KiB at a time.
    let _ = map.advise(Advice::HugePage);
    let page = ubio::sys::page_size() as usize;
    for i in (0..len).step_by(page) {
        map[i] = 1;
    }
    std::hint::black_box(&map[..]);
    drop(map);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory is really faulted in: the process's peak resident size
    /// grows by about what was asked (VmHWM), and the memory is given back.
    #[test]
    fn touches_every_page_and_gives_it_back() {
        let hwm = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
            line.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
                * 1024
        };
        let rss = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
            line.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
                * 1024
        };
        let before = hwm().max(rss());
        let asked = 256 << 20;
        assert_eq!(prefault_and_release(asked).unwrap(), asked);
        let peak = hwm();
        assert!(
            peak >= before + asked / 10 * 9,
            "peak {peak} before {before}"
        );
        assert!(rss() < peak - asked / 2, "released");
    }
}
