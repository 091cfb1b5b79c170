//! The engine outside the process: applies the contract to the files of
//! other processes (a process tree started by `ubio run`, or one already
//! running) by watching their file positions, for every program whatever
//! its language, libc use or linking: stdio (which the LD_PRELOAD shim
//! cannot see), statically linked programs, inherited descriptors.
//!
//! Each look ("tick"): the tree is refreshed from /proc, every regular file
//! open in it is found with its position and flags (/proc/PID/fdinfo), and
//! how far each open file description moved since the last look is handed
//! to the library's own policies through a [`Tracker`]: drop-behind for
//! what was read, write-behind for what was written. The engine acts on the
//! file through a descriptor of its own (a reopen of /proc/PID/fd/N, or
//! pidfd_getfd where the reopen is refused); fadvise, sync_file_range and
//! cachestat act on the inode whoever's descriptor is used. It never waits
//! on the program's descriptors, sends no signal, does not ptrace; on a
//! description the program reads it makes one call, POSIX_FADV_NORMAL, to
//! undo the program's POSIX_FADV_SEQUENTIAL (`Readahead`).
//!
//! Residency is snapshotted when a file is first seen (the whole file: cold
//! files cost one cachestat). What the stream passed before that moment
//! cannot be told apart from pages others had cached: it is taken as the
//! stream's own when the rest of the file is cold (nothing cached beyond
//! the stream's readahead), and kept otherwise.
//!
//! Transfers that move no position (one long copy_file_range, sendfile or
//! splice; splice or copy_file_range with explicit offsets) are found from
//! the pages they leave, when no position of the file moved in a look
//! ([`silent`]), and go to the same policies.
//!
//! What is best effort: a writer cannot be made to wait. Writeback is
//! started as soon as half a window is written and pages are dropped once
//! written back, so dirty + writeback stays near the window plus what the
//! writer writes in one look, as long as the device keeps up; a writer
//! faster than its device is held back only by the kernel's dirty limits.
//! Writeback is started on a thread of its own ([`submit`]): a start that
//! the block layer holds back (writeback throttling) does not stop the
//! looks, so what was read is still dropped and what was written back
//! still freed meanwhile.
//! Readers through mmap, and pread readers that do not go sequentially
//! from their position, are not seen until the file is closed.
//!
//! Files the shim manages (it claims them, see [`claims`]) are left to it.

use crate::lateness::Lateness;
use crate::silent::{self, Pages, Silent};
use crate::submit::Submitter;
use crate::tree::{self, Seen, Tree};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ubio::backend::Caps;
use ubio::claims::{Claim, ClaimListener};
use ubio::residency::{self, CHUNK};
use ubio::sys::{self, FileRange};
use ubio::tracker::{Tracker, TrackerConfig};
use ubio::BackendKind;
use ubio::{probe, procfs};

/// How the engine manages files and how often it looks.
#[derive(Debug, Clone, Copy)]
pub struct FollowOptions {
    /// Dirty + writeback bytes per file (write-behind window).
    pub window: u64,
    /// How far behind the read position read pages may stay.
    pub read_lag: u64,
    /// Bounds of the interval between looks.
    pub min_interval: Duration,
    pub max_interval: Duration,
    /// The interval is chosen so that the fastest stream moves about this
    /// much between looks.
    pub bytes_per_look: u64,
    /// Sample each written file's dirty + writeback pages at every look
    /// (one cachestat) for [`FileReport::dirty_peak`].
    pub sample_dirty: bool,
    /// The programs' POSIX_FADV_SEQUENTIAL advice stands (no shim strips
    /// it, as under `ubio policy`): the kernel's readahead may run twice as
    /// far ahead of a read, which the engine must not take for pages read.
    pub sequential_readahead: bool,
    /// Observe only (`ubio policy run --dry-run`): follow and count what
    /// would be dropped and written back, and change nothing (no fadvise,
    /// no sync_file_range, the programs' readahead advice left as it is;
    /// [`Tracker::dry_run`]).
    pub dry_run: bool,
}

impl Default for FollowOptions {
    fn default() -> Self {
        FollowOptions {
            window: ubio::DEFAULT_WINDOW,
            read_lag: ubio::DEFAULT_READ_LAG,
            min_interval: Duration::from_millis(2),
            max_interval: Duration::from_millis(10),
            bytes_per_look: 4 << 20,
            sample_dirty: false,
            sequential_readahead: false,
            dry_run: false,
        }
    }
}

type Key = (u64, u64);

/// A regular file the engine found open in a member process and has not
/// followed yet, for the caller of [`Follower::look_admitting`] to decide.
#[derive(Debug)]
pub struct Candidate<'a> {
    pub pid: u32,
    /// Where the file is, as /proc/PID/fd shows it to this process.
    pub path: &'a Path,
    pub size: u64,
    /// The description's status flags (O_ACCMODE...).
    pub flags: i32,
}

impl Candidate<'_> {
    /// Open for writing (it may grow).
    pub fn writable(&self) -> bool {
        is_writable(self.flags)
    }
}

/// The caller's decision about each [`Candidate`].
pub type AdmitFn<'f> = dyn FnMut(&Candidate<'_>) -> Admit + 'f;

/// The decision about a [`Candidate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Follow it with this write-behind window; `tag` comes back in its
    /// [`FileReport`].
    Follow { tag: u64, window: u64 },
    /// Leave it alone while it stays open; `recheck`: ask again at the
    /// next look (a file that may grow into scope).
    Skip { why: String, recheck: bool },
}

/// One file (inode) the engine follows.
struct Followed {
    path: PathBuf,
    /// Shared with the writeback thread ([`submit`]).
    file: Arc<File>,
    /// None when the file is not managed (tmpfs, O_DIRECT...): `why` says.
    tracker: Option<Arc<Tracker>>,
    why: String,
    /// Positions of the open file descriptions seen at the last look.
    cursors: Vec<u64>,
    bytes_read: u64,
    bytes_written: u64,
    /// Known to residency up to here: the end of file at first sight, then
    /// as far as the streams went (pages beyond the old end are new).
    known_to: u64,
    /// No description of it is open any more: finishing.
    closed: bool,
    /// A shim manages it: the engine only keeps its first-sight snapshot,
    /// to drop at the end what the shim may have left (a program that
    /// closed the descriptor behind the shim's back).
    claimed: bool,
    /// Some description of it was seen open for writing.
    writable: bool,
    /// How far the kernel's readahead may run ahead of a read.
    readahead: Readahead,
    /// What transfers that move no position did to it.
    silent: Silent,
    /// The caller's tag ([`Admit::Follow`]).
    tag: u64,
    /// The most dirty + writeback bytes seen ([`FollowOptions::sample_dirty`]).
    dirty_peak: u64,
    /// At this look, how far past its position a transfer that moves no
    /// position has written the file (its pages say so).
    transfer_written: Option<u64>,
}

