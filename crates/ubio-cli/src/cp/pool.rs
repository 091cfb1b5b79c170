//! Files copied in parallel for `ubio cp` with several files (a tree, or
//! many sources): up to `jobs` copies in flight, each through the copy
//! engine (so each keeps the uncached contract). The walk and every decision
//! about an existing destination stay in the main thread, in GNU's order; a
//! directory's metadata is set only after every file below it is done.

use super::file::{self, CopyError, FileReport};
use super::progress::Progress;
use super::tree::Step;
use super::Options;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// A finished copy.
pub struct Done {
    /// The step's place in the plan.
    pub seq: usize,
    pub step: Step,
    pub result: Result<Box<FileReport>, CopyError>,
}

pub struct Pool {
    jobs: Option<mpsc::Sender<(usize, Step)>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// Destinations of the copies in flight.
    in_flight: Vec<std::path::PathBuf>,
}

impl Pool {
    pub fn new(jobs: usize, opts: Arc<Options>, progress: &Progress) -> Pool {
        let (job_tx, job_rx) = mpsc::channel::<(usize, Step)>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel();
        let workers = (0..jobs.max(1))
            .map(|_| {
                let (jobs, done, opts) = (job_rx.clone(), done_tx.clone(), opts.clone());
                let mut progress = progress.clone();
                std::thread::spawn(move || loop {
                    // The lock is held only while waiting for the next step.
                    let next = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((seq, step)) = next else {
                        return; // no more work
                    };
                    let result = file::copy_file(&step.src, &step.dst, &opts, &mut progress);
                    if done.send(Done { seq, step, result }).is_err() {
                        return;
                    }
                })
            })
            .collect();
        Pool {
            jobs: Some(job_tx),
            done: done_rx,
            workers,
            in_flight: Vec::new(),
        }
    }

    /// Copy `step`'s file; its result comes back from [`Pool::wait_below`]
    /// or [`Pool::finish`].
    pub fn submit(&mut self, seq: usize, step: Step) {
        self.in_flight.push(step.dst.clone());
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

    /// Wait for every copy whose destination is below `dir`.
    pub fn wait_below(&mut self, dir: &Path) -> Vec<Done> {
        let mut out = self.ready();
        while self.in_flight.iter().any(|d| d.starts_with(dir)) {
            let done = self.done.recv().expect("a worker holds a sender");
            self.landed(&done);
            out.push(done);
        }
        out
    }

    /// Wait for every copy, and end the workers.
    pub fn finish(&mut self) -> Vec<Done> {
        let mut out = self.ready();
        while !self.in_flight.is_empty() {
            let done = self.done.recv().expect("a worker holds a sender");
            self.landed(&done);
            out.push(done);
        }
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        out
    }

    fn landed(&mut self, done: &Done) {
        if let Some(i) = self.in_flight.iter().position(|d| *d == done.step.dst) {
            self.in_flight.swap_remove(i);
        }
    }
}
