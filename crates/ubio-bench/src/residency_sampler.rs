//! Watch a file's page-cache footprint from a second thread while a stream
//! runs: cachestat() every few milliseconds, keeping the peaks. This is how
//! tests check residency bounds (never with timing).
//!
//! Before Linux 6.5 there is no cachestat() (ENOSYS): the sampler then counts
//! the file's cached pages with mincore() (truthful for a file the caller can
//! write) and takes dirty and writeback from the system-wide `Dirty:` and
//! `Writeback:` of /proc/meminfo, an upper bound for the file's own that is
//! only meaningful on an otherwise idle machine (the test guest of
//! scripts/guest/run.sh).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use ubio::sys::{cachestat, mincore_range, CacheStat};

/// Peak values seen while sampling, in pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Peaks {
    pub samples: u64,
    pub max_cached: u64,
    pub max_dirty_writeback: u64,
    pub max_dirty: u64,
    pub max_writeback: u64,
}

impl Peaks {
    fn add(&mut self, c: &CacheStat) {
        self.samples += 1;
        self.max_cached = self.max_cached.max(c.nr_cache);
        self.max_dirty = self.max_dirty.max(c.nr_dirty);
        self.max_writeback = self.max_writeback.max(c.nr_writeback);
        self.max_dirty_writeback = self.max_dirty_writeback.max(c.nr_dirty + c.nr_writeback);
    }
}

pub struct ResidencySampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<Peaks>>>,
}

impl ResidencySampler {
    /// Start sampling `path` (which must exist) every `every`.
    pub fn start(path: &Path, every: Duration) -> io::Result<ResidencySampler> {
        let file = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", path.display())))?;
        let fallback = match cachestat(file.as_fd(), 0, 0) {
            Ok(_) => false,
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => true,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cachestat {}: {e}", path.display()),
                ))
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut peaks = Peaks::default();
            loop {
                let done = flag.load(Ordering::Acquire);
                if fallback {
                    peaks.add(&mincore_and_meminfo(&file)?);
                } else {
                    peaks.add(&cachestat(file.as_fd(), 0, 0)?);
                }
                if done {
                    return Ok(peaks);
                }
                std::thread::sleep(every);
            }
        });
        Ok(ResidencySampler {
            stop,
            handle: Some(handle),
        })
    }

    /// Stop (after one last sample) and return the peaks.
    pub fn finish(mut self) -> io::Result<Peaks> {
        self.stop.store(true, Ordering::Release);
        self.handle
            .take()
            .unwrap()
            .join()
            .expect("sampler thread panicked")
    }
}

impl Drop for ResidencySampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Without cachestat() (before Linux 6.5): the file's cached pages from
/// mincore(), dirty and writeback pages system-wide from /proc/meminfo.
fn mincore_and_meminfo(file: &File) -> io::Result<CacheStat> {
    let size = file.metadata()?.len();
    let nr_cache = mincore_range(file.as_fd(), 0, size)?
        .iter()
        .filter(|b| **b & 1 == 1)
        .count() as u64;
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let pages = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kib| kib / 4)
    };
    Ok(CacheStat {
        nr_cache,
        nr_dirty: pages("Dirty:"),
        nr_writeback: pages("Writeback:"),
        ..Default::default()
    })
}

/// The file's page-cache counts now.
pub fn file_cachestat(path: &Path) -> io::Result<CacheStat> {
    let f = File::open(path)?;
    cachestat(f.as_fd(), 0, 0)
}