/// The kernel's readahead of a followed file, and the programs'
/// POSIX_FADV_SEQUENTIAL advice the engine undoes.
///
/// GNU cp, cat and sha256sum advise POSIX_FADV_SEQUENTIAL on what they
/// read, which doubles the readahead of their open file description: with
/// read_ahead_kb 8192, windows of 16 MiB, up to 32 MiB ahead of the
/// reader. The shim ignores that advice on the files it manages; the
/// engine, which follows programs from outside, cannot stop the call, so
/// it undoes it (POSIX_FADV_NORMAL on a duplicate of the description,
/// pidfd_getfd) once the description is read. Without that, a copy that
/// moves no position (cp's one copy_file_range of the whole file), whose
/// progress the engine infers as its pages' reach less the lookahead,
/// kept 40 MiB behind the reach after each drop and took the next 16 MiB
/// windows whole: two windows between two looks of the engine made 72
/// MiB cached against the 64 MiB bound (1 run in 3 at load 2-3).
#[derive(Debug)]
struct Readahead {
    /// How far readahead may run ahead of a read without the advice.
    plain: u64,
    /// Below this offset readahead may run twice as far (the advice
    /// stands, or windows it made are still ahead of the reader): u64::MAX
    /// where the advice is taken to stand, 0 where it is not.
    doubled_until: u64,
    /// Descriptions (pid, fd) whose advice was undone or tried.
    undone: HashSet<(u32, i32)>,
    /// The advice is never undone (a dry run changes nothing).
    leave: bool,
}

impl Readahead {
    /// `sequential`: the programs' advice is taken to stand until undone
    /// ([`FollowOptions::sequential_readahead`]).
    fn new(plain: u64, sequential: bool) -> Readahead {
        Readahead {
            plain,
            doubled_until: if sequential { u64::MAX } else { 0 },
            undone: HashSet::new(),
            leave: false,
        }
    }

    /// How far readahead may run ahead of a read at `offset`.
    fn at(&self, offset: u64) -> u64 {
        match offset < self.doubled_until {
            true => 2 * self.plain,
            false => self.plain,
        }
    }

    /// Some description of `seen` open for reading was not undone yet.
    fn pending(&self, seen: &[Seen]) -> bool {
        !self.leave
            && seen
                .iter()
                .any(|s| is_readable(s.info.flags) && !self.undone.contains(&(s.pid, s.fd)))
    }

    /// Undo the advice of the descriptions of `seen` open for reading, once
    /// each: readahead ahead of them goes back to the device's. `front`:
    /// as far as readahead made under the advice may reach now; past it
    /// plus the doubled lookahead, every window ahead of a reader was made
    /// without it. A description whose advice cannot be undone (no ptrace
    /// access, gone) keeps the doubled lookahead for the file.
    fn undo_sequential(&mut self, seen: &[Seen], front: u64) {
        let mut all = true;
        let mut any = false;
        for s in seen.iter().filter(|s| is_readable(s.info.flags)) {
            if !self.undone.insert((s.pid, s.fd)) {
                continue;
            }
            any = true;
            if let Err(e) = advise_normal(s) {
                log::debug!(
                    "pid {} fd {}: readahead advice not undone: {e}",
                    s.pid,
                    s.fd
                );
                all = false;
            }
        }
        if !any {
            return;
        }
        if !all {
            self.doubled_until = u64::MAX;
        } else if self.doubled_until == u64::MAX {
            self.doubled_until = front.saturating_add(2 * self.plain);
        }
    }
}

/// POSIX_FADV_NORMAL on the open file description behind `s` (a duplicate
/// of the program's descriptor, closed at once): its readahead goes back
/// to the device's (the advice is per description, not per inode). Never
/// on a descriptor that changed file since the look.
fn advise_normal(s: &Seen) -> io::Result<()> {
    let dup = s.duplicate()?;
    if !s.is(&sys::fstat(dup.as_fd())?) {
        return Err(io::Error::other("the descriptor names another file now"));
    }
    sys::fadvise(dup.as_fd(), 0, 0, sys::Advice::Normal)
}

/// A retired file whose pages are dropped again (see [`Follower::settle`]):
/// `left` of them were cached at the last drop that left fewer, at `since`.
struct Retiring {
    f: Followed,
    left: u64,
    since: Instant,
}

/// How long a retired file's leftover pages are dropped again without
/// their number going down.
const SETTLE: Duration = Duration::from_secs(1);

/// What the engine did to one file (for `ubio run --log`).
#[derive(Debug, Clone)]
pub struct FileReport {
    pub path: PathBuf,
    pub managed: bool,
    pub why: String,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub pages_dropped: u64,
    pub pages_preserved: u64,
    pub writeback_starts: u64,
    pub residency_unknown: Option<String>,
    /// The tag it was admitted with (0 without an admission).
    pub tag: u64,
    /// The most dirty + writeback bytes seen at a look (sampled only with
    /// [`FollowOptions::sample_dirty`]).
    pub dirty_peak: u64,
    /// Bytes of the streams' own pages cached now (one cachestat per range
    /// they brought in): in [`Follower::live`]'s reports only, 0 in those of
    /// finished files.
    pub own_cached: u64,
}

/// Totals of the engine's work.
#[derive(Debug, Clone, Default)]
pub struct FollowStats {
    pub looks: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub pages_dropped: u64,
    pub min_interval: Duration,
    pub max_interval: Duration,
    pub files: Vec<FileReport>,
    /// How late the looks that were due came.
    pub lateness: Lateness,
}

/// The engine.
pub struct Follower {
    opts: FollowOptions,
    tree: Tree,
    files: HashMap<Key, Followed>,
    /// Files a shim manages: (pid, key) claims.
    claimed: HashSet<(u32, Key)>,
    listener: Option<ClaimListener>,
    /// Files no one has open that still hold pages their streams brought in.
    retiring: HashMap<Key, Retiring>,
    /// Bytes per second, smoothed: the fastest recent motion of all files.
    speed: f64,
    last_look: Option<Instant>,
    /// When the next look is due (None while nothing is followed: no look
    /// is due then, whenever the caller looks next).
    due: Option<Instant>,
    /// Until then the looks come at the shortest interval: a process
    /// joined, whose streams are not known yet ([`JUST_JOINED`]).
    joined_until: Option<Instant>,
    stats: FollowStats,
    /// Files the admission left alone while they stay open: Some(size)
    /// to ask again once the size differs (a file growing into scope).
    skipped: HashMap<Key, Option<u64>>,
    /// Members that had a followed file open at the last look.
    with_files: HashSet<u32>,
    /// Makes the trackers' writeback starts, which may wait, off the looks.
    submitter: Submitter,
}

impl Follower {
    pub fn new(opts: FollowOptions) -> Follower {
        Self::with_tree(opts, Tree::default())
    }

    /// An engine that follows only the processes given to
    /// [`add_root`](Self::add_root), not their children: the caller
    /// decides about each process (`ubio policy`).
    pub fn listed(opts: FollowOptions) -> Follower {
        Self::with_tree(opts, Tree::listed())
    }

    fn with_tree(opts: FollowOptions, tree: Tree) -> Follower {
        Follower {
            opts,
            tree,
            files: HashMap::new(),
            claimed: HashSet::new(),
            listener: None,
            retiring: HashMap::new(),
            speed: 0.0,
            last_look: None,
            due: None,
            joined_until: None,
            stats: FollowStats {
                min_interval: Duration::MAX,
                ..FollowStats::default()
            },
            skipped: HashMap::new(),
            with_files: HashSet::new(),
            submitter: Submitter::default(),
        }
    }

