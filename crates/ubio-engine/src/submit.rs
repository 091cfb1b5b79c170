//! The engine's writeback starts and the drops after them, each made on a
//! thread of its own.
//!
//! sync_file_range(WRITE) only starts writeback, but starting it can wait:
//! in the block layer, where writeback throttling (blk-wbt) holds writes
//! back while the device's reads are slow (`wbt_wait`, 60-1040 ms seen on
//! a loop device whose backing disk others were using), and on ext4 for a
//! journal commit. Made by the thread that looks, such a wait stopped the
//! looks: the reads behind a copy were not dropped, the pages written back
//! not freed, and a copy at 850 MB/s ran 100-1000 ms ahead of the engine
//! (issue 28). Here the looks go on while a start waits; the trackers
//! queue their starts ([`Tracker::defer_starts`]) and the engine hands
//! them to the writeback thread after each look.
//!
//! Each range started is then handed to a second thread, which waits for
//! its writeback to complete and drops its pages at once
//! ([`Tracker::drop_when_written_back`]). The looks drop written pages
//! only a window behind the writer, when they come: `dd bs=1M` writing at
//! the device's speed had 68-89 MiB of its output cached against a 64 MiB
//! bound in 12 of 100 runs, the pages written back between two looks
//! (issue 38). A start is not held up by a wait for an earlier one.

use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use ubio::tracker::Tracker;

/// One range of one file: a writeback start, then a drop.
struct Job {
    file: Arc<File>,
    tracker: Arc<Tracker>,
    range: Range<u64>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

/// A thread that does one thing to each job queued, in order; started with
/// the first job, from the thread that queues it (the first from the
/// thread that looks, whose SCHED_FIFO it does not inherit: reset on fork;
/// the one that drops asks for it, [`crate::realtime::like_the_looker`]).
#[derive(Default)]
struct Lane {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
}

impl Lane {
    /// Queue `jobs` (one already queued and not begun is not queued
    /// twice: a drain that finds its range still dirty asks again),
    /// starting the thread `name` running `work` if it is not running.
    /// With no thread, the jobs are given back.
    fn push(
        &mut self,
        name: &str,
        work: fn(&Shared),
        jobs: Vec<Job>,
    ) -> Result<(), (Vec<Job>, std::io::Error)> {
        if self.thread.is_none() {
            let shared = Arc::clone(&self.shared);
            match std::thread::Builder::new()
                .name(name.into())
                .spawn(move || work(&shared))
            {
                Ok(t) => self.thread = Some(t),
                Err(e) => return Err((jobs, e)),
            }
        }
        let (lock, wake) = &*self.shared;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        for job in jobs {
            let queued = q
                .jobs
                .iter()
                .any(|j| Arc::ptr_eq(&j.file, &job.file) && j.range == job.range);
            if !queued {
                q.jobs.push_back(job);
            }
        }
        wake.notify_one();
        Ok(())
    }

