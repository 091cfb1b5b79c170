//! Files copied in parallel for `ubio cp` with several files (a tree, or
//! many sources): up to `jobs` copies in flight, each through the copy
//! engine (so each keeps the uncached contract). The walk and every decision
//! about an existing destination stay in the main thread, in GNU's order; a
//! directory's metadata is set only after every file below it is done (the
//! main thread goes on meanwhile: see `Copier::settle_dirs`).
//!
//! A small file's close waits for its writeback: one device round trip per
//! file. So each worker starts the writeback of files smaller than half the
//! window and closes them a few files later (at most `MAX_PENDING` files
//! and half a window of bytes per worker), when the wait is usually over.
//! The dirty + writeback bytes of a tree copy are therefore bounded by
//! jobs x 1.5 windows (a file being copied, plus the pending ones).

use super::file::{self, CopyError, FileReport};
use super::progress::Progress;
use super::tree::Step;
use super::Options;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// Small files a worker keeps open, their writeback started.
const MAX_PENDING: usize = 32;

/// A finished copy.
pub struct Done {
    /// The step's place in the plan.
    pub seq: usize,
    pub step: Step,
    pub result: Result<Box<FileReport>, CopyError>,
}

pub struct Pool {
    jobs: Option<crossbeam_channel::Sender<(usize, Step)>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// How many copies in flight are below each directory (every ancestor
    /// of their destination).
    below: HashMap<PathBuf, usize>,
    in_flight: usize,
}

impl Pool {
    pub fn new(jobs: usize, opts: Arc<Options>, progress: &Progress) -> Pool {
        let (job_tx, job_rx) = crossbeam_channel::unbounded::<(usize, Step)>();
        let (done_tx, done_rx) = mpsc::channel();
        let workers = (0..jobs.max(1))
            .map(|_| {
                let (jobs, done, opts) = (job_rx.clone(), done_tx.clone(), opts.clone());
                let mut progress = progress.clone();
                std::thread::spawn(move || {
                    let mut worker = Worker {
                        opts: &opts,
                        done: &done,
                        pending: VecDeque::new(),
                        pending_bytes: 0,
                    };
                    loop {
                        // Files pending: take a step only if one is waiting;
                        // when none is, close them all (the main thread may
                        // be waiting for them) before waiting for the next.
                        let next = match jobs.try_recv() {
                            Ok(job) => Ok(job),
                            Err(_) => {
                                while worker.close_oldest() {}
                                jobs.recv()
                            }
                        };
                        match next {
                            Ok((seq, step)) => worker.copy(seq, step, &mut progress),
                            Err(_) => return, // no more steps
                        }
                    }
                })
            })
            .collect();
        Pool {
            jobs: Some(job_tx),
            done: done_rx,
            workers,
            below: HashMap::new(),
            in_flight: 0,
        }
    }

    /// Copy `step`'s file; its result comes back from [`Pool::ready`] or
    /// [`Pool::finish`].
    pub fn submit(&mut self, seq: usize, step: Step) {
        self.in_flight += 1;
        for dir in step.dst.ancestors().skip(1) {
            *self.below.entry(dir.to_path_buf()).or_default() += 1;
        }
        self.jobs
            .as_ref()
            .expect("not finished")
            .send((seq, step))
            .expect("the workers live until finish");
    }

    /// The copies finished so far, without waiting.
    pub fn ready(&mut self) -> Vec<Done> {
        let mut out = Vec::new();
        while let Ok(done) = self.done.try_recv() {
            self.landed(&done);
            out.push(done);
        }
        out
    }

    /// Whether copies below `dir` are in flight.
    pub fn busy_below(&self, dir: &Path) -> bool {
        self.below.contains_key(dir)
    }

    /// Wait for every copy in flight.
    pub fn wait(&mut self) -> Vec<Done> {
        let mut out = self.ready();
        while self.in_flight > 0 {
            let done = self.done.recv().expect("a worker holds a sender");
            self.landed(&done);
            out.push(done);
        }
        out
    }

    /// Wait for every copy, and end the workers.
    pub fn finish(&mut self) -> Vec<Done> {
        let out = self.wait();
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        out
    }

    fn landed(&mut self, done: &Done) {
        self.in_flight -= 1;
        for dir in done.step.dst.ancestors().skip(1) {
            if let Some(n) = self.below.get_mut(dir) {
                *n -= 1;
                if *n == 0 {
                    self.below.remove(dir);
                }
            }
        }
    }
}

/// One worker's copies whose close is deferred.
struct Worker<'a> {
    opts: &'a Options,
    done: &'a mpsc::Sender<Done>,
    pending: VecDeque<(usize, Step, file::Pending)>,
    pending_bytes: u64,
}

impl Worker<'_> {
    /// Half a window: the largest file whose close is deferred, and the
    /// most bytes of deferred files a worker keeps.
    fn deferred_bytes(&self) -> u64 {
        self.opts.window / 2
    }

    fn copy(&mut self, seq: usize, step: Step, progress: &mut Progress) {
        match file::copy_file_then(&step.src, &step.dst, self.opts, progress, true) {
            Ok(p) if p.bytes() < self.deferred_bytes() => {
                self.pending_bytes += p.bytes();
                self.pending.push_back((seq, step, p));
                while self.pending.len() > MAX_PENDING || self.pending_bytes > self.deferred_bytes()
                {
                    self.close_oldest();
                }
            }
            Ok(p) => self.send(seq, step, p.close()),
            Err(e) => self.send(seq, step, Err(e)),
        }
    }

    /// Close the oldest pending file; false if none was pending.
    fn close_oldest(&mut self) -> bool {
        let Some((seq, step, p)) = self.pending.pop_front() else {
            return false;
        };
        self.pending_bytes -= p.bytes();
        self.send(seq, step, p.close());
        true
    }

    fn send(&self, seq: usize, step: Step, result: Result<Box<FileReport>, CopyError>) {
        // The receiver lives until every copy is in: a send fails only if
        // the main thread is gone, and then nobody waits for the result.
        let _ = self.done.send(Done { seq, step, result });
    }
}
