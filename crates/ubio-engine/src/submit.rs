//! The engine's writeback starts, made on a thread of their own.
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
//! them to this thread after each look.

use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use ubio::tracker::Tracker;

/// One writeback start.
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

/// The thread and its queue. The thread is started with the first start,
/// from the thread that looks, and so runs with its priority (`ubio run`
/// raises it before the first look).
#[derive(Default)]
pub struct Submitter {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
}

impl Submitter {
    /// Queue the starts `tracker` deferred since the last call, for `file`
    /// (one already queued and not begun is not queued twice: a drain
    /// that finds its range still dirty asks again).
    pub fn take_from(&mut self, file: &Arc<File>, tracker: &Arc<Tracker>) {
        let ranges = tracker.take_starts();
        if ranges.is_empty() {
            return;
        }
        if self.thread.is_none() {
            let shared = Arc::clone(&self.shared);
            match std::thread::Builder::new()
                .name("ubio-writeback".into())
                .spawn(move || work(&shared))
            {
                Ok(t) => self.thread = Some(t),
                // No thread: start them here, as before.
                Err(e) => {
                    log::debug!("engine: no writeback thread ({e}): starts made by the looks");
                    for r in &ranges {
                        tracker.start_now(file.as_fd(), r);
                    }
                    return;
                }
            }
        }
        let (lock, wake) = &*self.shared;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        for range in ranges {
            let queued = q
                .jobs
                .iter()
                .any(|j| Arc::ptr_eq(&j.file, file) && j.range == range);
            if !queued {
                q.jobs.push_back(Job {
                    file: Arc::clone(file),
                    tracker: Arc::clone(tracker),
                    range,
                });
            }
        }
        wake.notify_one();
    }
}

impl Drop for Submitter {
    /// Make what is queued, then end the thread.
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn work(shared: &Shared) {
    let (lock, wake) = &**shared;
    loop {
        let job = {
            let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break j;
                }
                if q.closed {
                    return;
                }
                q = wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        job.tracker.start_now(job.file.as_fd(), &job.range);
    }
}
