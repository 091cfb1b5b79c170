//! The per-stream cache keeper: it knows what the stream brought into the
//! page cache and takes it out again, within the contract. It does no data
//! I/O itself: the handle (or the LD_PRELOAD shim) calls its hooks around
//! each read and write.
//!
//! Threads share one tracker. Each hook takes the state lock once, to
//! decide (snapshot residency, move the read-behind and write-behind
//! positions) and returns a [`Plan`]; the plan's syscalls (starting and
//! waiting for writeback, dropping pages) run outside the lock, so a writer
//! waiting for its writeback never stalls another thread's read.

use crate::backend::Caps;
use crate::overlay::RealFile;
use crate::readbehind::ReadBehind;
use crate::residency::{self, Blindness, Residency, CHUNK};
use crate::sys::{self, Advice, SyncFlags};
use crate::writebehind::{Actions, WriteBehind};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Settings of one stream.
#[derive(Debug, Clone, Copy)]
pub struct TrackerConfig {
    /// Dirty + writeback bytes a stream may have at once.
    pub window: u64,
    /// How far behind the read position read pages may stay.
    pub read_lag: u64,
    /// How far ahead of reads residency is snapshotted: more than the
    /// readahead the kernel may issue, so our own readahead is never taken
    /// for pages cached by someone else.
    pub lookahead: u64,
    /// Keep pages that were cached before the stream touched them.
    pub preserve_cached: bool,
}

/// Counters kept by the tracker.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackerCounts {
    pub pages_dropped: u64,
    pub drop_calls: u64,
    pub writeback_starts: u64,
    pub writeback_waits: u64,
    pub writeback_wait_time: Duration,
    pub residency_snapshots: u64,
    /// Drops of pages that were cached before the call and still were
    /// after it: the drop had no effect.
    pub drops_without_effect: u64,
}

/// The counters, updated outside the state lock.
#[derive(Debug, Default)]
struct Counters {
    pages_dropped: AtomicU64,
    drop_calls: AtomicU64,
    writeback_starts: AtomicU64,
    writeback_waits: AtomicU64,
    writeback_wait_nanos: AtomicU64,
    drops_without_effect: AtomicU64,
    warned_no_effect: AtomicBool,
}

/// What the hooks decide under the lock.
#[derive(Debug)]
struct State {
    residency: Residency,
    read_behind: ReadBehind,
    write_behind: WriteBehind,
    /// Writeback waits in progress in some thread. Other writers wait for
    /// them too, so the dirty + writeback footprint stays bounded however
    /// many threads write (each waits for what is outstanding, as they did
    /// when the wait held the lock), while readers go on.
    waits: Vec<Wait>,
    /// Written ranges whose writeback was started and whose pages are
    /// dropped once it completes (the `*_nowait` hooks, which never wait).
    draining: Vec<Range<u64>>,
}

#[derive(Debug, Clone)]
struct Wait {
    range: Range<u64>,
    done: Arc<AtomicBool>,
}

/// Work decided under the lock and done outside it ([`Tracker::run`]).
#[derive(Debug, Default)]
#[must_use = "a plan does nothing until run"]
pub struct Plan {
    /// Start writeback of these ranges.
    start: Vec<Range<u64>>,
    /// Another thread's waits in progress: wait for them too (it drops).
    also_wait: Vec<Range<u64>>,
    /// Wait for writeback of `range`, then drop `droppable`, then say done.
    wait_and_drop: Vec<(Wait, Vec<Range<u64>>)>,
    /// Drop these pages (reads: behind the position).
    drop: Vec<Range<u64>>,
    /// At close: write back what is dirty in these, then drop them.
    drop_closing: Vec<Range<u64>>,
}

impl Plan {
    /// What the plan drops behind a read ([`Tracker::before_read`]).
    pub fn read_drops(&self) -> &[Range<u64>] {
        &self.drop
    }
}

/// A test hook run just before each writeback wait, outside the lock.
#[cfg(test)]
pub(crate) struct WaitHook(pub Box<dyn Fn(&Tracker) + Send + Sync>);

#[cfg(test)]
impl std::fmt::Debug for WaitHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WaitHook")
    }
}

#[derive(Debug)]
pub struct Tracker {
    caps: Caps,
    cfg: TrackerConfig,
    state: Mutex<State>,
    /// A writeback error not yet reported to the caller: apart from the
    /// state, and flagged, so that the common case (none) takes no lock.
    deferred: Mutex<Option<io::Error>>,
    has_deferred: AtomicBool,
    /// A writeback error happened (reported once, by the call after it;
    /// the statistics keep saying so).
    failed: AtomicBool,
    counts: Counters,
    /// The real file behind an overlay descriptor: the page-cache calls go
    /// to it instead of the descriptor they are given.
    real: Mutex<Option<RealFile>>,
    /// Set when the real file behind an overlay descriptor cannot be found:
    /// why, and that the calls go through the overlay descriptor with only
    /// what overlayfs forwards (see [`Tracker::set_overlay_fallback`]).
    fallback: std::sync::OnceLock<String>,
    /// Written pages drop only after fdatasync() ([`Tracker::try_commit`]).
    needs_commit: AtomicBool,
    /// fdatasync() was tried and did not help: do not try again.
    commit_useless: AtomicBool,
    /// Data was written without the backend's flags (copy_file_range):
    /// the kernel did not start its writeback.
    external_writes: AtomicBool,
    /// Writeback starts are queued in `starts` for the caller to make
    /// elsewhere ([`Tracker::defer_starts`]).
    defer_starts: AtomicBool,
    starts: Mutex<Vec<Range<u64>>>,
    /// The file's filesystem holds clean pages for a moment after their
    /// writeback (looked up at the first end of stream).
    holds_pages: std::sync::OnceLock<bool>,
    /// Observe only ([`Tracker::dry_run`]): no call that changes the page
    /// cache; `dry_dropped` holds the ranges whose cached pages were
    /// counted as dropped (they stay, and are not counted again).
    dry_run: AtomicBool,
    dry_dropped: Mutex<rangemap::RangeSet<u64>>,
    #[cfg(test)]
    pub(crate) on_wait: std::sync::OnceLock<WaitHook>,
    /// Called before each retry of [`Tracker::drop_held_pages`].
    #[cfg(test)]
    pub(crate) on_held_retry: std::sync::OnceLock<WaitHook>,
}

