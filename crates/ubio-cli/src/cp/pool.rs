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
//!
//! Memory is bounded too, whatever the size of the tree: the main thread
//! hands out at most `IN_FLIGHT_PER_WORKER` copies per worker before it
//! waits for one; each worker's stack is sized for what it does; and under
//! a low RLIMIT_AS (`ulimit -v`) fewer workers start, with smaller buffers
//! (see [`fit`]). A worker that cannot be started (the address space or
//! RLIMIT_NPROC) means fewer workers; none at all, the copies in the main
//! thread.

use super::file::{self, CopyError, FileReport};
use super::links::{self, Id};
use super::progress::Progress;
use super::tree::Step;
use super::Options;
use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// Small files a worker keeps open, their writeback started.
const MAX_PENDING: usize = 32;

/// Copies handed out per worker before the main thread waits for one: a
/// worker's pending files, the one it copies, and one waiting.
const IN_FLIGHT_PER_WORKER: usize = MAX_PENDING + 2;

/// A worker's stack. It calls the copy engine and the metadata calls,
/// neither recursive nor with large frames (its buffers are on the heap);
/// Rust's default of 2 MiB per thread is address space a `ulimit -v`
/// counts.
const WORKER_STACK: usize = 256 << 10;

/// The address space one worker may take: its stack, the copy engine's
/// buffers and its reader thread (see ubio::copy), and 1 MiB for the rest
/// (open files, messages, allocator slack).
fn worker_bytes(copy: &ubio::copy::CopyOptions) -> u64 {
    let buffers = (copy.buffers.max(1) * copy.block.max(1)) as u64;
    (WORKER_STACK + ubio::copy::READER_STACK) as u64 + buffers + (1 << 20)
}

/// Fit `jobs` workers and `copy`'s buffers into what RLIMIT_AS leaves of the
/// address space (nothing to fit where there is no limit): half of what is
/// left goes to the copies, the rest stays for the walk and the main
/// thread. Buffers shrink first to two (the least that overlaps reading and
/// writing), then in size down to 64 KiB, before the workers are fewer.
/// The number of workers to start (1: the main thread copies).
pub fn fit(jobs: usize, copy: &mut ubio::copy::CopyOptions) -> usize {
    let Some(left) = address_space_left() else {
        return jobs;
    };
    let budget = left / 2;
    let fits = |copy: &ubio::copy::CopyOptions| budget / worker_bytes(copy);
    if fits(copy) < jobs as u64 {
        copy.buffers = copy.buffers.min(2);
        while fits(copy) < 1 && copy.block > MIN_BLOCK {
            copy.block = (copy.block / 2).max(MIN_BLOCK);
        }
    }
    let fit = (fits(copy) as usize).clamp(1, jobs.max(1));
    if fit < jobs {
        log::debug!(
            "cp: {fit} of {jobs} workers, {} buffers of {} bytes: {left} bytes of address space left (RLIMIT_AS)",
            copy.buffers,
            copy.block
        );
    }
    fit
}

/// The smallest request size [`fit`] shrinks to.
const MIN_BLOCK: usize = 64 << 10;

/// Bytes of address space the process may still map under its RLIMIT_AS, or
/// None without a limit (or if it cannot be known).
fn address_space_left() -> Option<u64> {
    let limit = ubio::sys::address_space_limit().ok()??;
    let size = ubio::procfs::own_status().ok()?.size?;
    Some(limit.saturating_sub(size))
}

/// A copy to make: its place in the plan, its step, and whether its
/// destination is created exclusively.
type Job = (usize, Step, bool);

/// Where a file is made: its directory's identity and its name there. A
/// destination that a copy in flight creates has no identity of its own
/// yet; by its place, a step that reaches it by another path (`d/b/f`
/// where `d/b -> a`) still finds it.
pub type Place = (Id, OsString);

/// The place of `path` (its directory followed, as the create follows
/// it), or None where its directory cannot be stat'ed (the copy then fails
/// on its own).
pub fn place(path: &Path) -> Option<Place> {
    let name = path.file_name()?.to_owned();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some((links::id(&dir.metadata().ok()?), name))
}

/// What a copy in flight reads and writes: its source, and its destination
/// by identity (one that was there) or by place (one it creates).
struct Touches {
    reads: Id,
    writes: Option<Id>,
    creates: Option<Place>,
}

/// A finished copy.
pub struct Done {
    /// The step's place in the plan.
    pub seq: usize,
    pub step: Step,
    pub result: Result<Box<FileReport>, CopyError>,
}

pub struct Pool {
    jobs: Option<crossbeam_channel::Sender<Job>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    /// Copies that came back while `submit` waited for room.
    arrived: Vec<Done>,
    /// How many copies in flight are below each directory (every ancestor
    /// of their destination).
    below: HashMap<PathBuf, usize>,
    /// The files the copies in flight read (their sources) and write (their
    /// destinations, where one was there to know), by identity, the places
    /// of the destinations they create, and what each copy counted there: a
    /// later step that would write a file being read, written or created,
    /// or read one being written, waits for them (see
    /// [`Pool::reads_or_writes`], [`Pool::writes`], [`Pool::creates`]).
    reading: HashMap<Id, usize>,
    writing: HashMap<Id, usize>,
    creating: HashMap<Place, usize>,
    files: HashMap<usize, Touches>,
    in_flight: usize,
}

