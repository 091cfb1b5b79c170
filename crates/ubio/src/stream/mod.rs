//! `ubio::Stream`: the uncached-I/O state of one open file (backend,
//! tracker, counters), independent of who owns the descriptor. `File` owns
//! one beside its descriptor; the LD_PRELOAD shim keeps one per descriptor
//! of the program it runs in. Errors are returned as the kernel gave them
//! (the shim must hand errno back unchanged); `File` adds context.

use crate::backend::{Backend, BackendKind, Buffered, Direct, Emulated, Kernel, ReadAt, WriteAt};
use crate::overlay::RealFile;
use crate::probe::{self, Choice};
use crate::race::Verdict;
use crate::readahead::{Folios, Readahead, SmallReadahead};
use crate::reclaim;
use crate::residency::{self, Blindness};
use crate::sys;
use crate::tracker::{Tracker, TrackerConfig};
use serde::Serialize;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

mod direct;

use direct::{DirectPath, Route};
pub use direct::{DirectReads, DirectWrites, DIRECT_MIN};

/// Default write-behind window: dirty + writeback bytes per stream.
pub const DEFAULT_WINDOW: u64 = 16 << 20;
/// Default distance that read pages may lag behind the read position.
pub const DEFAULT_READ_LAG: u64 = 4 << 20;
/// The most data one system call moves through the page cache of a managed
/// file: a longer read or write (or copy) is made in pieces of this size,
/// the contract applied to each, because one call of 1 GiB would cache or
/// dirty all of it before anything could be dropped or written back. A
/// write's pieces are also at most half its window (the write-behind step).
pub const PIECE: usize = 8 << 20;
/// How a stream manages the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// Which backend moves the data; `Auto` picks per file.
    pub backend: BackendKind,
    /// Dirty + writeback bytes a stream may have at once.
    pub window: u64,
    /// How far behind the read position read pages may stay.
    pub read_lag: u64,
    /// Keep pages that others had cached before the stream.
    pub preserve_cached: bool,
    /// When the emulated backend reads through O_DIRECT.
    pub direct_reads: DirectReads,
    /// When the emulated backend writes through O_DIRECT.
    pub direct_writes: DirectWrites,
    /// When the emulated backend reads ahead in small folios itself.
    pub small_readahead: SmallReadahead,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            backend: BackendKind::Auto,
            window: DEFAULT_WINDOW,
            read_lag: DEFAULT_READ_LAG,
            preserve_cached: true,
            direct_reads: DirectReads::default(),
            direct_writes: DirectWrites::default(),
            small_readahead: SmallReadahead::default(),
        }
    }
}

/// Per-handle statistics.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub backend: BackendKind,
    pub requested: BackendKind,
    pub reason: String,
    /// False when the page cache of this file is not managed (pass-through).
    pub managed: bool,
    pub bytes_read: u64,
    /// Of `bytes_read`, read through O_DIRECT ([`DirectReads`]).
    pub bytes_read_direct: u64,
    /// `UnderReclaim`: the direct phases started because the kernel took
    /// the stream's own pages before its drops.
    pub direct_read_phases: u64,
    pub bytes_written: u64,
    /// Of `bytes_written`, written through O_DIRECT ([`DirectWrites`]).
    pub bytes_written_direct: u64,
    /// The last race of large aligned reads between the page cache and
    /// O_DIRECT ([`crate::race`]), if one finished.
    pub read_race: Option<Verdict>,
    /// The same of writes.
    pub write_race: Option<Verdict>,
    /// Times the stream went over to reading ahead in small folios itself
    /// ([`SmallReadahead`]), and the bytes it asked for so (up to the end
    /// of file as it was at each ask).
    pub small_readahead_phases: u64,
    pub small_readahead_bytes: u64,
    /// Pages this stream dropped from the page cache.
    pub pages_dropped: u64,
    /// Pages that were cached before the stream reached them and were kept.
    pub pages_preserved: u64,
    pub drop_calls: u64,
    pub writeback_starts: u64,
    pub writeback_waits: u64,
    pub writeback_wait_secs: f64,
    pub residency_snapshots: u64,
    /// Why the residency of the file's pages cannot be known, if it cannot
    /// (then nothing is dropped).
    pub residency_unknown: Option<String>,
    /// A writeback error happened during the stream.
    pub failed: bool,
    /// The file whose pages are managed, when it is not the descriptor's
    /// own (the real upper or lower file of an overlayfs file).
    pub real_file: Option<String>,
    /// Drops that left the pages they were meant to take: not zero means
    /// the drops do not work on this file (a warning is logged once).
    pub drops_without_effect: u64,
    /// Why the stream works through the overlay descriptor with what
    /// overlayfs forwards (its real file was not found), if it does.
    pub overlay_fallback: Option<String>,
}

/// A failed write: its own error, or an earlier writeback's, reported now.
#[derive(Debug)]
pub(crate) enum WriteError {
    Now(io::Error),
    Deferred(io::Error),
}