impl Tracker {
    /// `blind`: why the file's residency cannot be known, if it cannot.
    pub fn new(caps: Caps, cfg: TrackerConfig, blind: Option<Blindness>) -> Tracker {
        Tracker {
            caps,
            cfg,
            state: Mutex::new(State {
                residency: Residency::new(cfg.preserve_cached, blind),
                read_behind: ReadBehind::new(cfg.read_lag),
                write_behind: WriteBehind::new(cfg.window),
                waits: Vec::new(),
                draining: Vec::new(),
            }),
            deferred: Mutex::new(None),
            has_deferred: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            counts: Counters::default(),
            real: Mutex::new(None),
            fallback: std::sync::OnceLock::new(),
            needs_commit: AtomicBool::new(false),
            commit_useless: AtomicBool::new(false),
            external_writes: AtomicBool::new(false),
            defer_starts: AtomicBool::new(false),
            starts: Mutex::new(Vec::new()),
            holds_pages: std::sync::OnceLock::new(),
            dry_run: AtomicBool::new(false),
            dry_dropped: Mutex::new(rangemap::RangeSet::new()),
            #[cfg(test)]
            on_wait: std::sync::OnceLock::new(),
            #[cfg(test)]
            on_held_retry: std::sync::OnceLock::new(),
        }
    }

