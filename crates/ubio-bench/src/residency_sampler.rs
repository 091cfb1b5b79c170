//! Watch a file's page-cache footprint from a second thread while a stream
//! runs: cachestat() every few milliseconds, keeping the peaks. This is how
//! tests check residency bounds (never with timing).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use ubio::sys::{cachestat, CacheStat};

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
        cachestat(file.as_fd(), 0, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("cachestat {}: {e}", path.display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut peaks = Peaks::default();
            loop {
                let done = flag.load(Ordering::Acquire);
                peaks.add(&cachestat(file.as_fd(), 0, 0)?);
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

/// The file's page-cache counts now.
pub fn file_cachestat(path: &Path) -> io::Result<CacheStat> {
    let f = File::open(path)?;
    cachestat(f.as_fd(), 0, 0)
}