impl WriteError {
    pub(crate) fn into_inner(self) -> io::Error {
        match self {
            WriteError::Now(e) | WriteError::Deferred(e) => e,
        }
    }
}

/// The uncached-I/O state of one open file. All methods take the
/// descriptor they act on, which must stay the same open file.
#[derive(Debug)]
pub struct Stream {
    backend: Box<dyn Backend>,
    choice: Choice,
    tracker: Option<Tracker>,
    regular: bool,
    append: bool,
    /// The most one write call moves: PIECE, or half the window if less.
    write_piece: usize,
    /// Held by each call at the file position (or, O_APPEND, the end) of a
    /// regular file, for the whole call: one made in pieces, or through the
    /// direct backend's own descriptor, moves the position in several steps,
    /// and the kernel's read(2)/write(2) is one step for every other thread.
    position: Mutex<()>,
    /// The emulated backend's calls through O_DIRECT, where they may be made.
    direct: Option<DirectPath>,
    /// The stream's own readahead, where it may read ahead in small folios.
    readahead: Option<Readahead>,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl Stream {
    /// Probe the file behind `fd` (once per filesystem), choose its backend
    /// and start tracking it. Fails only where a backend named explicitly
    /// cannot run, or the descriptor cannot be inspected.
    pub fn new(fd: BorrowedFd<'_>, opts: &StreamOptions) -> io::Result<Stream> {
        let st = sys::fstat(fd)?;
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        let flags = sys::getfl(fd)?;
        let fs = probe::fs_caps(fd, &st)?;
        // On overlayfs the pages are the real upper or lower file's.
        let (real, fallback) = match fs.magic == sys::FsMagic::OVERLAYFS && regular {
            false => (None, None),
            true => match RealFile::open(fd) {
                Ok(r) => {
                    log::debug!(
                        "overlay: managing the pages of {} ({} layer)",
                        r.path().display(),
                        r.layer()
                    );
                    (Some(r), None)
                }
                Err(e) => {
                    let why = crate::overlay::fallback_note(&e);
                    log::debug!("{why}");
                    (None, Some(why))
                }
            },
        };
        let blind = match (&real, &fallback) {
            // mincore() of the overlay's mapping, which must tell the truth.
            (_, Some(why)) => {
                (opts.preserve_cached && !residency::mincore_trustworthy(fd)).then(|| {
                    Blindness::NoInterface(format!(
                        "{why}; mincore untrustworthy for a file the caller cannot write"
                    ))
                })
            }
            (Some(r), None) => opts
                .preserve_cached
                .then(|| {
                    std::fs::File::open(r.path())
                        .ok()
                        .and_then(|f| residency::blindness(f.as_fd()))
                })
                .flatten(),
            (None, None) => opts
                .preserve_cached
                .then(|| residency::blindness(fd))
                .flatten(),
        };
        let choice = probe::choose(opts.backend, &fs, regular, flags, blind.is_none())?;
        let backend: Box<dyn Backend> = match choice.backend {
            BackendKind::Kernel => Box::new(Kernel),
            BackendKind::Emulated => Box::new(Emulated),
            BackendKind::Direct => {
                let align = fs
                    .direct_align()
                    .expect("direct chosen only where O_DIRECT works");
                Box::new(Direct::open(fd, align)?)
            }
            BackendKind::Buffered | BackendKind::Auto => Box::new(Buffered),
        };
        // Not through an overlay (its real file holds the pages).
        let direct = fs
            .direct_align()
            .filter(|_| {
                regular
                    && backend.caps().direct_reads
                    && choice.managed
                    && real.is_none()
                    && fallback.is_none()
            })
            .and_then(|align| {
                DirectPath::new(opts.direct_reads, opts.direct_writes, align, opts.window)
            });
        // Where the tracker drops what the stream reads (not RWF_DONTCACHE's
        // reads, which would leave prefetched pages cached), on the file's
        // own descriptor.
        let readahead = (regular
            && choice.managed
            && !backend.caps().kernel_drops_reads
            && !backend.caps().reads_o_direct
            && real.is_none()
            && fallback.is_none())
        .then(|| Readahead::new(opts.small_readahead, fs.readahead_folios_reach_2mib()))
        .flatten();
        let tracker = choice.managed.then(|| {
            let cfg = TrackerConfig {
                window: opts.window,
                read_lag: opts.read_lag,
                lookahead: fs.lookahead(),
                preserve_cached: opts.preserve_cached,
            };
            let t = Tracker::new(backend.caps(), cfg, blind);
            if let Some(r) = real {
                t.set_real_file(r);
            }
            if let Some(why) = fallback {
                t.set_overlay_fallback(why);
            }
            t
        });
        let page = sys::page_size() as usize;
        let half_window = usize::try_from(opts.window / 2).unwrap_or(usize::MAX) / page * page;
        Ok(Stream {
            backend,
            choice,
            tracker,
            regular,
            append: flags & libc::O_APPEND != 0,
            write_piece: half_window.clamp(page, PIECE),
            position: Mutex::new(()),
            direct,
            readahead,
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
        })
    }

    /// The backend in use and why it was chosen.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// Large aligned writes may go through O_DIRECT (where faster, or
    /// always).
    pub fn may_write_direct(&self) -> bool {
        self.direct
            .as_ref()
            .is_some_and(|d| d.writes() != DirectWrites::Never)
    }

    /// A regular file (positional I/O); otherwise a pipe, socket or device.
    pub fn is_regular(&self) -> bool {
        self.regular
    }

    /// Opened with O_APPEND: every write goes to the end.
    pub fn is_append(&self) -> bool {
        self.append
    }

    /// Read into `bufs` at `off` (pread(2)).
    pub fn read_at(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &mut [IoSliceMut<'_>],
        off: u64,
    ) -> io::Result<usize> {
        self.read(fd, bufs, Some(off))
    }

    /// Read into `bufs` at `off`, or when `off` is `None` at (and advancing)
    /// the file position, as read(2) does: the position is the open file
    /// description's, shared with every other descriptor of it. A long
    /// read of a managed file is made in pieces of [`PIECE`] and is short
    /// only where read(2) would be: at the end of file, past
    /// [`sys::max_rw_count`], or on an error after some data (the bytes
    /// read are returned; the error recurs on the next call).
    pub fn read(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &mut [IoSliceMut<'_>],
        off: Option<u64>,
    ) -> io::Result<usize> {
        let _position = self.position_lock(off.is_none());
        let len = total(bufs.iter().map(|b| b.len()));
        if !self.in_pieces(len, PIECE, bufs.len()) {
            return self.read_once(fd, bufs, off);
        }
        piecewise(len.min(sys::max_rw_count()), PIECE, |done, want| {
            let mut piece = sub_mut(bufs, done, want);
            self.read_once(fd, &mut piece, off.map(|o| o + done as u64))
        })
    }

    /// One read call, the tracker around it.
    fn read_once(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &mut [IoSliceMut<'_>],
        off: Option<u64>,
    ) -> io::Result<usize> {
        let len = total(bufs.iter().map(|b| b.len())) as u64;
        let at = match off {
            Some(o) => ReadAt::Offset(o),
            // Where the read will start, for the tracker (and the direct
            // backend, which reads through a descriptor of its own).
            None => ReadAt::Position(sys::lseek_cur(fd)?),
        };
        let plan = self
            .tracker
            .as_ref()
            .map(|t| t.before_read(fd, at.offset(), len));
        // Looked at once per read, for the direct read and the switch.
        let switch = self
            .direct
            .as_ref()
            .and_then(|d| d.reclaim_switch(len, reclaim::kswapd_active));
        // Where the kernel's readahead would ask for 2 MiB folios that
        // fail: reads that may go direct do (they allocate no page cache,
        // and O_DIRECT is faster than single pages), the others read ahead
        // in small folios.
        let folios = self
            .readahead
            .as_ref()
            .map_or(Folios::Kernel, |ra| ra.now(reclaim::high_order_reclaim));
        let fragmented = folios == Folios::SmallFragmented;
        let route = match (&self.direct, &self.tracker) {
            (Some(d), Some(t)) => d.read_route(fd, bufs, at.offset(), switch, fragmented, || {
                let range = at.offset()..at.offset() + len;
                t.residency(|r| r.blindness().is_some() || r.overlaps_precached(&range))
            }),
            _ => Route::cache(),
        };
        if let (Some(ra), None) = (&self.readahead, route.direct) {
            ra.before_read(fd, at.offset()..at.offset() + len, folios);
        }
        let through_cache = |bufs: &mut [IoSliceMut<'_>]| {
            (
                self.backend.read(fd, bufs, at),
                self.backend.caps().reads_o_direct,
            )
        };
        let (res, o_direct) = match route.direct {
            Some(direct) => match direct.read(fd, bufs, at) {
                Err(e) if self.direct.as_ref().is_some_and(|d| d.refused(&e)) => {
                    through_cache(bufs)
                }
                res => (res, true),
            },
            None => through_cache(bufs),
        };
        match (&res, o_direct) {
            (&Ok(n), true) => {
                if let Some(d) = &self.direct {
                    d.count_read(n as u64);
                }
                self.drop_fallback_pages(fd, at.offset()..at.offset() + n as u64)
            }
            (&Ok(n), false) => {
                if let Some(s) = switch {
                    s.read_through_cache(at.offset()..at.offset() + n as u64);
                }
            }
            (Err(_), _) => {}
        }
        if let (Some(t), Some(plan)) = (&self.tracker, plan) {
            if let Some(s) = switch.filter(|s| s.has_unjudged()) {
                s.judge(plan.read_drops(), |r| {
                    residency::count(fd, r).ok().map(|c| c.cached)
                });
            }
            t.run(fd, plan);
        }
        let n = res?;
        route.done(n as u64);
        self.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    /// Drop what the kernel cached of an O_DIRECT read of `range` after
    /// all: btrfs falls back to a buffered read for a compressed extent,
    /// or for the rest of a call when the buffer faults (seen on 6.1: 204
    /// pages). Not where others' pages are, or may be unseen: those the
    /// tracker's own drops leave alone.
    fn drop_fallback_pages(&self, fd: BorrowedFd<'_>, range: std::ops::Range<u64>) {
        let Some(t) = &self.tracker else { return };
        let others = t.residency(|r| r.blindness().is_some() || r.overlaps_precached(&range));
        if !others && !range.is_empty() {
            let _ = sys::fadvise(
                fd,
                range.start,
                range.end - range.start,
                sys::Advice::DontNeed,
            );
        }
    }

    /// Whether a call of `len` bytes in `count` buffers is made in pieces
    /// of `piece`: on a managed file only (a pass-through call is the
    /// caller's own), and not past the kernel's iovec limit (one call
    /// fails there with EINVAL, as the kernel's would).
    fn in_pieces(&self, len: usize, piece: usize, count: usize) -> bool {
        self.tracker.is_some() && len > piece && count <= libc::UIO_MAXIOV as usize
    }

    /// The position lock, for a call at the file position (or the end) of
    /// a regular file.
    fn position_lock(&self, at_position: bool) -> Option<MutexGuard<'_, ()>> {
        (at_position && self.regular)
            .then(|| self.position.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A writeback error of this stream not yet reported, if any: the next
    /// write, flush or close returns it anyway.
    pub fn take_deferred_error(&self) -> Option<io::Error> {
        self.tracker.as_ref().and_then(Tracker::take_deferred)
    }

    /// Write `bufs` at `off`, or when `off` is `None` at (and advancing) the
    /// file position, as write(2) does. On an O_APPEND file both go to the
    /// end of file, as pwrite(2) and write(2) do on Linux. Returns where the data went and how much. A writeback error of
    /// earlier writes is returned instead, once.
    pub fn write_at(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        off: Option<u64>,
    ) -> io::Result<(u64, usize)> {
        self.write(fd, bufs, off).map_err(WriteError::into_inner)
    }

    /// As `write_at`, saying whether an error is this write's or an earlier
    /// writeback's. A long write to a managed file is made in pieces (the
    /// write-behind waits between them), under the position lock: short
    /// only where write(2) would be, past [`sys::max_rw_count`] or on an
    /// error after some data, which includes a writeback error of the
    /// earlier pieces (it comes back from the next call, as any deferred
    /// error). Returns where the data began and how much was written.
    pub(crate) fn write(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        off: Option<u64>,
    ) -> Result<(u64, usize), WriteError> {
        let _position = self.position_lock(off.is_none() || self.append);
        if let Some(e) = self.tracker.as_ref().and_then(Tracker::take_deferred) {
            return Err(WriteError::Deferred(e));
        }
        let len = total(bufs.iter().map(|b| b.len()));
        if !self.in_pieces(len, self.write_piece, bufs.len()) {
            return self.write_once(fd, bufs, off).map_err(WriteError::Now);
        }
        let mut start = None;
        let done = piecewise(
            len.min(sys::max_rw_count()),
            self.write_piece,
            |done, want| {
                // A writeback error of the pieces written: the call ends short
                // here, and the next one reports it.
                if done > 0 && self.tracker.as_ref().is_some_and(Tracker::has_deferred) {
                    return Ok(0);
                }
                let (at, n) =
                    self.write_once(fd, &sub(bufs, done, want), off.map(|o| o + done as u64))?;
                start.get_or_insert(at);
                Ok(n)
            },
        )
        .map_err(WriteError::Now)?;
        Ok((start.expect("the first piece was written"), done))
    }

    /// One write call, the tracker around it: one lock of the tracker
    /// before the data moves; the writeback it decided on (and any wait
    /// for it) runs after, unlocked.
    fn write_once(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        off: Option<u64>,
    ) -> io::Result<(u64, usize)> {
        let at = match off {
            // pwrite(2) on an O_APPEND file appends too (on Linux).
            Some(_) if self.append => WriteAt::EndPositional,
            Some(o) => WriteAt::Offset(o),
            None if self.append => WriteAt::End,
            None => WriteAt::Position(sys::lseek_cur(fd)?),
        };
        let Some(t) = &self.tracker else {
            let (at, n) = self.backend.write(fd, bufs, at, false)?;
            self.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
            return Ok((at, n));
        };
        let len = total(bufs.iter().map(|b| b.len())) as u64;
        let start = match at {
            WriteAt::Offset(o) | WriteAt::Position(o) => o,
            // Where the end is now; the backend reports where it was.
            WriteAt::End | WriteAt::EndPositional => sys::fstat(fd)?.st_size as u64,
        };
        let mut route = match &self.direct {
            Some(d) => d.write_route(fd, bufs, at, || t.keeps_cached(fd, start, len)),
            None => Route::cache(),
        };
        if let Some(d) = self
            .direct
            .as_ref()
            .filter(|d| d.switches_to_direct(&route))
        {
            // What the page cache's path left dirty is written back now,
            // and counted against that path: the direct writes after it
            // would otherwise wait for it in the device's queue.
            let began = std::time::Instant::now();
            t.write_back_all(fd);
            d.charge_cache_writes(began.elapsed());
            route.restart_clock();
        }
        let (keep_cached, plan) = t.before_write(fd, start, len);
        let res = match route.direct {
            // The write-behind counts the range all the same: a filesystem
            // that falls back to the page cache for O_DIRECT (ext4 with
            // data=journal, btrfs for compressed files) leaves it dirty.
            Some(direct) if !keep_cached => match direct.write_aligned(fd, bufs, at) {
                Err(e) if self.direct.as_ref().is_some_and(|d| d.refused(&e)) => {
                    self.backend.write(fd, bufs, at, keep_cached)
                }
                res => res.inspect(|&(_, n)| {
                    if let Some(d) = &self.direct {
                        d.count_written(n as u64);
                    }
                }),
            },
            _ => self.backend.write(fd, bufs, at, keep_cached),
        };
        if let Ok((at, n)) = res {
            if at != start {
                // An append that landed past another writer's data.
                t.after_write(fd, at, n as u64);
            }
        }
        t.run(fd, plan);
        let (at, n) = res?;
        route.done(n as u64);
        self.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
        Ok((at, n))
    }

    /// Before I/O on `fd` that the caller makes itself (copy_file_range,
    /// sendfile and splice in the LD_PRELOAD shim): learn which pages of
    /// `[off, off + len)` are cached already, so that they stay.
    pub fn before_external_io(&self, fd: BorrowedFd<'_>, off: u64, len: u64) {
        if let Some(t) = &self.tracker {
            t.snapshot(fd, off, len);
        }
    }

    /// Before the caller reads `[off, off + len)` of `fd` itself
    /// (copy_file_range, sendfile): what [`before_external_io`]
    /// (Self::before_external_io) does, and the stream's own readahead.
    pub fn before_external_read(&self, fd: BorrowedFd<'_>, off: u64, len: u64) {
        self.before_external_io(fd, off, len);
        if let Some(ra) = &self.readahead {
            ra.before_read(fd, off..off + len, ra.now(reclaim::high_order_reclaim));
        }
    }

    /// After the caller read `n` bytes at `off` itself: drop-behind.
    pub fn after_external_read(&self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        if let Some(t) = &self.tracker {
            t.after_read(fd, off, n);
        }
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
    }

    /// After the caller wrote `n` bytes at `off` itself: write-behind.
    pub fn after_external_write(&self, fd: BorrowedFd<'_>, off: u64, n: u64) {
        if let Some(t) = &self.tracker {
            t.after_external_write(fd, off, n);
        }
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
    }

    /// Start the writeback of everything written so far without waiting for
    /// it; a later flush or finish waits (by then, often, for nothing) and
    /// drops the pages.
    pub fn start_writeback(&self, fd: BorrowedFd<'_>) {
        if let Some(t) = &self.tracker {
            t.flush_nowait(fd);
        }
    }

    /// Start and wait for the writeback of everything written so far, drop
    /// those pages, and report any writeback error not yet reported.
    pub fn flush(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.tracker.as_ref().map_or(Ok(()), |t| t.flush(fd))
    }

    /// End of stream: flush, drop everything the stream brought in that was
    /// not cached before, report any deferred error.
    pub fn finish(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if let Some(ra) = &self.readahead {
            ra.finish(fd);
        }
        self.tracker.as_ref().map_or(Ok(()), |t| t.finish(fd))
    }

    /// The statistics so far.
    pub fn stats(&self) -> Stats {
        let (counts, preserved, blind, failed) = self
            .tracker
            .as_ref()
            .map(Tracker::report)
            .unwrap_or_default();
        Stats {
            backend: self.choice.backend,
            requested: self.choice.requested,
            reason: self.choice.reason.clone(),
            managed: self.choice.managed,
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_read_direct: self.direct.as_ref().map_or(0, DirectPath::bytes_read),
            direct_read_phases: self.direct.as_ref().map_or(0, DirectPath::reclaim_phases),
            bytes_written_direct: self.direct.as_ref().map_or(0, DirectPath::bytes_written),
            read_race: self.direct.as_ref().and_then(DirectPath::read_verdict),
            write_race: self.direct.as_ref().and_then(DirectPath::write_verdict),
            small_readahead_phases: self.readahead.as_ref().map_or(0, Readahead::phases),
            small_readahead_bytes: self.readahead.as_ref().map_or(0, Readahead::asked),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            pages_dropped: counts.pages_dropped,
            pages_preserved: preserved,
            drop_calls: counts.drop_calls,
            writeback_starts: counts.writeback_starts,
            writeback_waits: counts.writeback_waits,
            writeback_wait_secs: counts.writeback_wait_time.as_secs_f64(),
            residency_snapshots: counts.residency_snapshots,
            residency_unknown: blind,
            failed,
            real_file: self.tracker.as_ref().and_then(Tracker::real_file_desc),
            drops_without_effect: counts.drops_without_effect,
            overlay_fallback: self.tracker.as_ref().and_then(Tracker::overlay_fallback),
        }
    }
}

/// A call of `len` bytes made as calls of at most `piece`, `call(done,
/// want)` each, returning how much it moved; it ends as one system call
/// would: short where a piece is short (the end of file), or, on an error
/// after some data, with the bytes moved (the error recurs on the next
/// call).
pub(crate) fn piecewise(
    len: usize,
    piece: usize,
    mut call: impl FnMut(usize, usize) -> io::Result<usize>,
) -> io::Result<usize> {
    let mut done = 0;
    while done < len {
        let want = (len - done).min(piece);
        match call(done, want) {
            Ok(n) => {
                done += n;
                if n < want {
                    break;
                }
            }
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The bytes of a list of buffers of these lengths.
fn total(lens: impl Iterator<Item = usize>) -> usize {
    lens.fold(0, usize::saturating_add)
}

/// Bytes `[from, from + len)` of the scatter list `bufs` (counted across
/// its buffers), as a scatter list of its own.
fn sub_mut<'a>(bufs: &'a mut [IoSliceMut<'_>], from: usize, len: usize) -> Vec<IoSliceMut<'a>> {
    let mut at = 0;
    bufs.iter_mut()
        .filter_map(|b| part(&mut at, b.len(), from, len).map(|r| IoSliceMut::new(&mut b[r])))
        .collect()
}

/// Bytes `[from, from + len)` of the gather list `bufs`, as one of its own.
fn sub<'a>(bufs: &'a [IoSlice<'_>], from: usize, len: usize) -> Vec<IoSlice<'a>> {
    let mut at = 0;
    bufs.iter()
        .filter_map(|b| part(&mut at, b.len(), from, len).map(|r| IoSlice::new(&b[r])))
        .collect()
}

/// The part of bytes `[from, from + len)` in the next buffer of a list, of
/// `size` bytes and starting at `*at` (moved past it), if it holds any.
fn part(at: &mut usize, size: usize, from: usize, len: usize) -> Option<std::ops::Range<usize>> {
    let (start, end) = (*at, *at + size);
    *at = end;
    (end > from && start < from + len)
        .then(|| from.saturating_sub(start)..(from + len).min(end) - start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::WaitHook;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::sync::mpsc;
    use std::sync::Mutex;
    use std::time::Duration;

    /// A piece of a list of buffers: the parts of those it overlaps, each
    /// cut where the piece begins and ends; none past the list.
    #[test]
    fn pieces_of_a_buffer_list() {
        let data: Vec<u8> = (0..12).collect();
        let (a, rest) = data.split_at(3);
        let (b, c) = rest.split_at(4);
        let bufs = [IoSlice::new(a), IoSlice::new(b), IoSlice::new(c)];
        let bytes = |p: Vec<IoSlice<'_>>| p.iter().map(|s| s.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            bytes(sub(&bufs, 2, 6)),
            [vec![2], vec![3, 4, 5, 6], vec![7]]
        );
        assert_eq!(bytes(sub(&bufs, 3, 4)), [vec![3, 4, 5, 6]]);
        assert_eq!(bytes(sub(&bufs, 10, 8)), [vec![10, 11]]);
        assert!(sub(&bufs, 12, 4).is_empty());
        let mut out = [0u8; 8];
        let (x, y) = out.split_at_mut(5);
        let mut bufs = [IoSliceMut::new(x), IoSliceMut::new(y)];
        for mut part in sub_mut(&mut bufs, 4, 3) {
            part.fill(1);
        }
        assert_eq!(out, [0, 0, 0, 0, 1, 1, 1, 0]);
    }

    /// A writer waiting for its writeback holds no lock of the handle: a
    /// read on the same handle, made once the writer is inside its wait,
    /// completes before that wait ends (and finds the lock free). With the
    /// wait under the lock, the read could only finish after it.
    #[test]
    fn reader_not_blocked_while_writer_waits() {
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let path = dir.path().join("shared");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let head: Vec<u8> = (0..64 << 10).map(|i| (i % 251) as u8).collect();
        file.write_all(&head).unwrap();
        let opts = StreamOptions {
            backend: BackendKind::Emulated,
            window: 1 << 20,
            ..StreamOptions::default()
        };
        let stream = Stream::new(file.as_fd(), &opts).unwrap();
        let tracker = stream.tracker.as_ref().expect("emulated manages the cache");

        let events = std::sync::Arc::new(Mutex::new(Vec::<&'static str>::new()));
        let (to_test, from_hook) = mpsc::channel::<&'static str>();
        let (to_hook, from_test) = mpsc::channel::<()>();
        let from_test = Mutex::new(from_test);
        let (ev, tx) = (events.clone(), to_test.clone());
        let first = std::sync::atomic::AtomicBool::new(true);
        tracker
            .on_wait
            .set(WaitHook(Box::new(move |t| {
                if !first.swap(false, Ordering::SeqCst) {
                    return;
                }
                ev.lock().unwrap().push("wait begins");
                if t.is_locked() {
                    ev.lock().unwrap().push("lock held while waiting");
                }
                tx.send("waiting").unwrap();
                // Not a timing assertion: only how long to hold a wait that
                // a blocked reader could never see end.
                let _ = from_test
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(30));
                ev.lock().unwrap().push("wait ends");
            })))
            .unwrap();

        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let buf = vec![0x5au8; 256 << 10];
                for i in 0..16u64 {
                    let off = (1 << 20) + i * buf.len() as u64;
                    stream
                        .write_at(file.as_fd(), &[IoSlice::new(&buf)], Some(off))
                        .unwrap();
                }
                to_test.send("writer done").unwrap();
            });
            assert_eq!(
                from_hook.recv().unwrap(),
                "waiting",
                "the writer never waited"
            );
            let mut got = vec![0u8; head.len()];
            let n = stream
                .read_at(file.as_fd(), &mut [IoSliceMut::new(&mut got)], 0)
                .unwrap();
            assert_eq!(&got[..n], &head[..], "the read on the shared handle");
            events.lock().unwrap().push("read done");
            to_hook.send(()).unwrap();
            writer.join().unwrap();
        });
        stream.finish(file.as_fd()).unwrap();
        assert_eq!(
            *events.lock().unwrap(),
            ["wait begins", "read done", "wait ends"],
            "a read on the same handle waited for the writer's writeback"
        );
    }

    /// `data` in a file under target/ (a disk, whose residency can be
    /// known), none of it cached, and a stream of the emulated backend on
    /// it that reads ahead in small folios (`Always`, as where memory is
    /// fragmented) and never direct; None (a loud skip) where residency
    /// cannot be known there.
    fn small_readahead_stream(
        name: &str,
        data: &[u8],
    ) -> Option<(tempfile::TempDir, std::fs::File, Stream)> {
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        if residency::blindness(file.as_fd()).is_some() {
            crate::test_skip(name, "no residency in target/");
            return None;
        }
        // Written back first: dirty pages do not drop.
        file.sync_all().unwrap();
        sys::fadvise(file.as_fd(), 0, 0, sys::Advice::DontNeed).unwrap();
        assert_eq!(
            residency::count(file.as_fd(), sys::FileRange::WHOLE)
                .unwrap()
                .cached,
            0
        );
        let opts = StreamOptions {
            backend: BackendKind::Emulated,
            direct_reads: DirectReads::Never,
            small_readahead: SmallReadahead::Always,
            ..StreamOptions::default()
        };
        let stream = Stream::new(file.as_fd(), &opts).unwrap();
        Some((dir, file, stream))
    }

    /// In small folios (`Always`, as where memory is fragmented) a stream
    /// asks for the pages ahead of its reads itself, and still drops them
    /// behind, keeps the pages others had cached, and reads the same bytes;
    /// its end gives the open file the kernel's readahead back.
    #[test]
    fn small_readahead_asks_ahead_drops_behind_and_keeps_others_pages() {
        const MIB: u64 = 1 << 20;
        let data: Vec<u8> = (0..64 * MIB).map(|i| (i % 253) as u8).collect();
        let Some((_dir, file, stream)) = small_readahead_stream("small_readahead", &data) else {
            return;
        };
        let cached = |at: u64, len: u64| {
            residency::count(file.as_fd(), sys::FileRange::at(at, len))
                .unwrap()
                .cached
        };
        // Another user's 8 MiB in the middle.
        let mut others = vec![0u8; 8 * MIB as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut others, 32 * MIB).unwrap();
        let others_pages = cached(32 * MIB, 8 * MIB);
        // With what the reader's readahead took around them.
        let others_all = cached(0, 64 * MIB);
        let mut got = vec![0u8; MIB as usize];
        let n = stream
            .read_at(file.as_fd(), &mut [IoSliceMut::new(&mut got)], 0)
            .unwrap();
        assert_eq!(n, got.len());
        // The pages of the next readahead::AHEAD bytes were asked for (in
        // the cache once asked, read or not yet).
        let ahead = cached(MIB, crate::readahead::AHEAD);
        assert_eq!(
            ahead,
            crate::readahead::AHEAD / 4096,
            "pages ahead of the first read"
        );
        let mut all = got.clone();
        let mut off = n as u64;
        while off < data.len() as u64 {
            let n = stream
                .read_at(file.as_fd(), &mut [IoSliceMut::new(&mut got)], off)
                .unwrap();
            all.extend_from_slice(&got[..n]);
            off += n as u64;
        }
        stream.finish(file.as_fd()).unwrap();
        assert!(all == data, "the bytes read differ");
        let stats = stream.stats();
        assert_eq!(stats.small_readahead_phases, 1);
        assert!(stats.small_readahead_bytes >= data.len() as u64 - 8 * MIB);
        assert!(
            stats.small_readahead_bytes <= data.len() as u64,
            "asked past the end of file: {}",
            stats.small_readahead_bytes
        );
        assert_eq!(cached(32 * MIB, 8 * MIB), others_pages, "others' pages");
        assert_eq!(
            cached(0, 64 * MIB),
            others_all,
            "the stream's own pages left cached"
        );
        // The kernel's readahead is back on the open file: a read of its
        // first MiB reads ahead past it (with POSIX_FADV_RANDOM it would not).
        sys::fadvise(file.as_fd(), 0, 0, sys::Advice::DontNeed).unwrap();
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut got, 0).unwrap();
        assert!(cached(MIB, MIB) > 0, "no readahead after the stream");
    }

    /// In small folios a read far from the last one gets its own pages
    /// only (the kernel's readahead is off for the file): a random reader
    /// is not read ahead of.
    #[test]
    fn small_readahead_leaves_random_reads_alone() {
        const MIB: u64 = 1 << 20;
        let data = vec![7u8; 64 * MIB as usize];
        let Some((_dir, file, stream)) = small_readahead_stream("small_readahead_random", &data)
        else {
            return;
        };
        let mut got = vec![0u8; 64 << 10];
        for off in [40 * MIB, 20 * MIB] {
            stream
                .read_at(file.as_fd(), &mut [IoSliceMut::new(&mut got)], off)
                .unwrap();
        }
        let cached = residency::count(file.as_fd(), sys::FileRange::WHOLE)
            .unwrap()
            .cached;
        assert_eq!(cached, 2 * 16, "pages of two random 64 KiB reads");
        assert_eq!(stream.stats().small_readahead_bytes, 0);
        stream.finish(file.as_fd()).unwrap();
    }

    #[test]
    fn direct_settings_read_back_by_name() {
        use crate::setting::Setting;
        for &w in DirectReads::ALL {
            assert_eq!(w.name().parse::<DirectReads>(), Ok(w));
        }
        for &w in DirectWrites::ALL {
            assert_eq!(w.name().parse::<DirectWrites>(), Ok(w));
        }
        for &w in SmallReadahead::ALL {
            assert_eq!(w.name().parse::<SmallReadahead>(), Ok(w));
        }
        let e = "sometimes".parse::<DirectReads>().unwrap_err();
        assert!(
            e.contains("direct reads 'sometimes'") && e.contains("when-faster"),
            "{e}"
        );
    }

    /// The direct side is armed where asked for (when faster, by default)
    /// and the backend is the emulated one (by name or `auto`'s choice);
    /// not where a backend reads without the page cache or the pages are
    /// the file (tmpfs).
    #[test]
    fn direct_calls_are_armed_only_where_asked_on_the_emulated_backend() {
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        if !probe::fs_caps(file.as_fd(), &sys::fstat(file.as_fd()).unwrap())
            .unwrap()
            .direct_io
            .available
        {
            return crate::test_skip("direct_calls_armed", "no O_DIRECT in target/");
        }
        let armed = |backend, direct_reads, direct_writes| {
            let opts = StreamOptions {
                backend,
                direct_reads,
                direct_writes,
                ..StreamOptions::default()
            };
            let s = Stream::new(file.as_fd(), &opts).unwrap();
            s.direct.map(|d| (d.reads(), d.writes()))
        };
        use BackendKind::*;
        use DirectReads as R;
        use DirectWrites as W;
        let defaults = StreamOptions::default();
        assert_eq!(
            (defaults.direct_reads, defaults.direct_writes),
            (R::WhenFaster, W::WhenFaster)
        );
        assert_eq!(armed(Auto, R::Never, W::Never), None);
        assert_eq!(
            armed(Auto, R::Never, W::WhenFaster),
            Some((R::Never, W::WhenFaster))
        );
        assert_eq!(
            armed(Auto, R::UnderReclaim, W::Never),
            Some((R::UnderReclaim, W::Never))
        );
        assert_eq!(
            armed(Emulated, R::Always, W::Always),
            Some((R::Always, W::Always))
        );
        for backend in [Kernel, Direct, Buffered] {
            // Kernel may be refused here (no RWF_DONTCACHE).
            let opts = StreamOptions {
                backend,
                direct_reads: R::Always,
                direct_writes: W::Always,
                ..StreamOptions::default()
            };
            if let Ok(s) = Stream::new(file.as_fd(), &opts) {
                assert!(s.direct.is_none(), "{backend}");
            }
        }
        let shm = tempfile::NamedTempFile::new_in("/dev/shm").unwrap();
        let opts = StreamOptions {
            direct_reads: R::Always,
            direct_writes: W::Always,
            ..StreamOptions::default()
        };
        let s = Stream::new(shm.as_file().as_fd(), &opts).unwrap();
        assert!(s.direct.is_none(), "tmpfs");
    }
}