    /// Whether some thread holds the state lock now.
    #[cfg(test)]
    pub(crate) fn is_locked(&self) -> bool {
        self.state.try_lock().is_err()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counters so far, the residency findings (pages kept because
    /// others had them cached, why residency is unknowable) and whether a
    /// writeback error happened.
    pub fn report(&self) -> (TrackerCounts, u64, Option<String>, bool) {
        let st = self.state();
        let c = &self.counts;
        let counts = TrackerCounts {
            pages_dropped: c.pages_dropped.load(Ordering::Relaxed),
            drop_calls: c.drop_calls.load(Ordering::Relaxed),
            writeback_starts: c.writeback_starts.load(Ordering::Relaxed),
            writeback_waits: c.writeback_waits.load(Ordering::Relaxed),
            writeback_wait_time: Duration::from_nanos(
                c.writeback_wait_nanos.load(Ordering::Relaxed),
            ),
            residency_snapshots: st.residency.snapshots,
            drops_without_effect: c.drops_without_effect.load(Ordering::Relaxed),
        };
        let precached = st.residency.precached_pages();
        let blind = st.residency.blindness().map(|b| b.to_string());
        (
            counts,
            precached,
            blind,
            self.failed.load(Ordering::Relaxed),
        )
    }

    /// Before reading `[off, off + len)`: snapshot what lies ahead, and plan
    /// the drop of what lags far enough behind the end of this read (run
    /// the plan after the read). A read that comes back short leaves its
    /// unread tail to the drop at close.
    pub fn before_read(&self, fd: BorrowedFd<'_>, off: u64, len: u64) -> Plan {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let mut st = self.state();
        st.residency
            .ensure_known(fd, off, off + len + self.cfg.lookahead);
        self.plan_read(&mut st, off, len)
    }

    /// Before I/O the caller makes itself (copy_file_range, sendfile):
    /// snapshot `[off, off + len)` and the lookahead beyond it, which the
    /// kernel's readahead may fill during the call (taken for others' pages
    /// otherwise, and kept: a whole source stayed cached under `cp`).
    pub fn snapshot(&self, fd: BorrowedFd<'_>, off: u64, len: u64) {
        self.snapshot_range(fd, off..off + len + self.cfg.lookahead);
    }

    /// Snapshot `range` alone (in whole chunks): for an observer that
    /// arrives while the file is in use (the engine of `ubio run`), for
    /// whom the pages past the end of file, which appear later, are not
    /// known (it decides whose they are when they appear: `mark_cold`).
    pub fn snapshot_range(&self, fd: BorrowedFd<'_>, range: Range<u64>) {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        self.state()
            .residency
            .ensure_known(fd, range.start, range.end);
    }

    /// Record `range` as holding no page of others, without looking: for an
    /// observer that arrives after the stream (the engine of `ubio run`) and
    /// has decided from elsewhere whose the pages are.
    pub fn mark_cold(&self, range: Range<u64>) {
        self.state().residency.mark_cold(range);
    }

    /// Take as the stream's own the chunks of `range` that the residency
    /// snapshot gave to others but that are dirty or under writeback now:
    /// for an observer that arrives after a writer (the engine of `ubio
    /// run`), whose snapshot may catch the writer's fresh pages, a write
    /// under way included. Others' dirty pages in those chunks go with them
    /// (written back first).
    pub fn claim_dirty(&self, fd: BorrowedFd<'_>, range: Range<u64>) {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let chunks = self.state().residency.precached_chunks(range);
        for chunk in chunks {
            if sys::cachestat(fd, chunk.clone()).is_ok_and(|c| c.nr_dirty + c.nr_writeback > 0) {
                self.mark_cold(chunk);
            }
        }
    }

    /// Read what the residency snapshots found: for an observer that reads
    /// the page cache itself to tell a transfer's pages from others' (the
    /// engine of `ubio run`, for transfers that move no position).
    pub fn residency<R>(&self, f: impl FnOnce(&Residency) -> R) -> R {
        f(&self.state().residency)
    }

    /// After the caller read `n` bytes at `off` itself (without the
    /// backend's flags: copy_file_range, another process): drop-behind, also
    /// where the backend's kernel flag would have dropped them.
    pub fn after_read(&self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let plan = self.plan(&mut self.state(), off, n, false);
        self.run(fd, plan);
    }

    fn plan_read(&self, st: &mut State, off: u64, len: u64) -> Plan {
        self.plan(st, off, len, self.caps.kernel_drops_reads)
    }

    /// Drop-behind for `len` bytes read at `off`; none if the kernel drops them.
    fn plan(&self, st: &mut State, off: u64, len: u64, kernel_drops: bool) -> Plan {
        let ranges = st.read_behind.consumed(off, len);
        let drop = if kernel_drops {
            Vec::new()
        } else {
            droppable(&st.residency, ranges)
        };
        Plan {
            drop,
            ..Plan::default()
        }
    }

    /// Before writing `[off, off + len)`: snapshot it, and plan the write
    /// behind as if the write succeeds whole (run the plan after it: a
    /// short or failed write leaves at most clean pages in the plan).
    /// Returns true if the range holds pages cached by others (the direct
    /// backend then writes it buffered).
    pub fn before_write(&self, fd: BorrowedFd<'_>, off: u64, len: u64) -> (bool, Plan) {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let mut st = self.state();
        st.residency.ensure_known(fd, off, off + len);
        let keep_cached = st.residency.overlaps_precached(&(off..off + len));
        let actions = st.write_behind.written(off, len);
        (keep_cached, self.plan_write(&mut st, actions))
    }

    /// After a write of `n` bytes at `off` that `before_write` did not
    /// foresee (an O_APPEND write that landed elsewhere): write behind.
    /// After the caller wrote `n` bytes at `off` itself, without the
    /// backend's flags (copy_file_range): write behind, writeback started
    /// here also where the backend's kernel flag would have started it
    /// (from now on, see [`run`](Self::run)).
    pub fn after_external_write(&self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        self.external_writes.store(true, Ordering::Relaxed);
        self.after_write(fd, off, n);
    }

    pub fn after_write(&self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let plan = {
            let mut st = self.state();
            let actions = st.write_behind.written(off, n);
            self.plan_write(&mut st, actions)
        };
        self.run(fd, plan);
    }

    fn plan_write(&self, st: &mut State, actions: Actions) -> Plan {
        st.waits.retain(|w| !w.done.load(Ordering::Acquire));
        let also_wait = st.waits.iter().map(|w| w.range.clone()).collect();
        let mut wait_and_drop = Vec::new();
        for r in actions.wait_and_drop {
            let wait = Wait {
                range: r.clone(),
                done: Arc::new(AtomicBool::new(false)),
            };
            st.waits.push(wait.clone());
            wait_and_drop.push((wait, droppable(&st.residency, vec![r])));
        }
        // Through an overlay, writeback is started with fadvise(DONTNEED),
        // which also drops what is clean: only in pages that are the stream's.
        let start = match self.fallback.get() {
            Some(_) => droppable(&st.residency, actions.start),
            None => actions.start,
        };
        Plan {
            start,
            also_wait,
            wait_and_drop,
            ..Plan::default()
        }
    }

    /// Whether a writeback error waits for the next write, flush or close.
    pub fn has_deferred(&self) -> bool {
        self.has_deferred.load(Ordering::Acquire)
    }

    /// A writeback error kept for the next write, flush or close.
    pub fn take_deferred(&self) -> Option<io::Error> {
        if !self.has_deferred.load(Ordering::Acquire) {
            return None;
        }
        let mut slot = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        self.has_deferred.store(false, Ordering::Release);
        slot.take()
    }

    /// Start and wait for the writeback of everything written, drop it, and
    /// return any writeback error not yet reported.
    pub fn flush(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.write_back_all(fd);
        self.take_deferred().map_or(Ok(()), Err)
    }

    /// Start and wait for the writeback of everything written, and drop
    /// it; an error waits for the next write, flush or close.
    pub fn write_back_all(&self, fd: BorrowedFd<'_>) {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let plan = {
            let mut st = self.state();
            let actions = st.write_behind.take_all();
            self.plan_write(&mut st, actions)
        };
        self.run(fd, plan);
    }

    /// Whether a write of `len` at `off` is over pages others had cached
    /// (which it must keep).
    pub fn keeps_cached(&self, fd: BorrowedFd<'_>, off: u64, len: u64) -> bool {
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let mut st = self.state();
        st.residency.ensure_known(fd, off, off + len);
        st.residency.overlaps_precached(&(off..off + len))
    }

    /// End of stream: flush, then drop everything the stream brought in
    /// (readahead past the last read included) that was not cached before,
    /// writing back first what was dirtied behind the stream. Returns the
    /// flush's error, else one of that last writeback.
    pub fn finish(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        // flush and run (under drop_all) each act on the real file themselves.
        let flushed = self.flush(fd);
        self.drop_all(fd);
        flushed?;
        self.take_deferred().map_or(Ok(()), Err)
    }

    /// Drop everything the stream brought in (readahead past the last read
    /// included) that was not cached before; what is dirty in it is
    /// written back first. [`finish`](Self::finish) without the flush, for
    /// callers that flushed with [`flush_nowait`](Self::flush_nowait) and
    /// [`drain`](Self::drain).
    pub fn drop_all(&self, fd: BorrowedFd<'_>) {
        let (plan, closing) = {
            let mut st = self.state();
            let consumed = st.read_behind.take_all();
            let closing = st.residency.all_droppable();
            let plan = Plan {
                drop: droppable(&st.residency, consumed),
                drop_closing: closing.clone(),
                ..Plan::default()
            };
            (plan, closing)
        };
        self.run(fd, plan);
        self.drop_held_pages(fd, closing);
    }

    /// At the end of the stream, drop again, a little later each time, what
    /// the last drop left of `ranges`: nothing would drop it later. A page
    /// can be held for a moment by a reference someone takes while the drop
    /// runs (a reader's lookup; mincore(), which on a kernel without
    /// cachestat() is how others, and ubio's own tests, count pages: seen
    /// on 6.1, a page of a written xfs file left), so one retry 1 ms later;
    /// after that only while retries take pages, since a page that stays is
    /// someone's (mapped). Where the filesystem holds pages for longer
    /// after their writeback
    /// ([`holds_pages_after_writeback`](sys::FsMagic::holds_pages_after_writeback):
    /// btrfs), up to about 60 ms in all.
    fn drop_held_pages(&self, fd: BorrowedFd<'_>, ranges: Vec<Range<u64>>) {
        if ranges.is_empty() || self.is_dry_run() || self.never_waits() {
            return;
        }
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        // Looked up only where a retry took nothing (most ends of stream
        // leave nothing to retry).
        let fs_holds = || {
            *self
                .holds_pages
                .get_or_init(|| sys::fs_magic(fd).is_ok_and(|m| m.holds_pages_after_writeback()))
        };
        let mut left = still_cached(fd, ranges);
        let mut pause = Duration::from_millis(1);
        while !left.is_empty() && pause <= HELD_PAGES_LAST_PAUSE {
            std::thread::sleep(pause);
            pause *= 2;
            #[cfg(test)]
            if let Some(hook) = self.on_held_retry.get() {
                (hook.0)(self);
            }
            for (r, _) in &left {
                self.counts.drop_calls.fetch_add(1, Ordering::Relaxed);
                let _ = sys::fadvise(fd, r.start, r.end - r.start, Advice::DontNeed);
            }
            let before: u64 = left.iter().map(|(_, n)| n).sum();
            left = still_cached(fd, left.into_iter().map(|(r, _)| r).collect());
            let after: u64 = left.iter().map(|(_, n)| n).sum();
            self.counts
                .pages_dropped
                .fetch_add(before.saturating_sub(after), Ordering::Relaxed);
            if after == before && !fs_holds() {
                break;
            }
        }
        for (r, n) in left {
            log::debug!(
                "{n} pages of {}..{} still cached after retried drops at close",
                r.start,
                r.end
            );
        }
    }

    /// After `n` bytes were written at `off` by someone who cannot be made
    /// to wait (another process, seen by the engine of `ubio run`): the same
    /// write-behind as [`after_write`](Self::after_write), but the ranges it
    /// would wait for are left to [`drain`](Self::drain).
    pub fn after_write_nowait(&self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        let plan = {
            let mut st = self.state();
            let actions = st.write_behind.written(off, n);
            Self::plan_nowait(&mut st, actions)
        };
        self.run(fd, plan);
    }

    /// Start the writeback of everything written, without waiting;
    /// [`drain`](Self::drain) drops it once written back.
    pub fn flush_nowait(&self, fd: BorrowedFd<'_>) {
        let plan = {
            let mut st = self.state();
            let actions = st.write_behind.take_all();
            Self::plan_nowait(&mut st, actions)
        };
        self.run(fd, plan);
    }

    fn plan_nowait(st: &mut State, actions: Actions) -> Plan {
        st.draining.extend(actions.wait_and_drop);
        Plan {
            start: actions.start,
            ..Plan::default()
        }
    }

    /// Drop the pages of written ranges whose writeback has completed
    /// (cachestat: nothing dirty or under writeback), chunk by chunk; start
    /// writeback again where pages were dirtied anew. True while ranges
    /// remain.
    pub fn drain(&self, fd: BorrowedFd<'_>) -> bool {
        let draining = std::mem::take(&mut self.state().draining);
        if draining.is_empty() {
            return false;
        }
        let real = self.real_file();
        let real_fd = real.as_deref().map_or(fd, AsFd::as_fd);
        let mut done = Vec::new();
        let mut left = Vec::new();
        // Through an overlay, dirty pages cannot be seen: wait for them all.
        if self.fallback.get().is_some() && !self.is_dry_run() && !self.never_waits() {
            if let Err(e) = sys::fdatasync(fd) {
                self.record_error(e);
            }
        }
        for r in draining {
            match self.cached(real_fd, r.clone()) {
                Ok(c) if c.dirty_writeback == 0 || c.through_overlay => done.push(r),
                // The writer, which cannot be made to wait, dirties the next
                // ranges meanwhile: drop the chunks written back now rather
                // than hold the whole range until its last page is (a
                // policy test saw 72 MiB cached beside 40 dirty + writeback).
                Ok(_) => {
                    for part in chunks(r) {
                        match self.cached(real_fd, part.clone()) {
                            Ok(c) if c.dirty_writeback == 0 => done.push(part),
                            Ok(c) => {
                                if c.writeback == 0 {
                                    self.start_or_defer(real_fd, &part);
                                }
                                left.push(part);
                            }
                            Err(_) => {}
                        }
                    }
                }
                // Cannot look: give up on these pages rather than spin.
                Err(_) => {}
            }
        }
        let (plan, busy) = {
            let mut st = self.state();
            st.draining.extend(left);
            let plan = Plan {
                drop: droppable(&st.residency, done),
                ..Plan::default()
            };
            (plan, !st.draining.is_empty())
        };
        self.run(fd, plan);
        busy
    }

    /// Do what a hook decided. Takes no lock (but the error slot's, on an
    /// error).
    pub fn run(&self, fd: BorrowedFd<'_>, plan: Plan) {
        // Data written without the backend's flags (copy_file_range) has
        // no writeback started by the kernel: start it here too.
        let external = self.external_writes.load(Ordering::Relaxed);
        let kernel_started = self.caps.kernel_starts_writeback && !external;
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        if !kernel_started {
            for r in &plan.start {
                self.start_or_defer(fd, r);
            }
        }
        for r in &plan.also_wait {
            if let Err(e) = self.wait_writeback(fd, r) {
                self.record_error(e);
            }
        }
        for (wait, parts) in plan.wait_and_drop {
            #[cfg(test)]
            if let Some(hook) = self.on_wait.get() {
                (hook.0)(self);
            }
            let r = &wait.range;
            let t = Instant::now();
            let res = self.wait_writeback(fd, r);
            let c = &self.counts;
            c.writeback_waits.fetch_add(1, Ordering::Relaxed);
            c.writeback_wait_nanos
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            match res {
                Ok(()) => self.drop_exact(fd, parts, false, true),
                Err(e) => self.record_error(e),
            }
            wait.done.store(true, Ordering::Release);
        }
        self.drop_exact(fd, plan.drop, false, false);
        self.drop_exact(fd, plan.drop_closing, true, true);
    }

    /// Queue the writeback starts instead of making them: the caller takes
    /// them ([`take_starts`](Self::take_starts)) and makes them elsewhere
    /// ([`start_now`](Self::start_now)). For an observer that must not
    /// block (the engine of `ubio run` and `ubio policy`):
    /// sync_file_range(WRITE) waits in the block layer when the device's
    /// queue is throttled (blk-wbt) and, on ext4, for a journal commit;
    /// 60-1040 ms were seen on a loop device, while the engine, blocked,
    /// looked at nothing else. Nor does such a tracker wait in any other
    /// way: no writeback wait or fdatasync() before a drop at the end of a
    /// stream, no retried drops of pages held a moment (the engine drops
    /// again at its next looks what stays).
    pub fn defer_starts(&self) {
        self.defer_starts.store(true, Ordering::Relaxed);
    }

    /// Observe only, for a policy tried before it acts (`ubio policy run
    /// --dry-run`): the plans are made as ever, but nothing that changes
    /// the page cache is called (no fadvise, sync_file_range or fdatasync);
    /// what would have been dropped is counted as dropped, once per range
    /// (its pages stay cached), and the writeback that would have been
    /// started as started. Writes are left to the kernel's own writeback.
    pub fn dry_run(&self) {
        self.dry_run.store(true, Ordering::Relaxed);
    }

    fn is_dry_run(&self) -> bool {
        self.dry_run.load(Ordering::Relaxed)
    }

    /// The caller must not block ([`defer_starts`](Self::defer_starts)).
    fn never_waits(&self) -> bool {
        self.defer_starts.load(Ordering::Relaxed)
    }

    /// Dry run: count the cached pages of the parts of `r` not counted
    /// before as dropped.
    fn count_dry_drop(&self, fd: BorrowedFd<'_>, r: Range<u64>) {
        let fresh: Vec<Range<u64>> = {
            let mut done = self.dry_dropped.lock().unwrap_or_else(|p| p.into_inner());
            let gaps = done.gaps(&r).collect();
            done.insert(r);
            gaps
        };
        for part in fresh {
            if let Ok(c) = self.cached(fd, part) {
                self.counts
                    .pages_dropped
                    .fetch_add(c.cached, Ordering::Relaxed);
            }
        }
    }

    /// The writeback starts queued since the last call ([`defer_starts`](Self::defer_starts)).
    pub fn take_starts(&self) -> Vec<Range<u64>> {
        std::mem::take(&mut *self.starts.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Start the writeback of `r` now (a start [`take_starts`](Self::take_starts)
    /// gave), keeping an error for the next call.
    pub fn start_now(&self, fd: BorrowedFd<'_>, r: &Range<u64>) {
        if self.is_dry_run() {
            return;
        }
        let real = self.real_file();
        let fd = real.as_deref().map_or(fd, AsFd::as_fd);
        if let Err(e) = self.start_writeback(fd, r) {
            self.record_error(e);
        }
    }

    /// Wait for the writeback in flight in `r` (a range whose writeback
    /// was started) chunk by chunk, dropping each chunk once it is written
    /// back. For a thread that may wait, beside one that never does (the
    /// engine's: its looks drain only what the write-behind let go, a
    /// window behind, and only when they come, so pages written back in
    /// between stayed cached and a fast writer's clean pages went past its
    /// window). The pages go as their writeback completes (waited for as a
    /// whole, the range's first chunks would wait, clean, for its last);
    /// the drain that comes later finds nothing left. Nothing in a dry run,
    /// nor through an overlay (where the dirty pages cannot be told).
    pub fn drop_when_written_back(&self, fd: BorrowedFd<'_>, r: &Range<u64>) {
        if self.is_dry_run() || self.fallback.get().is_some() {
            return;
        }
        let real = self.real_file();
        let real_fd = real.as_deref().map_or(fd, AsFd::as_fd);
        for part in chunks(r.clone()) {
            let len = part.end - part.start;
            if let Err(e) = sys::sync_file_range(real_fd, part.start, len, SyncFlags::WAIT_BEFORE) {
                self.record_error(e);
                return;
            }
            if let Ok(c) = self.cached(real_fd, part.clone()) {
                if c.cached > 0 && c.dirty_writeback == 0 {
                    let plan = Plan {
                        drop: droppable(&self.state().residency, vec![part]),
                        ..Plan::default()
                    };
                    self.run(fd, plan);
                }
            }
        }
    }

    /// Count a writeback start of `r` and make it, or queue it ([`defer_starts`](Self::defer_starts)).
    fn start_or_defer(&self, fd: BorrowedFd<'_>, r: &Range<u64>) {
        self.counts.writeback_starts.fetch_add(1, Ordering::Relaxed);
        if self.defer_starts.load(Ordering::Relaxed) {
            self.starts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(r.clone());
        } else {
            self.start_now(fd, r);
        }
    }

    /// Start the writeback of `r`: sync_file_range(WRITE), or through an
    /// overlay fadvise(DONTNEED), which overlayfs forwards and which starts
    /// the writeback of the real file's dirty pages (mm/fadvise.c).
    fn start_writeback(&self, fd: BorrowedFd<'_>, r: &Range<u64>) -> io::Result<()> {
        match self.fallback.get() {
            Some(_) => sys::fadvise(fd, r.start, r.end - r.start, Advice::DontNeed),
            None => sys::sync_file_range(fd, r.start, r.end - r.start, SyncFlags::WRITE),
        }
    }

    /// Wait for the writeback of `r`: sync_file_range(WRITE|WAIT), or
    /// through an overlay fdatasync() of the whole file (sync_file_range
    /// acts on the overlay's own empty mapping and returns at once).
    fn wait_writeback(&self, fd: BorrowedFd<'_>, r: &Range<u64>) -> io::Result<()> {
        if self.is_dry_run() {
            return Ok(());
        }
        match self.fallback.get() {
            Some(_) => sys::fdatasync(fd),
            None => sys::sync_file_range(fd, r.start, r.end - r.start, SyncFlags::WRITE_AND_WAIT),
        }
    }

    /// The pages of `r` in the page cache: cachestat(), or through an
    /// overlay mincore() of a mapping of the descriptor (overlayfs maps the
    /// real file), which cannot tell dirty pages.
    fn cached(&self, fd: BorrowedFd<'_>, r: Range<u64>) -> io::Result<Cached> {
        if self.fallback.get().is_some() {
            let cached =
                residency::count_mincore(fd, r.into(), residency::Fallback::OverlayHidden)?.cached;
            return Ok(Cached {
                cached,
                dirty_writeback: cached,
                writeback: 0,
                through_overlay: true,
            });
        }
        sys::cachestat(fd, r).map(|c| Cached {
            cached: c.nr_cache,
            dirty_writeback: c.nr_dirty + c.nr_writeback,
            writeback: c.nr_writeback,
            through_overlay: false,
        })
    }

    fn record_error(&self, e: io::Error) {
        log::warn!("writeback error kept for the next call: {e}");
        self.failed.store(true, Ordering::Relaxed);
        let mut slot = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
            self.has_deferred.store(true, Ordering::Release);
        }
    }

    /// Drop the pages of `ranges`; `closing`: write back dirty pages in
    /// them first (only at close, where nothing would drop them later).
    /// `written`: the ranges hold pages the stream wrote (see `needs_commit`).
    fn drop_exact(
        &self,
        fd: BorrowedFd<'_>,
        ranges: Vec<Range<u64>>,
        closing: bool,
        written: bool,
    ) {
        if self.is_dry_run() {
            for r in ranges {
                self.count_dry_drop(fd, r);
            }
            return;
        }
        let commit = written && self.needs_commit.load(Ordering::Relaxed) && !self.never_waits();
        if commit && !ranges.is_empty() {
            self.commit(fd);
        }
        for r in ranges {
            let len = r.end - r.start;
            let stat = self.cached(fd, r.clone());
            let before = stat.as_ref().map(|c| c.cached).unwrap_or(u64::MAX);
            if before == 0 {
                continue;
            }
            // At close, pages dirtied behind the stream (the zeroed edges of
            // a hole punched or a truncation through its descriptor) would
            // only be queued for writeback by fadvise(DONTNEED), and stay
            // cached: write them back and wait first.
            if closing && !self.never_waits() && stat.is_ok_and(|c| c.dirty_writeback > 0) {
                if let Err(e) = self.wait_writeback(fd, &r) {
                    self.record_error(e);
                }
            }
            self.counts.drop_calls.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = sys::fadvise(fd, r.start, len, Advice::DontNeed) {
                log::debug!("fadvise(DONTNEED) {}..{}: {e}", r.start, r.end);
                continue;
            }
            if before != u64::MAX {
                let mut after = self
                    .cached(fd, r.clone())
                    .map(|c| c.cached)
                    .unwrap_or(before);
                if written && after > 0 && !commit && !self.never_waits() {
                    after = self.try_commit(fd, &r, after);
                }
                self.counts
                    .pages_dropped
                    .fetch_add(before.saturating_sub(after), Ordering::Relaxed);
                if after >= before {
                    self.note_drop_without_effect(&r, before);
                }
            }
        }
    }

    /// Written pages that are clean yet stay after fadvise(DONTNEED): an
    /// NFS client keeps pages written with an unstable WRITE until a COMMIT
    /// (nfs_release_folio() refuses them), which fdatasync() sends. Commit
    /// and drop again; if that took the pages, commit before every later
    /// drop of written pages (`needs_commit`), else never try again. Returns
    /// the pages left.
    fn try_commit(&self, fd: BorrowedFd<'_>, r: &Range<u64>, left: u64) -> u64 {
        if self.commit_useless.load(Ordering::Relaxed) {
            return left;
        }
        let clean = self
            .cached(fd, r.clone())
            .is_ok_and(|c| c.dirty_writeback == 0 && !c.through_overlay);
        if !clean {
            return left;
        }
        self.commit(fd);
        let _ = sys::fadvise(fd, r.start, r.end - r.start, Advice::DontNeed);
        let now = self.cached(fd, r.clone()).map_or(left, |c| c.cached);
        if now < left {
            log::debug!(
                "written pages dropped only after fdatasync() (unstable writes, as on NFS): \
                 committing before each drop of written pages"
            );
            self.needs_commit.store(true, Ordering::Relaxed);
        } else {
            self.commit_useless.store(true, Ordering::Relaxed);
        }
        now
    }

    /// fdatasync(): commits what was written (NFS) and reports writeback errors.
    fn commit(&self, fd: BorrowedFd<'_>) {
        if self.is_dry_run() {
            return;
        }
        if let Err(e) = sys::fdatasync(fd) {
            self.record_error(e);
        }
    }

    /// Page-cache calls of an overlay stream go to the real file, which
    /// changes when a lower file is copied up: then what was known of the
    /// old file's pages no longer applies.
    fn real_file(&self) -> Option<Arc<File>> {
        let (file, changed) = self
            .real
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()?
            .current();
        if changed {
            let blind = residency::blindness(file.as_fd());
            self.state().residency = Residency::new(self.cfg.preserve_cached, blind);
        }
        Some(file)
    }

    /// Use `real` (the file behind an overlay descriptor) for every page-cache call.
    pub fn set_real_file(&self, real: RealFile) {
        *self.real.lock().unwrap_or_else(|p| p.into_inner()) = Some(real);
    }

    /// The real file behind this overlay descriptor cannot be found
    /// (`why`): go on through the descriptor with what overlayfs forwards
    /// to the real file. mincore() of a mapping of the descriptor sees the
    /// real file's pages (overlayfs maps the real file); fadvise() is
    /// forwarded, and DONTNEED also starts the writeback of dirty pages;
    /// fdatasync() waits for it. So reads drop behind, writes are written
    /// behind (each wait syncs the whole file), and pages cached before are
    /// kept; only dirty pages cannot be counted.
    pub fn set_overlay_fallback(&self, why: String) {
        self.state().residency.use_mincore_only();
        let _ = self.fallback.set(why);
    }

    /// Why the stream works through the overlay descriptor, if it does.
    pub fn overlay_fallback(&self) -> Option<String> {
        self.fallback.get().cloned()
    }

    /// Where the pages really are, when that is not the descriptor's file.
    pub fn real_file_desc(&self) -> Option<String> {
        self.real
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|r| format!("{} ({} layer)", r.path().display(), r.layer()))
    }

    /// A drop left every page it was meant to take: say so once, where it
    /// keeps happening, instead of reporting success.
    fn note_drop_without_effect(&self, r: &Range<u64>, cached: u64) {
        let n = self
            .counts
            .drops_without_effect
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        log::debug!(
            "fadvise(DONTNEED) {}..{} had no effect ({cached} pages still cached)",
            r.start,
            r.end
        );
        if n >= 8
            && self.counts.pages_dropped.load(Ordering::Relaxed) == 0
            && !self.counts.warned_no_effect.swap(true, Ordering::Relaxed)
        {
            log::warn!(
                "{n} drops of this stream's pages had no effect: its pages stay in the page cache"
            );
        }
    }
}

/// The longest pause of [`Tracker::drop_held_pages`] (after 1, 2, 4, 8
/// and 16 ms): the holds seen on btrfs lasted at most 13 ms.
const HELD_PAGES_LAST_PAUSE: Duration = Duration::from_millis(32);

/// The ranges of `ranges` that still have pages cached, with how many;
/// none where that cannot be told truly (mincore() of a file the caller
/// can neither write nor own shows every page).
fn still_cached(fd: BorrowedFd<'_>, ranges: Vec<Range<u64>>) -> Vec<(Range<u64>, u64)> {
    ranges
        .into_iter()
        .filter_map(|r| {
            let c = residency::count(fd, r.clone()).ok()?;
            let truthful = !matches!(
                c.source,
                residency::Source::Mincore {
                    truthful: false,
                    ..
                }
            );
            (truthful && c.cached > 0).then_some((r, c.cached))
        })
        .collect()
}

/// A range's pages as [`Tracker::cached`] sees them.
#[derive(Debug, Clone, Copy)]
struct Cached {
    cached: u64,
    /// Through an overlay, unknown: every cached page counts.
    dirty_writeback: u64,
    writeback: u64,
    through_overlay: bool,
}

/// `r` cut at the chunk boundaries within it.
fn chunks(r: Range<u64>) -> impl Iterator<Item = Range<u64>> {
    let mut at = r.start;
    std::iter::from_fn(move || {
        (at < r.end).then(|| {
            let end = ((at / CHUNK + 1) * CHUNK).min(r.end);
            let part = at..end;
            at = end;
            part
        })
    })
}

/// The parts of `ranges` (widened to chunks, so that large folios go
/// whole) that this stream may drop.
fn droppable(residency: &Residency, ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges
        .into_iter()
        .map(|r| r.start / CHUNK * CHUNK..r.end.div_ceil(CHUNK) * CHUNK)
        .flat_map(|r| residency.droppable(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    const MIB: u64 = 1 << 20;

    /// A tracker of `f` with a window of `window`, no read lag, keeping
    /// pages cached before.
    fn tracker_on(f: &File, window: u64) -> Tracker {
        let cfg = TrackerConfig {
            window,
            read_lag: 0,
            lookahead: CHUNK,
            preserve_cached: true,
        };
        Tracker::new(Caps::default(), cfg, residency::blindness(f.as_fd()))
    }

    /// A tracker that defers its writeback starts makes none itself: the
    /// written pages stay dirty, not under writeback, until the caller
    /// makes the starts it took (the engine's writeback thread).
    #[test]
    fn deferred_starts_are_made_by_the_caller() {
        let (_dir, f) = residency::cold_file();
        let t = tracker_on(&f, 4 * MIB);
        t.defer_starts();
        t.snapshot_range(f.as_fd(), 0..8 * MIB);
        f.write_all_at(&vec![3u8; 4 * MIB as usize], 0).unwrap();
        t.after_write_nowait(f.as_fd(), 0, 4 * MIB);
        let stat = || sys::cachestat(f.as_fd(), 0..4 * MIB).unwrap();
        let starts = t.take_starts();
        assert!(
            !starts.is_empty(),
            "half a window written and no start queued"
        );
        let c = stat();
        assert!(
            c.nr_dirty > 0 && c.nr_writeback == 0,
            "writeback started by the tracker itself: {c:?}"
        );
        for r in &starts {
            t.start_now(f.as_fd(), r);
        }
        assert!(t.take_starts().is_empty(), "starts queued twice");
        let c = stat();
        assert!(
            c.nr_dirty < MIB / sys::page_size(),
            "the starts were not made: {c:?}"
        );
        t.flush(f.as_fd()).unwrap();
    }

    /// The engine's writeback thread drops a started range once it is
    /// written back, without a drain: the range is not yet one the
    /// write-behind let go (a look's drain would keep it), its pages go,
    /// and those another user had cached before stay.
    #[test]
    fn a_started_range_is_dropped_when_written_back() {
        let (_dir, f) = residency::cold_file();
        let t = tracker_on(&f, 16 * MIB);
        t.defer_starts();
        let others = 3 * MIB..3 * MIB + 64 * 1024;
        let mut buf = vec![0u8; (others.end - others.start) as usize];
        f.read_exact_at(&mut buf, others.start).unwrap();
        t.snapshot_range(f.as_fd(), 0..16 * MIB);
        f.write_all_at(&vec![4u8; 8 * MIB as usize], 0).unwrap();
        t.after_write_nowait(f.as_fd(), 0, 8 * MIB);
        let starts = t.take_starts();
        assert_eq!(starts, vec![0..8 * MIB], "half a window, one start");
        t.start_now(f.as_fd(), &starts[0]);
        assert!(
            !t.drain(f.as_fd()),
            "the write-behind let the range go already"
        );
        let stat = |r: Range<u64>| sys::cachestat(f.as_fd(), r).unwrap();
        assert!(
            stat(0..8 * MIB).nr_cache > 0,
            "control: dropped by the drain"
        );
        t.drop_when_written_back(f.as_fd(), &starts[0]);
        let others_pages = (others.end - others.start) / sys::page_size();
        assert_eq!(
            stat(others.clone()).nr_cache,
            others_pages,
            "others' pages dropped"
        );
        assert_eq!(
            stat(0..8 * MIB).nr_cache,
            others_pages,
            "written-back pages of the stream left"
        );
        assert_eq!(
            t.report().0.pages_dropped,
            8 * MIB / sys::page_size() - others_pages
        );
        t.finish(f.as_fd()).unwrap();
    }

    /// A dry run makes the plans and counts what they would drop, once,
    /// and changes nothing: the pages read and written stay cached, no
    /// writeback is started, and a second drop of the same range counts
    /// nothing more.
    #[test]
    fn a_dry_run_counts_and_changes_nothing() {
        let (_dir, f) = residency::cold_file();
        let t = tracker_on(&f, 2 * MIB);
        t.dry_run();
        t.snapshot_range(f.as_fd(), 0..8 * MIB);
        let mut buf = vec![0u8; 8 * MIB as usize];
        f.read_exact_at(&mut buf, 0).unwrap();
        t.after_read(f.as_fd(), 0, 8 * MIB);
        let stat = |r: Range<u64>| sys::cachestat(f.as_fd(), r).unwrap();
        let cached = stat(0..8 * MIB).nr_cache;
        assert_eq!(
            cached,
            8 * MIB / sys::page_size(),
            "pages dropped in a dry run"
        );
        let (counts, ..) = t.report();
        assert!(counts.pages_dropped > 0, "nothing counted as dropped");
        assert!(counts.pages_dropped <= cached);
        // Written over what was read: no start, no wait, no drop.
        f.write_all_at(&vec![2u8; 4 * MIB as usize], 4 * MIB)
            .unwrap();
        t.after_write_nowait(f.as_fd(), 4 * MIB, 4 * MIB);
        t.flush_nowait(f.as_fd());
        for r in t.take_starts() {
            t.start_now(f.as_fd(), &r);
        }
        let c = stat(4 * MIB..8 * MIB);
        assert_eq!(c.nr_writeback, 0, "writeback started in a dry run: {c:?}");
        assert_eq!(c.nr_dirty, 4 * MIB / sys::page_size(), "{c:?}");
        let before = t.report().0.pages_dropped;
        t.drop_all(f.as_fd());
        t.drop_all(f.as_fd());
        assert_eq!(stat(0..8 * MIB).nr_cache, 8 * MIB / sys::page_size());
        let after = t.report().0.pages_dropped;
        assert!(
            after >= before && after <= 8 * MIB / sys::page_size(),
            "{before} then {after}"
        );
        sys::fdatasync(f.as_fd()).unwrap();
    }

    /// A written range whose first half is written back and whose second
    /// is still dirty: the engine's drain drops the first half now and
    /// keeps the rest (with its writeback queued) for a later look.
    #[test]
    fn drain_drops_the_written_back_chunks_of_a_range_still_dirty() {
        let (_dir, f) = residency::cold_file();
        let t = tracker_on(&f, 64 * MIB);
        t.defer_starts();
        t.snapshot_range(f.as_fd(), 0..8 * MIB);
        f.write_all_at(&vec![5u8; 8 * MIB as usize], 0).unwrap();
        t.after_write_nowait(f.as_fd(), 0, 8 * MIB);
        t.flush_nowait(f.as_fd());
        t.take_starts();
        sys::sync_file_range(f.as_fd(), 0, 4 * MIB, SyncFlags::WRITE_AND_WAIT).unwrap();
        let stat = |r: Range<u64>| sys::cachestat(f.as_fd(), r).unwrap();
        assert!(
            stat(4 * MIB..8 * MIB).nr_dirty > 0,
            "control: all written back"
        );
        assert!(t.drain(f.as_fd()), "the dirty half was let go");
        assert_eq!(stat(0..4 * MIB).nr_cache, 0, "the written-back half stayed");
        assert!(stat(4 * MIB..8 * MIB).nr_cache > 0, "dirty pages dropped");
        let starts = t.take_starts();
        assert_eq!(starts, vec![4 * MIB..6 * MIB, 6 * MIB..8 * MIB]);
        for r in &starts {
            t.start_now(f.as_fd(), r);
        }
        // The engine's tracker never waits, not even at the end: what is
        // still under writeback then goes at its next look.
        t.finish(f.as_fd()).unwrap();
        sys::fdatasync(f.as_fd()).unwrap();
        t.drop_all(f.as_fd());
        assert_eq!(stat(0..8 * MIB).nr_cache, 0, "left cached after finish");
    }

    #[test]
    fn chunks_cut_at_chunk_boundaries() {
        let cut = |r: Range<u64>| chunks(r).collect::<Vec<_>>();
        assert_eq!(cut(0..0), vec![]);
        assert_eq!(cut(4096..CHUNK), vec![4096..CHUNK]);
        assert_eq!(
            cut(4096..2 * CHUNK + 8192),
            vec![4096..CHUNK, CHUNK..2 * CHUNK, 2 * CHUNK..2 * CHUNK + 8192]
        );
    }

    /// An observer that snapshots while a writer is at work (the engine of
    /// `ubio run` seeing a file for the first time) takes the writer's
    /// fresh, dirty pages as its own, and keeps the clean pages others had
    /// cached.
    #[test]
    fn claim_dirty_takes_fresh_writes_and_keeps_others_pages() {
        let (_dir, f) = residency::cold_file();
        // Someone else's clean pages in the first chunk; a write under way
        // (dirty) in the third.
        let mut buf = vec![0u8; MIB as usize];
        f.read_exact_at(&mut buf, 0).unwrap();
        f.write_all_at(&vec![2u8; MIB as usize], 2 * CHUNK).unwrap();
        let t = tracker_on(&f, 16 * MIB);
        t.snapshot(f.as_fd(), 0, 8 * MIB);
        t.claim_dirty(f.as_fd(), 0..8 * MIB);
        t.drop_all(f.as_fd());
        let count = |r: Range<u64>| sys::cachestat(f.as_fd(), r).unwrap().nr_cache;
        assert_eq!(
            count(2 * CHUNK..3 * CHUNK),
            0,
            "the fresh write stayed cached"
        );
        assert!(
            count(0..MIB) >= MIB / sys::page_size(),
            "others' pages were dropped"
        );
    }

    /// At the end of a stream a page the first drop could not take is
    /// dropped once released, on a filesystem that holds pages after their
    /// writeback (btrfs) or not. Here a pipe holds it (a page spliced into a
    /// pipe is referenced by it, and fadvise(DONTNEED) leaves referenced
    /// pages); the control shows the hold is real.
    #[test]
    #[allow(unsafe_code)]
    fn end_of_stream_drops_a_page_held_for_a_moment() {
        let page = sys::page_size();
        for (fs_holds, release) in [(false, false), (false, true), (true, false), (true, true)] {
            let (_dir, f) = residency::cold_file();
            let t = tracker_on(&f, 16 * MIB);
            t.snapshot(f.as_fd(), 0, MIB);
            f.write_all_at(&vec![7u8; MIB as usize], 0).unwrap();
            f.sync_data().unwrap();
            let (reader, writer) = std::io::pipe().unwrap();
            let mut at: libc::loff_t = 0;
            // SAFETY: two descriptors open for the call, a valid offset
            // pointer, no output offset (a pipe).
            let spliced = unsafe {
                libc::splice(
                    f.as_raw_fd(),
                    &mut at,
                    writer.as_raw_fd(),
                    std::ptr::null_mut(),
                    page as usize,
                    0,
                )
            };
            assert_eq!(spliced, page as isize, "splice into the pipe");
            t.holds_pages.set(fs_holds).unwrap();
            // Reading the pipe releases the page.
            let reader = Arc::new(Mutex::new(reader));
            let drain = move |reader: &Mutex<std::io::PipeReader>| {
                let mut buf = vec![0u8; page as usize];
                reader.lock().unwrap().read_exact(&mut buf).unwrap();
            };
            if release {
                let reader = reader.clone();
                t.on_held_retry
                    .set(WaitHook(Box::new(move |_| drain(&reader))))
                    .unwrap();
            }
            t.drop_all(f.as_fd());
            let left = sys::cachestat(f.as_fd(), 0..MIB).unwrap().nr_cache;
            if release {
                assert_eq!(
                    left, 0,
                    "fs_holds {fs_holds}: the page released during the retries stayed"
                );
            } else {
                // The page's folio (one page, or a large folio) stays.
                assert!(
                    left > 0,
                    "fs_holds {fs_holds}: control: the held page was dropped"
                );
                drain(&reader);
            }
        }
    }
}