    /// The next job, waiting for one; None once the lane is closed and,
    /// if `finish_queue`, empty.
    fn next(shared: &Shared, finish_queue: bool) -> Option<Job> {
        let (lock, wake) = &**shared;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if q.closed && !finish_queue {
                return None;
            }
            if let Some(j) = q.jobs.pop_front() {
                return Some(j);
            }
            if q.closed {
                return None;
            }
            q = wake.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Lane {
    /// Close the queue and end the thread (which makes what is queued, or
    /// not, as its `work` says).
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writeback thread and, behind it, the one that drops.
#[derive(Default)]
pub struct Submitter {
    starts: Lane,
}

impl Submitter {
    /// Queue the starts `tracker` deferred since the last call, for `file`.
    pub fn take_from(&mut self, file: &Arc<File>, tracker: &Arc<Tracker>) {
        let jobs: Vec<Job> = tracker
            .take_starts()
            .into_iter()
            .map(|range| Job {
                file: Arc::clone(file),
                tracker: Arc::clone(tracker),
                range,
            })
            .collect();
        if jobs.is_empty() {
            return;
        }
        // No thread: start them here, as before; the looks drop them.
        if let Err((jobs, e)) = self.starts.push("ubio-writeback", start_writeback, jobs) {
            log::debug!("engine: no writeback thread ({e}): starts made by the looks");
            for j in jobs {
                j.tracker.start_now(j.file.as_fd(), &j.range);
            }
        }
    }
}

/// The writeback thread: every start queued is made, also after the
/// engine closed the queue; each is then handed to the thread that drops.
fn start_writeback(shared: &Shared) {
    let mut drops = Lane::default();
    let mut no_drops = false;
    while let Some(job) = Lane::next(shared, true) {
        job.tracker.start_now(job.file.as_fd(), &job.range);
        if no_drops {
            continue;
        }
        // No thread: the looks drop these pages, as before.
        if let Err((_, e)) = drops.push("ubio-drop", drop_when_written_back, vec![job]) {
            log::debug!("engine: no thread to drop what is written back ({e}): the looks do");
            no_drops = true;
        }
    }
}

/// The thread that drops: waits for each range's writeback, then drops
/// it. What is queued when the engine ends is left to its last drains
/// (this thread does not hold the end up waiting for a device).
fn drop_when_written_back(shared: &Shared) {
    let _realtime = crate::realtime::like_the_looker();
    while let Some(job) = Lane::next(shared, false) {
        job.tracker
            .drop_when_written_back(job.file.as_fd(), &job.range);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use std::time::{Duration, Instant};
    use ubio::residency;
    use ubio::sys;
    use ubio::tracker::TrackerConfig;

    const MIB: u64 = 1 << 20;

    /// What the engine writes through its threads, with no look after it:
    /// the writeback thread starts the range, the thread that drops waits
    /// for it and drops it, and the pages another user had cached stay.
    #[test]
    fn a_started_range_is_dropped_without_a_look() {
        const NAME: &str = "a_started_range_is_dropped_without_a_look";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("written");
        let f = Arc::new(
            File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .unwrap(),
        );
        let st = sys::fstat(f.as_fd()).unwrap();
        if ubio::probe::fs_caps(f.as_fd(), &st)
            .unwrap()
            .pages_are_storage
        {
            return ubio_testenv::skip(NAME, "the temporary directory is a tmpfs: no writeback");
        }
        f.write_all_at(&vec![1u8; 8 * MIB as usize], 0).unwrap();
        f.sync_all().unwrap();
        sys::fadvise(f.as_fd(), 0, 0, sys::Advice::DontNeed).unwrap();
        // Another user's pages: those cached when the tracker first looks.
        f.read_exact_at(&mut vec![0u8; 64 << 10], 3 * MIB).unwrap();
        let cfg = TrackerConfig {
            window: 16 * MIB,
            read_lag: 0,
            lookahead: 2 * MIB,
            preserve_cached: true,
        };
        let tracker = Arc::new(Tracker::new(
            ubio::backend::Caps::default(),
            cfg,
            residency::blindness(f.as_fd()),
        ));
        tracker.defer_starts();
        let others_pages = sys::cachestat(f.as_fd(), 0..16 * MIB).unwrap().nr_cache;
        assert!(others_pages > 0, "control: nothing cached by another user");
        tracker.snapshot_range(f.as_fd(), 0..16 * MIB);
        f.write_all_at(&vec![2u8; 8 * MIB as usize], 0).unwrap();
        tracker.after_write_nowait(f.as_fd(), 0, 8 * MIB);
        let mut submitter = Submitter::default();
        submitter.take_from(&f, &tracker);
        let stat = || sys::cachestat(f.as_fd(), 0..8 * MIB).unwrap();
        // Not a speed: how long the loop device or disk may take to write
        // 8 MiB back on a busy machine, after which the test gives up.
        let deadline = Instant::now() + Duration::from_secs(30);
        while stat().nr_cache > others_pages && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let c = stat();
        assert_eq!(c.nr_cache, others_pages, "{c:?}");
        assert_eq!(
            sys::cachestat(f.as_fd(), 3 * MIB..4 * MIB)
                .unwrap()
                .nr_cache,
            others_pages,
            "others' pages dropped"
        );
        drop(submitter);
        tracker.finish(f.as_fd()).unwrap();
    }
}