    /// Listen for the shim's claims; returns the name to pass in
    /// [`claims::ENV`].
    pub fn listen(&mut self) -> io::Result<String> {
        let l = ClaimListener::bind()?;
        let name = l.name().to_string();
        self.listener = Some(l);
        Ok(name)
    }

    /// Follow `pid` and its descendants.
    pub fn add_root(&mut self, pid: u32) {
        self.tree.add_root(pid);
        self.just_joined();
    }

    /// A process joined: look often while it starts its streams.
    fn just_joined(&mut self) {
        self.joined_until = Some(Instant::now() + JUST_JOINED);
    }

    /// Stop following `pid` (what it had open is finished at the next look
    /// unless another member has it open).
    pub fn remove(&mut self, pid: u32) {
        self.tree.remove(pid);
    }

    /// The tree has no live process left.
    pub fn tree_is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// The processes followed now.
    pub fn members(&self) -> impl Iterator<Item = u32> + '_ {
        self.tree.members()
    }

    /// Whether `pid` had a followed file open at the last look.
    pub fn has_files(&self, pid: u32) -> bool {
        self.with_files.contains(&pid)
    }

    /// Files followed now, or still being finished.
    pub fn following(&self) -> usize {
        self.files.len() + self.retiring.len()
    }

    /// What the engine did so far to the files it follows now (and those
    /// it is still finishing).
    pub fn live(&self) -> Vec<FileReport> {
        self.files
            .values()
            .chain(self.retiring.values().map(|r| &r.f))
            .map(|f| FileReport {
                own_cached: f.left_behind() * sys::page_size(),
                ..f.report()
            })
            .collect()
    }

    /// The reports of the files finished since the last call (a long
    /// running caller takes them as they come instead of letting them pile
    /// up in [`finish`](Self::finish)'s statistics).
    pub fn take_finished(&mut self) -> Vec<FileReport> {
        std::mem::take(&mut self.stats.files)
    }

    /// Look once: find the tree's files and apply the policies to how they
    /// moved. Returns how long to wait before the next look.
    pub fn look(&mut self) -> Duration {
        self.look_admitting(None)
    }

    /// [`look`](Self::look), with `admit` deciding about each file seen
    /// for the first time (without it every regular file is followed).
    pub fn look_admitting<'f>(&mut self, mut admit: Option<&mut AdmitFn<'f>>) -> Duration {
        let now = Instant::now();
        let elapsed = self.last_look.map(|t| now - t);
        self.last_look = Some(now);
        self.stats.looks += 1;
        // A look before its due time (an event woke the caller) is not late.
        if let Some(due) = self.due.take().filter(|d| now >= *d) {
            self.stats.lateness.record(now - due);
        }
        if let Some(l) = &self.listener {
            for c in l.take() {
                self.on_claim(c);
            }
        }
        if self.tree.refresh().is_ok_and(|joined| joined > 0) {
            self.just_joined();
        }
        let seen = self.tree.scan();
        let live: HashSet<u32> = self.tree.members().collect();
        self.claimed.retain(|(pid, _)| live.contains(pid));
        let mut by_file: HashMap<Key, Vec<Seen>> = HashMap::new();
        for s in seen {
            by_file.entry((s.dev, s.ino)).or_default().push(s);
        }
        let mut moved_max = 0u64;
        // Files open for writing first: how far a transfer under way got
        // shows in its destination, which the first sight of its source
        // needs (unseen_progress).
        let mut keys: Vec<&Key> = by_file.keys().collect();
        keys.sort_by_key(|k| !by_file[*k].iter().any(|s| is_writable(s.info.flags)));
        self.skipped.retain(|k, _| by_file.contains_key(k));
        // Per process, how far each of its destinations written without
        // motion got this look (the writers come first).
        let mut transfers: HashMap<u32, Vec<u64>> = HashMap::new();
        self.with_files.clear();
        for key in keys {
            let seen = &by_file[key];
            match self.skipped.get(key) {
                None => {}
                Some(None) => continue,
                Some(Some(size)) => {
                    // A writer of a file too small for now: its pid stays
                    // followed, the file is judged again once it grew.
                    self.with_files.extend(seen.iter().map(|s| s.pid));
                    let s = &seen[0];
                    let now =
                        std::fs::metadata(format!("/proc/{}/fd/{}", s.pid, s.fd)).map(|m| m.len());
                    if now.is_ok_and(|n| n == *size) {
                        continue;
                    }
                }
            }
            let claimed = self.claimed.iter().any(|(_, k)| k == key);
            if !self.files.contains_key(key) {
                // Open again: what was left of it is the new stream's to judge.
                if let Some(r) = self.retiring.remove(key) {
                    self.report(r.f);
                }
                match self.first_sight(&seen[0], admit.as_deref_mut()) {
                    Some(f) => {
                        self.skipped.remove(key);
                        self.files.insert(*key, f);
                    }
                    None => continue,
                };
            }
            self.with_files.extend(seen.iter().map(|s| s.pid));
            let f = self.files.get_mut(key).expect("inserted above");
            f.closed = false;
            if claimed {
                f.claimed = true;
                continue;
            }
            // A source read without motion, in a process with one such
            // destination: the transfer read it as far as it wrote that.
            let transfer = seen
                .iter()
                .find_map(|s| match transfers.get(&s.pid)?.as_slice() {
                    [k] => Some(*k),
                    _ => None,
                });
            moved_max = moved_max.max(f.moved(seen, transfer));
            if let Some(k) = f.transfer_written {
                let mut pids: Vec<u32> = seen.iter().map(|s| s.pid).collect();
                pids.sort_unstable();
                pids.dedup();
                for pid in pids {
                    transfers.entry(pid).or_default().push(k);
                }
            }
        }
        for (key, f) in self.files.iter_mut() {
            if !by_file.contains_key(key) && !f.closed {
                f.close();
            }
            if let Some(t) = &f.tracker {
                t.drain(f.file.as_fd());
                if self.opts.sample_dirty && f.bytes_written > 0 {
                    f.sample_dirty();
                }
            }
        }
        self.submit_starts();
        // A file nobody has open and whose writeback is done: drop the rest.
        let done: Vec<Key> = self
            .files
            .iter_mut()
            .filter_map(|(k, f)| {
                let idle = f.closed && f.tracker.as_ref().is_none_or(|t| !t.drain(f.file.as_fd()));
                idle.then_some(*k)
            })
            .collect();
        for k in done {
            if let Some(f) = self.files.remove(&k) {
                self.retire(k, f);
            }
        }
        self.settle();
        let wait = self.next_interval(moved_max, elapsed);
        log::trace!(
            "look {}: {:?} after the last, took {:?}, furthest move {} KiB, next in {:?}",
            self.stats.looks,
            elapsed.unwrap_or_default(),
            now.elapsed(),
            moved_max >> 10,
            wait
        );
        if self.following() > 0 {
            self.due = Some(Instant::now() + wait);
        }
        wait
    }

    /// How late the looks that were due came, so far.
    pub fn lateness(&self) -> &Lateness {
        &self.stats.lateness
    }

    /// Hand the writeback starts the trackers queued to the writeback thread.
    fn submit_starts(&mut self) {
        for f in self.files.values() {
            if let Some(t) = &f.tracker {
                self.submitter.take_from(&f.file, t);
            }
        }
    }

    /// Faster streams, shorter intervals: the fastest file should move about
    /// `bytes_per_look` between looks; bounded both ways, the shortest
    /// while a process just joined.
    fn next_interval(&mut self, moved: u64, elapsed: Option<Duration>) -> Duration {
        if let Some(e) = elapsed.filter(|e| !e.is_zero()) {
            let now = moved as f64 / e.as_secs_f64();
            // Rise at once, decay over a few looks.
            self.speed = if now > self.speed {
                now
            } else {
                0.7 * self.speed + 0.3 * now
            };
        }
        let want = Duration::try_from_secs_f64(self.opts.bytes_per_look as f64 / self.speed)
            .unwrap_or(self.opts.max_interval);
        let i = match self.joined_until {
            Some(t) if Instant::now() < t => self.opts.min_interval,
            _ => want.clamp(self.opts.min_interval, self.opts.max_interval),
        };
        self.stats.min_interval = self.stats.min_interval.min(i);
        self.stats.max_interval = self.stats.max_interval.max(i);
        i
    }

    fn on_claim(&mut self, c: Claim) {
        let key = (c.dev, c.ino);
        if c.claim {
            self.claimed.insert((c.pid, key));
            // The shim snapshotted before its first read: leave it the file
            // (what the engine saw moving is the shim's).
            if let Some(f) = self.files.get_mut(&key) {
                log::debug!("{}: managed by the shim of pid {}", f.path.display(), c.pid);
                f.claimed = true;
            }
        } else {
            self.claimed.remove(&(c.pid, key));
        }
    }

    /// How far a transfer under way in `pid` may have gone before the engine
    /// saw its source (a copy_file_range or sendfile moves no position until
    /// it returns): the furthest that one of the process's files open for
    /// writing holds the transfer's pages past its position. The process's
    /// descriptors are listed afresh: the look's scan may predate the
    /// destination (cp's output was missing from it in 1 of ~10 loaded runs
    /// of the policy test, its source then taken as others' cache: 40 MiB
    /// left after exit).
    fn unseen_progress(&self, pid: u32) -> u64 {
        let page = sys::page_size();
        tree::open_files(pid)
            .iter()
            .filter(|w| is_writable(w.info.flags))
            .filter_map(|w| {
                let pos = w.info.pos;
                match self.files.get(&(w.dev, w.ino)) {
                    // Followed already: pages written back may be dropped;
                    // the last walk knows how far the pages reached then,
                    // and an end of file past what the engine knew of the
                    // file was written since (the walk is a look old: 40
                    // MiB of a GNU cp's copy).
                    Some(f) => {
                        let fd = f.file.as_fd();
                        let c = sys::cachestat(fd, FileRange::ToEnd(pos)).ok()?;
                        let walked = f.silent.walked_to().saturating_sub(pos);
                        let size = sys::fstat(fd).map_or(0, |st| st.st_size as u64);
                        let grown = match size > f.known_to {
                            true => size.saturating_sub(pos),
                            false => 0,
                        };
                        Some(
                            ((c.nr_dirty + c.nr_writeback) * page)
                                .max(walked)
                                .max(grown),
                        )
                    }
                    // Not followed: nothing of it was dropped; its pages
                    // past the position, written back ones too, within
                    // its end of file.
                    None => {
                        let file = w.open().ok()?;
                        let st = sys::fstat(file.as_fd()).ok()?;
                        if !w.is(&st) {
                            return None;
                        }
                        let c = sys::cachestat(file.as_fd(), FileRange::ToEnd(pos)).ok()?;
                        Some((c.nr_cache * page).min((st.st_size as u64).saturating_sub(pos)))
                    }
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// Open a file seen for the first time, decide whether it is managed
    /// (`admit`, then the filesystem and flags), and snapshot its residency.
    fn first_sight<'f>(&mut self, s: &Seen, admit: Option<&mut AdmitFn<'f>>) -> Option<Followed> {
        let link = format!("/proc/{}/fd/{}", s.pid, s.fd);
        let path = std::fs::read_link(&link).unwrap_or_else(|_| PathBuf::from(&link));
        let file = Arc::new(s.open().ok()?);
        let st = sys::fstat(file.as_fd()).ok()?;
        if !s.is(&st) {
            return None; // the descriptor changed under us; next look
        }
        let (mut tag, mut window) = (0, self.opts.window);
        if let Some(admit) = admit {
            let c = Candidate {
                pid: s.pid,
                path: &path,
                size: st.st_size as u64,
                flags: s.info.flags,
            };
            match admit(&c) {
                Admit::Follow { tag: t, window: w } => (tag, window) = (t, w),
                Admit::Skip { why, recheck } => {
                    log::debug!("{}: left alone: {why}", path.display());
                    self.skipped
                        .insert((s.dev, s.ino), recheck.then_some(st.st_size as u64));
                    return None;
                }
            }
        }
        let fd = file.as_fd();
        let blind = residency::blindness(fd);
        let fs = probe::fs_caps(fd, &st).ok()?;
        let choice = probe::choose(
            BackendKind::Emulated,
            &fs,
            true,
            s.info.flags,
            blind.is_none(),
        );
        let (managed, why) = match choice {
            Ok(c) => (c.managed, c.reason),
            Err(e) => (false, e.to_string()),
        };
        // A reader that advised POSIX_FADV_SEQUENTIAL (GNU cat, cp,
        // sha256sum do) has its readahead twice as far ahead where no shim
        // strips that advice. Under `ubio policy`, with the single
        // lookahead, 30 MiB of a cat's own pages were kept as others' at
        // first sight in 2 of 4 runs, and readahead taken for a transfer
        // that moves no position was dropped ahead of the reader, which
        // read it again: cat's cache peaked at 140-186 MiB (54-68 with it).
        let mut readahead = Readahead::new(fs.lookahead(), self.opts.sequential_readahead);
        readahead.leave = self.opts.dry_run;
        let lookahead = readahead.at(0);
        // Where the stream got, as late as possible before the snapshot: a
        // reader goes on after the look's scan (cat moved tens of MiB
        // while a loaded daemon admitted it).
        let pos = s.position_now().unwrap_or(0).max(s.info.pos);
        // A writer at the end of a file younger than itself (its
        // output, made since it started): what it passed is what it
        // wrote, and pages of it written back before the engine saw it
        // are clean; taken as others', they stayed after exit (dd bs=1M
        // with a device dirty limit, 24-48 MiB in 3 of 100 daemon
        // runs). Not a writer at an offset (a database's pwrite): its
        // file may hold pages others read since it was made. At the
        // end with a write in flight too: the file grows before the
        // call moves the position.
        let at_end = pos + WRITE_IN_FLIGHT >= st.st_size as u64;
        let young = managed && is_writable(s.info.flags) && at_end && born_after_start(fd, s.pid);
        let tracker = managed.then(|| {
            let cfg = TrackerConfig {
                window,
                read_lag: self.opts.read_lag,
                lookahead: fs.lookahead(),
                preserve_cached: true,
            };
            let t = Tracker::new(Caps::default(), cfg, blind);
            t.defer_starts();
            if self.opts.dry_run {
                t.dry_run();
            }
            // A transfer that moves no position shows in its destination
            // (unseen_progress); asked only where the reader's pages reach
            // past its position (listing the process's descriptors costs
            // one read per descriptor).
            let progress = || match is_writable(s.info.flags) {
                true => 0,
                false => self.unseen_progress(s.pid),
            };
            snapshot_first_sight(
                &t,
                &file,
                s,
                st.st_size as u64,
                pos + lookahead,
                young,
                progress,
            );
            Arc::new(t)
        });
        log::debug!(
            "{}: seen in pid {} fd {} at {pos} (size {}){}: {}",
            path.display(),
            s.pid,
            s.fd,
            st.st_size,
            if young {
                ", younger than its writer"
            } else {
                ""
            },
            why
        );
        Some(Followed {
            path,
            file,
            tracker,
            why,
            // What this description passed before the engine saw it is
            // handed to the policies too (residency decides what may go).
            cursors: vec![0],
            bytes_read: 0,
            bytes_written: 0,
            known_to: (st.st_size as u64).div_ceil(CHUNK) * CHUNK,
            closed: false,
            claimed: false,
            writable: is_writable(s.info.flags),
            readahead,
            silent: Silent::default(),
            tag,
            dirty_peak: 0,
            transfer_written: None,
        })
    }

    /// Stop following `f`: drop what its streams brought in; if some of
    /// it stays, go on dropping it for a while ([`settle`](Self::settle)).
    fn retire(&mut self, key: Key, f: Followed) {
        if let Some(t) = &f.tracker {
            t.drop_all(f.file.as_fd());
        }
        // A dry run drops nothing: the pages stay, there is no settling.
        let left = match self.opts.dry_run {
            true => 0,
            false => f.left_behind(),
        };
        match left {
            0 => self.report(f),
            left => {
                let since = Instant::now();
                self.retiring.insert(key, Retiring { f, left, since });
            }
        }
    }

    /// Drop again what retired files still hold: reads in flight when the
    /// reader went (readahead of a program killed in its call, on a slow
    /// device) complete after the drop at retirement and leave their pages,
    /// which could not be dropped while they were read. Until nothing is
    /// left, or what is left stops shrinking for [`SETTLE`].
    fn settle(&mut self) {
        let keys: Vec<Key> = self.retiring.keys().copied().collect();
        for key in keys {
            let r = self.retiring.get_mut(&key).expect("listed above");
            if let Some(t) = &r.f.tracker {
                t.drop_all(r.f.file.as_fd());
            }
            let left = r.f.left_behind();
            if left < r.left {
                (r.left, r.since) = (left, Instant::now());
            }
            if left == 0 || r.since.elapsed() >= SETTLE {
                let r = self.retiring.remove(&key).expect("listed above");
                if left > 0 {
                    log::debug!(
                        "{}: {left} pages the streams brought in stay cached",
                        r.f.path.display()
                    );
                }
                self.report(r.f);
            }
        }
    }

    /// Count what `f`'s streams did, in the totals and the files' reports.
    fn report(&mut self, f: Followed) {
        self.stats.bytes_read += f.bytes_read;
        self.stats.bytes_written += f.bytes_written;
        let report = f.report();
        self.stats.pages_dropped += report.pages_dropped;
        if report.bytes_read + report.bytes_written > 0 {
            self.stats.files.push(report);
        }
    }

    /// The tree is gone or the caller leaves: write back what was written
    /// and wait for it (polling cachestat, never the program's descriptors),
    /// then drop everything the streams brought in. `deadline` bounds the
    /// wait for writeback; what is still dirty then is left to the kernel.
    pub fn finish(&mut self, deadline: Duration) -> FollowStats {
        let until = Instant::now() + deadline;
        for f in self.files.values_mut() {
            f.close();
        }
        loop {
            let mut busy = false;
            for f in self.files.values_mut() {
                if let Some(t) = &f.tracker {
                    busy |= t.drain(f.file.as_fd());
                }
            }
            self.submit_starts();
            if !busy || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for (key, f) in std::mem::take(&mut self.files) {
            self.retire(key, f);
        }
        while !self.retiring.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
            self.settle();
        }
        if self.stats.min_interval == Duration::MAX {
            self.stats.min_interval = Duration::ZERO;
        }
        self.stats.clone()
    }
}

/// How long after a process joined the tree the looks come at the shortest
/// interval. A new process opens its input within milliseconds and may read
/// it at several GB/s (a static Go or musl copy of partly cached input) before
/// the engine has seen it move: at the longest interval (10 ms) it passed up to
/// 40 MiB before the first sight, kept as others' pages when others' are cached
/// further on (3 of 20 runs of run_programs' pages_cached_before_stay_cached).
const JUST_JOINED: Duration = Duration::from_millis(50);

/// How many times a first sight measures a transfer's progress while the
/// transfer's pages reach past it.
const PROGRESS_LOOKS: usize = 3;

/// Residency at first sight: the whole file, once. The part the stream
/// may have passed already (`passed`: up to its position plus readahead,
/// plus, where pages reach past that, `progress()`: what a transfer under
/// way that moves no position may have read) cannot be told apart from
/// pages others had cached; it is taken as the
/// stream's own when the file goes on beyond it and nothing is cached there
/// (a cold file being streamed), and for a description open for writing,
/// chunk by chunk where pages are dirty or under writeback (fresh writes,
/// anywhere up to the end of file: a call under way writes past its
/// position). The rest is snapshotted: what is cached there stays (so a
/// small file read whole before the engine saw it, a program's own modules
/// say, is kept). Beyond the end of file nothing can be anybody else's: a
/// writer's new pages go ([`Followed::advance`] marks them as the file grows).
/// A file younger than its writer (`young`, [`born_after_start`]) is the
/// stream's whole: none of it can have been cached before.
fn snapshot_first_sight(
    t: &Tracker,
    file: &File,
    s: &Seen,
    size: u64,
    passed: u64,
    young: bool,
    mut progress: impl FnMut() -> u64,
) {
    let fd = file.as_fd();
    // Even at position 0 the first read (and its readahead) may be under way.
    let head_at = |passed: u64| passed.div_ceil(CHUNK) * CHUNK;
    let cold_past = |end: u64| {
        end < size && sys::cachestat(fd, FileRange::ToEnd(end)).is_ok_and(|c| c.nr_cache == 0)
    };
    let mut head_end = head_at(passed);
    let mut cold = young || cold_past(head_end);
    // A transfer under way goes on while it is measured (a GNU cp moved
    // 40 MiB past a measure in 1 of ~8 policy test runs, its pages then
    // kept as others' and left after exit): measured again while its
    // progress grows.
    let mut more = 0;
    for _ in 0..PROGRESS_LOOKS {
        if cold || head_end >= size {
            break;
        }
        let now = progress();
        if now <= more {
            break;
        }
        more = now;
        head_end = head_at(passed + more);
        cold = cold_past(head_end);
    }
    if cold {
        t.mark_cold(0..head_end);
        log::debug!(
            "pid {} fd {}: 0..{head_end} taken as the stream's",
            s.pid,
            s.fd
        );
    } else {
        log::debug!(
            "pid {} fd {}: pages cached past {head_end} (position and lookahead {passed}, a transfer's progress {more}): the cached pages taken as others'",
            s.pid,
            s.fd
        );
    }
    // Up to the end of file only: pages past it that appear later are the
    // tree's when its streams go there (`known_to`), else someone else's.
    t.snapshot_range(fd, 0..size);
    // Dirty pages are checked after the snapshot, not before: a write
    // under way at the position (the position moves when it returns, the
    // pages appear meanwhile) lands between any check made first and the
    // snapshot, which then kept it as others' (1 MiB of a Go copy's output
    // left cached after exit, 2 runs in 15).
    if is_writable(s.info.flags) {
        t.claim_dirty(fd, 0..head_end.max(size));
    }
}

/// Whether the file behind `fd` was created after process `pid` started
/// (statx's birth time against /proc/PID/stat's start time, both on the
/// wall clock): then no page of it was cached before the process began.
/// False where either cannot be had. Both times are coarse: the start in
/// clock ticks (10 ms), rounded down, the birth from the kernel's coarse
/// clock, up to a jiffy (10 ms at most) behind; so a file counts as
/// younger when it was made at most [`BIRTH_SLACK`] before the start (a
/// program's output is made within milliseconds of it).
fn born_after_start(fd: BorrowedFd<'_>, pid: u32) -> bool {
    let Ok(Some(birth)) = sys::statx_birth(fd) else {
        return false;
    };
    let Ok(stat) = procfs::pid_stat(pid) else {
        return false;
    };
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        return false;
    };
    let since_boot = Duration::from_nanos(stat.start_ticks * 1_000_000_000 / sys::clock_ticks());
    let boot = now.saturating_sub(sys::clock_boottime());
    birth + BIRTH_SLACK >= boot + since_boot
}

/// How much earlier than a process's start a file may seem to be made
/// and still be its own ([`born_after_start`]): one jiffy at HZ=100.
const BIRTH_SLACK: Duration = Duration::from_millis(10);

/// How far a file may reach past its writer's position while the writer
/// is at its end: one write call in flight, whose pages land before the
/// call moves the position (dd bs=1M's output was first seen 1 MiB past
/// dd's position in 5 of 60 daemon runs, and then not taken as young).
const WRITE_IN_FLIGHT: u64 = 16 << 20;

/// Open for writing (O_WRONLY or O_RDWR).
fn is_writable(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// Open for reading (O_RDONLY or O_RDWR).
fn is_readable(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_WRONLY
}

impl Followed {
    /// Apply what the descriptions of this file did since the last look;
    /// returns the largest distance one of them moved.
    fn moved(&mut self, seen: &[Seen], transfer: Option<u64>) -> u64 {
        self.transfer_written = None;
        let read_before = self.bytes_read;
        let mut obs: Vec<(u64, i32)> = seen.iter().map(|s| (s.info.pos, s.info.flags)).collect();
        obs.sort_unstable();
        obs.dedup_by_key(|o| o.0);
        let mut old = std::mem::take(&mut self.cursors);
        old.sort_unstable();
        let mut max = 0;
        for &(pos, flags) in &obs {
            // The description this one continues: the furthest old position
            // not past it (dups and forks share a description, hence a position).
            if let Some(i) = old.iter().rposition(|&c| c <= pos) {
                let from = old.remove(i);
                if pos > from {
                    max = max.max(pos - from);
                    self.advance_fresh(from, pos, flags);
                }
            }
            self.cursors.push(pos);
            self.writable |= is_writable(flags);
        }
        if max == 0 && !self.claimed {
            max = self.silent_step(&obs, transfer);
        }
        let furthest = obs.iter().map(|o| o.0).max().unwrap_or(0);
        if self.bytes_read > read_before
            && self.readahead.pending(seen)
            && self.read_ahead_of(furthest)
        {
            let front = self
                .silent
                .walked_to()
                .max(furthest + self.readahead.at(furthest));
            self.readahead.undo_sequential(seen, front);
        }
        max
    }

    /// Pages are cached past the furthest position: the kernel reads ahead
    /// of the readers (a POSIX_FADV_RANDOM reader has no readahead, and its
    /// advice is left alone: POSIX_FADV_NORMAL would undo it too).
    fn read_ahead_of(&self, furthest: u64) -> bool {
        let page = sys::page_size();
        self.tracker.is_some()
            && sys::cachestat(
                self.file.as_fd(),
                FileRange::ToEnd(furthest.div_ceil(page) * page),
            )
            .is_ok_and(|c| c.nr_cache > 0)
    }

    /// No position moved since the last look: a transfer that moves none
    /// may be under way. Find how far its pages reach ([`silent`]) and hand
    /// what it read or wrote to the policies. Returns the bytes handed.
    /// `transfer`: how far the transfer of the reading process got in its
    /// one destination written without motion (past that destination's
    /// position), which it read as far in this file.
    fn silent_step(&mut self, obs: &[(u64, i32)], transfer: Option<u64>) -> u64 {
        let Some(t) = &self.tracker else {
            return 0;
        };
        let fd = self.file.as_fd();
        let reader = obs.iter().any(|o| is_readable(o.1));
        let writer = obs.iter().any(|o| is_writable(o.1));
        let furthest = obs.iter().map(|o| o.0).max().unwrap_or(0);
        let size = match writer {
            true => sys::fstat(fd).ok().map(|st| st.st_size as u64),
            false => None,
        };
        let from = self.silent.start(furthest, size);
        let page = sys::page_size();
        let walk = silent::walk(
            from,
            writer,
            |r| t.residency(|res| res.precached_bytes(r)),
            |at| t.residency(|res| res.past_precached(at)),
            |r| {
                let c = sys::cachestat(fd, r).ok()?;
                Some(Pages {
                    cached: c.nr_cache * page,
                    dirty_writeback: (c.nr_dirty + c.nr_writeback) * page,
                })
            },
        );
        // Open for reading and writing: written where pages are dirty.
        let write = writer && (!reader || walk.dirty);
        let end = match write {
            true => size.unwrap_or(u64::MAX),
            // Past the end of file seen first, a reader's pages were
            // written by someone else.
            false => self.known_to,
        };
        // Readahead may have filled up to the lookahead past what the
        // transfer read; where its destination shows how far it read, no
        // further than that.
        let mut lookahead = self.readahead.at(walk.reach);
        if let Some(read_to) = transfer.filter(|_| !write).map(|t| furthest + t) {
            lookahead = lookahead.min(walk.reach.saturating_sub(read_to));
        }
        let handed = self.silent.infer(furthest, walk, write, end, lookahead);
        if write {
            self.transfer_written = self
                .silent
                .handed_to()
                .checked_sub(furthest)
                .filter(|&k| k > 0);
        }
        let Some(r) = handed else {
            return 0;
        };
        let flags = if write {
            libc::O_WRONLY
        } else {
            libc::O_RDONLY
        };
        log::trace!(
            "{}: silent {} {}..{} MiB (walk from {} MiB to {} MiB)",
            self.path.display(),
            if write { "write" } else { "read" },
            r.start >> 20,
            r.end >> 20,
            from >> 20,
            walk.reach >> 20
        );
        self.advance(r.start, r.end, flags);
        r.end - r.start
    }

    /// A position moved from `from` to `to`: hand the policies what the
    /// pages did not show already.
    fn advance_fresh(&mut self, from: u64, to: u64, flags: i32) {
        for r in self.silent.fresh(from..to) {
            self.advance(r.start, r.end, flags);
        }
    }

    /// No description of the file is open any more (or the engine leaves):
    /// what was written after the last look, or by a call whose position
    /// never came back (the program killed in it, or exiting right after
    /// it), went up to the end of file (positions are gone with the
    /// descriptors); start its writeback.
    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        if self.tracker.is_none() {
            return;
        }
        let fd = self.file.as_fd();
        let size = sys::fstat(fd).map_or(0, |st| st.st_size as u64);
        if self.writable && !self.claimed {
            let last = self.cursors.iter().copied().max().unwrap_or(0);
            let from = self.silent.start(last, Some(size));
            let written = self.bytes_written > 0
                || from >= self.known_to
                || sys::cachestat(fd, FileRange::at(from, size.saturating_sub(from)))
                    .is_ok_and(|c| c.nr_dirty + c.nr_writeback > 0);
            if size > from && written {
                self.advance_fresh(from, size, libc::O_WRONLY);
            }
        }
        let Some(t) = &self.tracker else {
            return;
        };
        // Whatever the tree wrote past the end of file seen first is new
        // (the shim's writes included, which the engine does not follow).
        let end = size.div_ceil(CHUNK) * CHUNK;
        if (self.writable || self.claimed) && end > self.known_to {
            t.mark_cold(self.known_to..end);
            self.known_to = end;
        }
        if !self.claimed {
            t.flush_nowait(self.file.as_fd());
        }
    }

    /// Note the file's dirty + writeback bytes now, if more than before.
    fn sample_dirty(&mut self) {
        if let Ok(c) = sys::cachestat(self.file.as_fd(), FileRange::WHOLE) {
            let bytes = (c.nr_dirty + c.nr_writeback) * sys::page_size();
            self.dirty_peak = self.dirty_peak.max(bytes);
        }
    }

    fn advance(&mut self, from: u64, to: u64, flags: i32) {
        let Some(t) = &self.tracker else {
            return;
        };
        let fd = self.file.as_fd();
        let n = to - from;
        if to > self.known_to {
            let end = to.div_ceil(CHUNK) * CHUNK;
            t.mark_cold(self.known_to..end);
            self.known_to = end;
        }
        let written = match flags & libc::O_ACCMODE {
            libc::O_WRONLY => true,
            libc::O_RDONLY => false,
            // Read and write: what is dirty behind it was written.
            _ => sys::cachestat(fd, FileRange::at(from, n))
                .is_ok_and(|c| c.nr_dirty + c.nr_writeback > 0),
        };
        if written {
            self.bytes_written += n;
            t.after_write_nowait(fd, from, n);
        } else {
            self.bytes_read += n;
            t.after_read(fd, from, n);
        }
    }

    /// Pages still cached where the streams' own pages were (the ranges a
    /// final drop takes).
    fn left_behind(&self) -> u64 {
        let Some(t) = &self.tracker else {
            return 0;
        };
        let fd = self.file.as_fd();
        t.residency(|r| r.all_droppable())
            .into_iter()
            .map(|r| sys::cachestat(fd, r).map_or(0, |c| c.nr_cache))
            .sum()
    }

    fn report(&self) -> FileReport {
        let (counts, preserved, blind) = match &self.tracker {
            Some(t) => {
                let (counts, preserved, blind, _) = t.report();
                (counts, preserved, blind)
            }
            None => Default::default(),
        };
        FileReport {
            path: self.path.clone(),
            managed: self.tracker.is_some(),
            why: self.why.clone(),
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            pages_dropped: counts.pages_dropped,
            pages_preserved: preserved,
            writeback_starts: counts.writeback_starts,
            residency_unknown: blind,
            tag: self.tag,
            dirty_peak: self.dirty_peak,
            own_cached: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use ubio::procfs::FdInfo;
    use ubio_testenv::skip as test_skip;

    const MIB: u64 = 1 << 20;

    /// Right after a process joined, whose streams are not known yet, the
    /// looks come at the shortest interval; once it has been there a while
    /// and nothing moves, at the longest.
    #[test]
    fn a_process_that_just_joined_is_looked_at_often() {
        let opts = FollowOptions::default();
        let mut f = Follower::new(opts);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        f.add_root(child.id());
        let first = f.look();
        std::thread::sleep(JUST_JOINED);
        let later = f.look();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(first, opts.min_interval);
        assert_eq!(later, opts.max_interval);
    }

    #[test]
    fn readahead_is_doubled_until_the_advice_is_undone_and_passed() {
        assert_eq!(Readahead::new(18 * MIB, false).at(0), 18 * MIB);
        let mut ra = Readahead::new(18 * MIB, true);
        assert_eq!(ra.at(u64::MAX - 1), 36 * MIB);
        ra.doubled_until = 100 * MIB;
        assert_eq!(ra.at(100 * MIB - 1), 36 * MIB);
        assert_eq!(ra.at(100 * MIB), 18 * MIB);
    }

    /// A cold file of `size` bytes in `dir`, open for reading.
    fn cold_file(dir: &Path, name: &str, size: u64) -> File {
        let path = dir.join(name);
        let mut f = File::create(&path).unwrap();
        let block = vec![7u8; MIB as usize];
        for _ in 0..size / MIB {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        sys::fadvise(f.as_fd(), 0, 0, sys::Advice::DontNeed).unwrap();
        File::open(&path).unwrap()
    }

    /// A copy that moves no position (copy_file_range with offsets, as
    /// cp's one call of the whole file moves none until it returns): its
    /// source is dropped behind as far as its destination was written,
    /// not only up to the readahead lookahead short of its pages' reach
    /// (which kept up to 36 MiB of GNU cp's input cached, and 72 MiB
    /// against the 64 MiB bound when a look came late).
    #[test]
    fn a_copys_source_is_dropped_as_far_as_its_destination_was_written() {
        const NAME: &str = "a_copys_source_is_dropped_as_far_as_its_destination_was_written";
        let python = match ubio_testenv::require_tool("python3") {
            Ok(p) => p,
            Err(e) => return test_skip(NAME, &format!("python3: {e}")),
        };
        let dir = tempfile::tempdir().unwrap();
        let size = 64 * MIB;
        let src = cold_file(dir.path(), "src", size);
        if probe::fs_caps(src.as_fd(), &sys::fstat(src.as_fd()).unwrap())
            .unwrap()
            .pages_are_storage
        {
            return test_skip(NAME, "the temporary directory is a tmpfs: no readahead");
        }
        // The program: 8 MiB a step with explicit offsets, a step per line
        // on its input, how far it got on its output.
        let script = "import os, sys\n\
            src = os.open(sys.argv[1], os.O_RDONLY)\n\
            dst = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n\
            print(0, flush=True)\n\
            off = 0\n\
            while off < os.fstat(src).st_size and sys.stdin.readline():\n\
            \x20   off += os.copy_file_range(src, dst, 8 << 20, off, off)\n\
            \x20   print(off, flush=True)\n";
        let mut child = std::process::Command::new(python)
            .args(["-c", script])
            .arg(dir.path().join("src"))
            .arg(dir.path().join("dst"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut copied = || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut output, &mut line).unwrap();
            line.trim().parse::<u64>().unwrap()
        };
        assert_eq!(copied(), 0, "the program opened its files");
        let opts = FollowOptions::default();
        let mut engine = Follower::new(opts);
        engine.add_root(child.id());
        engine.look();
        let mut kept = Vec::new();
        for _ in 0..size / (8 * MIB) {
            input.write_all(b"\n").unwrap();
            let at = copied();
            engine.look();
            // Behind the copy, less the lag drop-behind keeps and the
            // batch it drops at once (the library's 8 MiB).
            let behind = at.saturating_sub(opts.read_lag + 8 * MIB) / CHUNK * CHUNK;
            let c = sys::cachestat(src.as_fd(), FileRange::Bytes(0..behind)).unwrap();
            kept.push((at / MIB, c.nr_cache * sys::page_size() / MIB));
        }
        drop(input);
        child.wait().unwrap();
        engine.finish(Duration::from_secs(5));
        eprintln!("(MiB copied, MiB of the source cached behind it): {kept:?}");
        assert!(
            kept.iter().all(|&(_, cached)| cached == 0),
            "the source's pages the copy had read stayed cached: {kept:?}"
        );
    }

    /// The most that is cached ahead of the position while `f` is read
    /// from the start, 1 MiB at a time, for `len` bytes.
    fn most_ahead(f: &mut File, len: u64) -> u64 {
        let mut buf = vec![0u8; MIB as usize];
        let mut most = 0;
        for i in 1..=len / MIB {
            f.read_exact(&mut buf).unwrap();
            let c = sys::cachestat(f.as_fd(), FileRange::ToEnd(i * MIB)).unwrap();
            most = most.max(c.nr_cache * sys::page_size());
        }
        most
    }

    /// A writer's output written back before the engine first saw it: its
    /// clean pages are the stream's when the file is younger than the
    /// writer (dropped with the rest), and kept as others' when it is
    /// older (here: a process started after the file was made).
    #[test]
    fn a_writers_young_file_is_all_its_own_at_first_sight() {
        const NAME: &str = "a_writers_young_file_is_all_its_own_at_first_sight";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut out = File::create(&path).unwrap();
        let st = sys::fstat(out.as_fd()).unwrap();
        if probe::fs_caps(out.as_fd(), &st).unwrap().pages_are_storage {
            return test_skip(NAME, "the temporary directory is a tmpfs: no writeback");
        }
        if sys::statx_birth(out.as_fd()).unwrap().is_none() {
            return test_skip(
                NAME,
                "the temporary directory's filesystem keeps no birth time",
            );
        }
        let size = 24 * MIB;
        let block = vec![3u8; MIB as usize];
        for _ in 0..size / MIB {
            out.write_all(&block).unwrap();
        }
        out.sync_data().unwrap();
        // Past the slack and the clocks' coarseness (10 ms each).
        std::thread::sleep(BIRTH_SLACK * 5);
        let mut later = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let (me, them) = (std::process::id(), later.id());
        let young = born_after_start(out.as_fd(), me);
        let old = born_after_start(out.as_fd(), them);
        later.kill().unwrap();
        later.wait().unwrap();
        assert!(
            young,
            "made after this process started, not taken as younger"
        );
        assert!(!old, "made before the sleep started, taken as younger");
        let seen = Seen {
            pid: me,
            fd: out.as_raw_fd(),
            dev: st.st_dev,
            ino: st.st_ino,
            info: FdInfo {
                pos: size,
                flags: libc::O_WRONLY,
                mnt_id: 0,
                ino: st.st_ino,
            },
        };
        let cached = || sys::cachestat(out.as_fd(), FileRange::WHOLE).unwrap();
        for young in [false, true] {
            let cfg = TrackerConfig {
                window: 64 * MIB,
                read_lag: 0,
                lookahead: CHUNK,
                preserve_cached: true,
            };
            let t = Tracker::new(Caps::default(), cfg, residency::blindness(out.as_fd()));
            t.defer_starts();
            let c = cached();
            assert!(
                c.nr_cache > 0 && c.nr_dirty + c.nr_writeback == 0,
                "control: {c:?}"
            );
            snapshot_first_sight(&t, &out, &seen, size, size + CHUNK, young, || 0);
            t.drop_all(out.as_fd());
            let left = cached().nr_cache;
            eprintln!("young {young}: {left} pages left after the drop");
            match young {
                true => assert_eq!(left, 0, "the young file's clean pages kept as others'"),
                false => assert!(left * sys::page_size() >= size / 2, "others' pages dropped"),
            }
        }
    }

    /// What the engine does to a program's description: the program's
    /// POSIX_FADV_SEQUENTIAL doubled its readahead; undone through a
    /// duplicate (here of this process's own descriptor), readahead ahead
    /// of the reader goes back to two windows of the device's.
    #[test]
    fn undoing_the_advice_takes_readahead_back_to_the_devices() {
        const NAME: &str = "undoing_the_advice_takes_readahead_back_to_the_devices";
        let dir = tempfile::tempdir().unwrap();
        let size = 96 * MIB;
        let mut advised = cold_file(dir.path(), "advised", size);
        let mut undone = cold_file(dir.path(), "undone", size);
        let st = sys::fstat(undone.as_fd()).unwrap();
        let fs = probe::fs_caps(undone.as_fd(), &st).unwrap();
        let Some(kb) = fs
            .read_ahead_kb
            .filter(|&kb| kb > 0 && !fs.pages_are_storage)
        else {
            return test_skip(NAME, &format!("no readahead on {} here", fs.fs_type));
        };
        let window = kb * 1024;
        for f in [&advised, &undone] {
            sys::fadvise(f.as_fd(), 0, 0, sys::Advice::Sequential).unwrap();
        }
        let seen = Seen {
            pid: std::process::id(),
            fd: undone.as_raw_fd(),
            dev: st.st_dev,
            ino: st.st_ino,
            info: FdInfo {
                pos: 0,
                flags: libc::O_RDONLY,
                mnt_id: 0,
                ino: st.st_ino,
            },
        };
        let mut ra = Readahead::new(fs.lookahead(), true);
        ra.undo_sequential(std::slice::from_ref(&seen), 5 * MIB);
        assert_eq!(ra.doubled_until, 5 * MIB + 2 * fs.lookahead());
        let read = 64 * MIB;
        let (a, u) = (
            most_ahead(&mut advised, read),
            most_ahead(&mut undone, read),
        );
        eprintln!(
            "ahead of the reader (read_ahead_kb {kb}): advised {} MiB, undone {} MiB",
            a / MIB,
            u / MIB
        );
        assert!(a > 2 * window, "the advice did not double readahead: {a}");
        assert!(u <= 2 * window + CHUNK, "readahead still doubled: {u}");
        // A description already undone is not touched again; one that
        // cannot be reached keeps the doubled lookahead.
        let gone = Seen { fd: -1, ..seen };
        ra.undo_sequential(&[gone], 5 * MIB);
        assert_eq!(ra.doubled_until, u64::MAX);
    }
}