impl Pool {
    /// Up to `jobs` workers; None if not even one could start (the reason
    /// logged).
    pub fn start(jobs: usize, opts: Arc<Options>, progress: &Progress) -> Option<Pool> {
        let (job_tx, job_rx) = crossbeam_channel::unbounded::<Job>();
        let (done_tx, done_rx) = mpsc::channel();
        let mut workers = Vec::with_capacity(jobs);
        for _ in 0..jobs.max(1) {
            let (steps, done, opts) = (job_rx.clone(), done_tx.clone(), opts.clone());
            let progress = progress.clone();
            let spawned = std::thread::Builder::new()
                .name("ubio-cp-worker".into())
                .stack_size(WORKER_STACK)
                .spawn(move || work(&steps, &done, &opts, progress));
            match spawned {
                Ok(worker) => workers.push(worker),
                Err(e) => {
                    log::debug!("cp: {} of {jobs} workers started ({e})", workers.len());
                    break;
                }
            }
        }
        if workers.is_empty() {
            return None;
        }
        Some(Pool {
            jobs: Some(job_tx),
            done: done_rx,
            workers,
            arrived: Vec::new(),
            below: HashMap::new(),
            reading: HashMap::new(),
            writing: HashMap::new(),
            creating: HashMap::new(),
            files: HashMap::new(),
            in_flight: 0,
        })
    }

    /// Copy `step`'s file: created `exclusive`ly (see `file::copy_file`),
    /// or into the file `writes` if the destination is one already, else
    /// created at `creates`; its result comes back from [`Pool::ready`] or
    /// [`Pool::finish`].
    pub fn submit(
        &mut self,
        seq: usize,
        step: Step,
        exclusive: bool,
        writes: Option<Id>,
        creates: Option<Place>,
    ) {
        // Room first: the steps waiting are bounded, however large the tree.
        while self.in_flight - self.arrived.len() >= self.workers.len() * IN_FLIGHT_PER_WORKER {
            let done = self.done.recv().expect("a worker holds a sender");
            self.arrived.push(done);
        }
        self.in_flight += 1;
        for dir in step.dst.ancestors().skip(1) {
            *self.below.entry(dir.to_path_buf()).or_default() += 1;
        }
        let reads = links::id(&step.meta);
        *self.reading.entry(reads).or_default() += 1;
        if let Some(w) = writes {
            *self.writing.entry(w).or_default() += 1;
        }
        if let Some(c) = &creates {
            *self.creating.entry(c.clone()).or_default() += 1;
        }
        let touches = Touches {
            reads,
            writes,
            creates,
        };
        self.files.insert(seq, touches);
        self.jobs
            .as_ref()
            .expect("not finished")
            .send((seq, step, exclusive))
            .expect("the workers live until finish");
    }

    /// The copies finished so far, without waiting.
    pub fn ready(&mut self) -> Vec<Done> {
        let mut out = std::mem::take(&mut self.arrived);
        for done in &out {
            self.landed(done);
        }
        while let Ok(done) = self.done.try_recv() {
            self.landed(&done);
            out.push(done);
        }
        out
    }

    /// Whether any copy is in flight.
    pub fn in_flight(&self) -> bool {
        self.in_flight > 0
    }

    /// Whether a copy in flight reads or writes the file `id`.
    pub fn reads_or_writes(&self, id: Id) -> bool {
        self.reading.contains_key(&id) || self.writing.contains_key(&id)
    }

    /// Whether a copy in flight writes the file `id`.
    pub fn writes(&self, id: Id) -> bool {
        self.writing.contains_key(&id)
    }

    /// Whether a copy in flight creates its destination at `place`.
    pub fn creates(&self, place: &Place) -> bool {
        self.creating.contains_key(place)
    }

    /// Whether copies in flight create destinations.
    pub fn creating(&self) -> bool {
        !self.creating.is_empty()
    }

    /// Whether a copy in flight creates its destination in the directory
    /// `dir` (a look at each: asked only of a directory reached through a
    /// symlink, see `tree::Settle`).
    pub fn creates_in(&self, dir: Id) -> bool {
        self.creating.keys().any(|(d, _)| *d == dir)
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
            uncount(&mut self.below, dir);
        }
        if let Some(t) = self.files.remove(&done.seq) {
            uncount(&mut self.reading, &t.reads);
            if let Some(w) = t.writes {
                uncount(&mut self.writing, &w);
            }
            if let Some(c) = t.creates {
                uncount(&mut self.creating, &c);
            }
        }
    }
}

/// One less of `key`, gone at none.
fn uncount<K, Q>(counts: &mut HashMap<K, usize>, key: &Q)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    if let Some(n) = counts.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(key);
        }
    }
}

/// A worker: copy the steps sent until the channel closes.
fn work(
    jobs: &crossbeam_channel::Receiver<Job>,
    done: &mpsc::Sender<Done>,
    opts: &Options,
    mut progress: Progress,
) {
    let mut worker = Worker {
        opts,
        done,
        pending: VecDeque::new(),
        pending_bytes: 0,
    };
    loop {
        // Files pending: take a step only if one is waiting; when none is,
        // close them all (the main thread may be waiting for them) before
        // waiting for the next.
        let next = match jobs.try_recv() {
            Ok(job) => Ok(job),
            Err(_) => {
                while worker.close_oldest() {}
                jobs.recv()
            }
        };
        match next {
            Ok((seq, step, exclusive)) => worker.copy(seq, step, exclusive, &mut progress),
            Err(_) => return, // no more steps
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

    fn copy(&mut self, seq: usize, step: Step, exclusive: bool, progress: &mut Progress) {
        match file::copy_file_then(&step.src, &step.dst, exclusive, self.opts, progress, true) {
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
