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

use crate::sampler_thread::SamplerThread;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;
use ubio::residency::{count, Count, Source};
use ubio::sys::{cachestat, CacheStat, FileRange};

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
    /// The peaks of two sets of samples of the same file taken together.
    fn merge(self, o: Peaks) -> Peaks {
        Peaks {
            samples: self.samples + o.samples,
            max_cached: self.max_cached.max(o.max_cached),
            max_dirty_writeback: self.max_dirty_writeback.max(o.max_dirty_writeback),
            max_dirty: self.max_dirty.max(o.max_dirty),
            max_writeback: self.max_writeback.max(o.max_writeback),
        }
    }

    fn add(&mut self, c: &CacheStat) {
        self.samples += 1;
        self.max_cached = self.max_cached.max(c.nr_cache);
        self.max_dirty = self.max_dirty.max(c.nr_dirty);
        self.max_writeback = self.max_writeback.max(c.nr_writeback);
        self.max_dirty_writeback = self.max_dirty_writeback.max(c.nr_dirty + c.nr_writeback);
    }
}

pub struct ResidencySampler {
    thread: SamplerThread<Peaks>,
    /// The file, for samples the caller takes itself ([`Self::sample`]).
    file: Option<File>,
    taken: std::sync::Mutex<Peaks>,
}

impl ResidencySampler {
    /// Start sampling `path` (which must exist) every `every`.
    pub fn start(path: &Path, every: Duration) -> io::Result<ResidencySampler> {
        let file = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", path.display())))?;
        // Counts that are not the file's own would prove nothing.
        if let Source::Mincore {
            truthful: false,
            why,
        } = count(file.as_fd(), FileRange::WHOLE)
            .map_err(|e| io::Error::new(e.kind(), format!("cachestat {}: {e}", path.display())))?
            .source
        {
            return Err(io::Error::other(format!(
                "{}: {}",
                path.display(),
                why.note()
            )));
        }
        let own = file.try_clone()?;
        let mut sampler = Self::spawn(every, move || {
            with_meminfo(count(file.as_fd(), FileRange::WHOLE)?).map(Some)
        });
        sampler.file = Some(own);
        Ok(sampler)
    }

    /// One sample taken now by the calling thread (a stream between two of
    /// its calls), added to the thread's: a judgement that needs so many
    /// samples then does not depend on the sampling thread being scheduled
    /// during a short stream on a busy machine (a TCG guest beside another).
    pub fn sample(&self) -> io::Result<()> {
        let file = self
            .file
            .as_ref()
            .expect("sample() is for samplers made by start()");
        let c = with_meminfo(count(file.as_fd(), FileRange::WHOLE)?)?;
        self.taken.lock().unwrap_or_else(|p| p.into_inner()).add(&c);
        Ok(())
    }

    /// Sample the files at `paths` together (their counts summed) every
    /// `every` (a file not there yet counts 0): the peaks of a whole
    /// dataset during one run, some of whose files a command may be about
    /// to create. A file is opened once it exists and then kept open, so a
    /// tick costs one cachestat() per file: right for one run, in which the
    /// files are created or rewritten in place (the copy tools, rsync with
    /// --inplace included), never replaced. Needs cachestat().
    pub fn follow_all(paths: Vec<PathBuf>, every: Duration) -> ResidencySampler {
        let mut files: Vec<(PathBuf, Option<File>)> =
            paths.into_iter().map(|p| (p, None)).collect();
        Self::spawn(every, move || {
            let mut total = CacheStat::default();
            for (path, file) in &mut files {
                if file.is_none() {
                    match File::open(&*path) {
                        Ok(f) => *file = Some(f),
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    }
                }
                if let Some(f) = file {
                    let c = cachestat(f.as_fd(), FileRange::WHOLE)?;
                    total.nr_cache += c.nr_cache;
                    total.nr_dirty += c.nr_dirty;
                    total.nr_writeback += c.nr_writeback;
                }
            }
            Ok(Some(total))
        })
    }

    fn spawn(
        every: Duration,
        mut sample: impl FnMut() -> io::Result<Option<CacheStat>> + Send + 'static,
    ) -> ResidencySampler {
        let thread = SamplerThread::spawn(move |stop| {
            let mut peaks = Peaks::default();
            loop {
                let done = stop.load(Ordering::Acquire);
                if let Some(c) = sample()? {
                    peaks.add(&c);
                }
                if done {
                    return Ok(peaks);
                }
                std::thread::sleep(every);
            }
        });
        ResidencySampler {
            thread,
            file: None,
            taken: Default::default(),
        }
    }

    /// Stop (after one last sample) and return the peaks.
    pub fn finish(self) -> io::Result<Peaks> {
        let taken = self.taken.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok(self.thread.finish()?.merge(taken))
    }
}

/// A count as cachestat() gives it; without cachestat() (before Linux 6.5)
/// the cached pages are mincore()'s, dirty and writeback pages system-wide
/// from /proc/meminfo.
fn with_meminfo(c: Count) -> io::Result<CacheStat> {
    let (Some(nr_dirty), Some(nr_writeback)) = (c.dirty, c.writeback) else {
        return meminfo_counts(c.cached);
    };
    Ok(CacheStat {
        nr_cache: c.cached,
        nr_dirty,
        nr_writeback,
        ..Default::default()
    })
}

fn meminfo_counts(nr_cache: u64) -> io::Result<CacheStat> {
    let meminfo = ubio::procfs::meminfo()?;
    let pages = |key: &str| meminfo.get(key).copied().unwrap_or(0) / ubio::sys::page_size();
    Ok(CacheStat {
        nr_cache,
        nr_dirty: pages("Dirty"),
        nr_writeback: pages("Writeback"),
        ..Default::default()
    })
}
