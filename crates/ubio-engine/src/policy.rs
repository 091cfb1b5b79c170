//! The engine of `ubio policy`: the contract for every process of some
//! scopes, machine-wide. The same [`Follower`] as `ubio run` follows the
//! files (positions, the library's Tracker, drop-behind and write-behind);
//! what changes is where its processes come from: [`discover`] finds them
//! (fanotify events, or the scope's cgroups polled), [`scope`] decides
//! about each process and each file, and a process is followed only while
//! it has a file in scope open.
//!
//! What it does to a file is what `ubio run`'s engine does: it never reads
//! or writes the data, only calls fadvise, sync_file_range, cachestat and
//! mincore on its own read-only descriptor of it (and, to undo a reader's
//! POSIX_FADV_SEQUENTIAL, POSIX_FADV_NORMAL on the reader's description).

use crate::discover::{self, Fanotify, MarkKind, Marked};
use crate::lateness::Lateness;
use crate::scope::{FileVerdict, ProcessFacts, ProcessVerdict, Scopes};
use crate::{Admit, Candidate, FileReport, FollowOptions, Follower};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use ubio::sys::{self, EventMask, FanEvent};

/// How processes are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryMode {
    /// fanotify where it can be used, else polling (and saying why).
    Auto,
    /// fanotify or fail.
    Fanotify,
    /// Poll the scope's cgroups (or /proc) every `poll_interval`.
    Poll,
}

/// How the policy runs.
#[derive(Debug, Clone, Copy)]
pub struct PolicyOptions {
    pub discovery: DiscoveryMode,
    pub marks: MarkKind,
    pub poll_interval: Duration,
    pub follow: FollowOptions,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            discovery: DiscoveryMode::Auto,
            marks: MarkKind::Filesystem,
            poll_interval: Duration::from_millis(500),
            follow: FollowOptions {
                sample_dirty: true,
                // No shim strips the programs' advice here.
                sequential_readahead: true,
                ..FollowOptions::default()
            },
        }
    }
}

/// Whose files these are: the ids /proc/PID's access check compares (real,
/// effective, saved), of the process the file was first seen in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub uids: [u32; 3],
    pub gids: [u32; 3],
}

impl Owner {
    /// Whether a reader with this uid and gid could read the process's
    /// /proc/PID/fd itself (root can; others only if every uid and gid of
    /// the process is theirs, as the kernel's ptrace access check wants).
    pub fn readable_by(&self, uid: u32, gid: u32) -> bool {
        uid == 0 || (self.uids.iter().all(|&u| u == uid) && self.gids.iter().all(|&g| g == gid))
    }
}

/// Figures of the files of one scope (and one owner).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub files: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub pages_dropped: u64,
    /// Pages kept because others had them cached before.
    pub pages_kept: u64,
    pub dirty_peak_bytes: u64,
}

impl Totals {
    /// One file's figures.
    fn of(r: &FileReport) -> Totals {
        Totals {
            files: 1,
            bytes_read: r.bytes_read,
            bytes_written: r.bytes_written,
            pages_dropped: r.pages_dropped,
            pages_kept: r.pages_preserved,
            dirty_peak_bytes: r.dirty_peak,
        }
    }

    fn merge(&mut self, o: &Totals) {
        self.files += o.files;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.pages_dropped += o.pages_dropped;
        self.pages_kept += o.pages_kept;
        self.dirty_peak_bytes = self.dirty_peak_bytes.max(o.dirty_peak_bytes);
    }
}

/// A file managed now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveFile {
    pub path: PathBuf,
    pub scope: String,
    pub owner: Owner,
    pub figures: Totals,
    /// Bytes of the streams' own pages cached now.
    #[serde(default)]
    pub own_cached_bytes: u64,
}

/// Figures of one scope's owner: finished files and files managed now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerTotals {
    pub scope: String,
    pub owner: Owner,
    pub finished: Totals,
}

/// Everything the daemon knows about itself, for `ubio policy status`
/// (filtered per reader by [`Status::for_reader`]) and its log at exit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    pub uptime_s: f64,
    /// "fanotify" or "poll"; `why_poll` says why polling, if it does.
    pub discovery: String,
    pub why_poll: Option<String>,
    pub marks: Vec<Marked>,
    pub events: u64,
    pub events_per_s: f64,
    pub overflows: u64,
    pub scans: u64,
    pub quieted_inodes: u64,
    pub processes_followed: u64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// The scopes' names, in the configuration's order.
    pub scopes: Vec<String>,
    /// A dry run: the figures are what the daemon would have dropped and
    /// written back; it changed nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// How late the engine's due looks came.
    #[serde(default)]
    pub lateness: Lateness,
    pub owners: Vec<OwnerTotals>,
    pub files: Vec<LiveFile>,
    /// Filled by [`Status::for_reader`] for a reader who is not root: the
    /// machine-wide figures (events, marks, processes) are left out.
    pub restricted: bool,
}

/// One scope's figures in a [`Status`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeFigures {
    pub name: String,
    pub managed_now: u64,
    /// Finished and managed-now files together.
    pub totals: Totals,
}

impl Status {
    /// What a reader with `uid`/`gid` may see: for root everything; for
    /// others only the files (and their figures) of processes whose
    /// /proc/PID/fd they could read themselves, and the daemon's own CPU.
    pub fn for_reader(&self, uid: u32, gid: u32) -> Status {
        if uid == 0 {
            return self.clone();
        }
        Status {
            marks: Vec::new(),
            events: 0,
            events_per_s: 0.0,
            overflows: 0,
            scans: 0,
            quieted_inodes: 0,
            processes_followed: 0,
            why_poll: None,
            owners: self
                .owners
                .iter()
                .filter(|o| o.owner.readable_by(uid, gid))
                .cloned()
                .collect(),
            files: self
                .files
                .iter()
                .filter(|f| f.owner.readable_by(uid, gid))
                .cloned()
                .collect(),
            restricted: true,
            ..self.clone()
        }
    }

    /// Per scope: files managed now and the totals (finished + now).
    pub fn per_scope(&self) -> Vec<ScopeFigures> {
        let mut names = self.scopes.clone();
        for o in &self.owners {
            if !names.contains(&o.scope) {
                names.push(o.scope.clone()); // a scope removed by a reload
            }
        }
        names
            .into_iter()
            .map(|name| {
                let mut f = ScopeFigures {
                    name: name.clone(),
                    ..ScopeFigures::default()
                };
                for o in self.owners.iter().filter(|o| o.scope == name) {
                    f.totals.merge(&o.finished);
                }
                for l in self.files.iter().filter(|l| l.scope == name) {
                    f.managed_now += 1;
                    let mut t = l.figures.clone();
                    t.files = 1;
                    f.totals.merge(&t);
                }
                f
            })
            .collect()
    }
}

/// A process followed: the scopes it is in and whose it is.
struct Member {
    scopes: Vec<usize>,
    owner: Owner,
    /// Its last event (or when a scan took it): it stays followed for
    /// [`MEMBER_GRACE`] after, files or not.
    last_event: Instant,
}

/// The policy: scopes, discovery and the engine.
pub struct Policy {
    scopes: Scopes,
    opts: PolicyOptions,
    follower: Follower,
    fan: Option<Fanotify>,
    /// Why the scope's processes are polled (None: they are not).
    why_poll: Option<String>,
    marks: Vec<Marked>,
    members: HashMap<u32, Member>,
    /// Processes judged out of every scope, and when: their events are
    /// not judged again for [`OUTSIDE_FOR`] (or until they exec). A
    /// server out of scope that opens files thousands of times a second
    /// would otherwise cost three reads of /proc per batch of its events.
    outside: HashMap<u32, Instant>,
    /// When the event queue is read next after a read that found events.
    events_due: Option<Instant>,
    /// Tag - 1 -> (scope name, owner) of the files admitted with it.
    tags: Vec<(String, Owner)>,
    finished: HashMap<u64, Totals>,
    events: u64,
    overflows: u64,
    scans: u64,
    quieted: u64,
    next_poll: Instant,
    next_mounts: Instant,
    /// (when, events so far), one a second, for the events per second.
    rate: VecDeque<(Instant, u64)>,
    started: Instant,
    own_pid: u32,
    /// Lines for the log: what discovery uses and why, overflows, scans.
    notices: Vec<String>,
    quiet_said: bool,
}

/// How often new mounts are looked for (fanotify: a new filesystem must
/// be marked to be seen).
const MOUNTS_EVERY: Duration = Duration::from_secs(2);
/// The longest wait when nothing is followed.
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// How long a process stays followed after its last event with no file
/// of the scope's open. The open's event comes before the descriptor is
/// in the process's table: a look right after it finds nothing, and a
/// process whose only file was quieted (read before by one out of scope)
/// sends no other event; dropped at that look, it was never followed
/// (sha256sum in the 6.12 guest's policy test, its input left cached).
const MEMBER_GRACE: Duration = Duration::from_millis(100);
/// How long a verdict "out of every scope" is kept for a process that
/// does not exec. What can change without an exec (a process moved into
/// a scope's cgroup, a setuid) is seen this late at most.
const OUTSIDE_FOR: Duration = Duration::from_secs(1);
/// After a read that found events, the next waits this long: a flood of
/// events (a server out of scope opening files) is read in batches, and
/// its events queue without waking the daemon each time, which would cost
/// the server more than the event itself. A quiet queue is read at once.
const EVENT_BATCH: Duration = Duration::from_millis(2);
/// Reads of the event queue per step, so the engine keeps looking during
/// a flood.
const READS_PER_STEP: usize = 64;

impl Policy {
    /// Start: set up discovery (the reasons are in [`take_notices`](Self::take_notices))
    /// and take the processes of the scopes that run already.
    pub fn start(scopes: Scopes, opts: PolicyOptions) -> io::Result<Policy> {
        let now = Instant::now();
        let mut p = Policy {
            scopes,
            opts,
            follower: Follower::listed(opts.follow),
            fan: None,
            why_poll: None,
            marks: Vec::new(),
            members: HashMap::new(),
            outside: HashMap::new(),
            events_due: None,
            tags: Vec::new(),
            finished: HashMap::new(),
            events: 0,
            overflows: 0,
            scans: 0,
            quieted: 0,
            next_poll: now,
            next_mounts: now + MOUNTS_EVERY,
            rate: VecDeque::new(),
            started: now,
            own_pid: std::process::id(),
            notices: Vec::new(),
            quiet_said: false,
        };
        p.set_up_discovery()?;
        p.scan("start");
        Ok(p)
    }

    fn set_up_discovery(&mut self) -> io::Result<()> {
        self.fan = None;
        self.why_poll = None;
        self.marks.clear();
        if self.opts.discovery == DiscoveryMode::Poll {
            self.why_poll = Some("discovery = \"poll\" in the configuration".into());
        } else {
            match Fanotify::open() {
                Ok(mut f) => {
                    let prefixes = self.scopes.path_prefixes();
                    self.marks = f.mark(prefixes.as_deref(), self.opts.marks);
                    let refused: Vec<String> = self
                        .marks
                        .iter()
                        .filter_map(|m| {
                            let why = m.how.as_ref().err()?;
                            Some(format!("{} ({}): {why}", m.path.display(), m.fstype))
                        })
                        .collect();
                    let marked = self.marks.iter().filter(|m| m.how.is_ok()).count();
                    if !refused.is_empty() {
                        self.why_poll =
                            Some(format!("fanotify marks refused on {}", refused.join("; ")));
                    }
                    if marked == 0 {
                        self.why_poll
                            .get_or_insert_with(|| "no filesystem to mark".into());
                    } else {
                        if !f.pidfds {
                            self.notices.push(
                                "fanotify: events carry pids, not pidfds (Linux < 5.15)".into(),
                            );
                        }
                        self.fan = Some(f);
                    }
                }
                Err(why) => self.why_poll = Some(why),
            }
            if self.opts.discovery == DiscoveryMode::Fanotify {
                if let Some(why) = &self.why_poll {
                    return Err(io::Error::other(format!("discovery = \"fanotify\": {why}")));
                }
            }
        }
        for m in &self.marks {
            self.notices.push(mark_notice(m, ""));
        }
        if let Some(why) = &self.why_poll {
            self.notices.push(format!(
                "polling the scopes' processes every {} ms: {why}",
                self.opts.poll_interval.as_millis()
            ));
        }
        Ok(())
    }

    /// Take a new set of scopes and options (a reload): the processes
    /// followed are judged again, discovery is set up anew (marks may
    /// differ) and the scopes' processes are scanned once (events between
    /// the two groups are lost). If discovery cannot be set up as asked,
    /// the old scopes and options are restored and the error returned.
    pub fn reload(&mut self, scopes: Scopes, opts: PolicyOptions) -> io::Result<()> {
        let old = (std::mem::replace(&mut self.scopes, scopes), self.opts);
        self.opts = PolicyOptions {
            follow: self.opts.follow,
            ..opts
        };
        if let Err(e) = self.set_up_discovery() {
            (self.scopes, self.opts) = old;
            self.set_up_discovery()?;
            return Err(e);
        }
        self.outside.clear();
        let pids: Vec<u32> = self.members.keys().copied().collect();
        for pid in pids {
            self.members.remove(&pid);
            if self.consider(pid, None).is_none() {
                self.follower.remove(pid);
            }
        }
        self.scan("reload");
        Ok(())
    }

    /// The descriptor to wait on for events: None when polling only, and
    /// for [`EVENT_BATCH`] after a read that found events.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        let due = self.events_due.is_none_or(|d| Instant::now() >= d);
        self.fan.as_ref().filter(|_| due).map(|f| f.fd())
    }

    /// Lines for the log since the last call.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Read the events, poll if due, look once; returns how long to wait
    /// (for events or the next look).
    pub fn step(&mut self) -> Duration {
        let now = Instant::now();
        self.read_events();
        if self.why_poll.is_some() && now >= self.next_poll {
            self.next_poll = now + self.opts.poll_interval;
            self.scan("poll");
        }
        if self.fan.is_some() && now >= self.next_mounts {
            self.next_mounts = now + MOUNTS_EVERY;
            self.mark_new_mounts();
        }
        let mut wait = IDLE_WAIT;
        if !self.members.is_empty() || self.follower.following() > 0 {
            wait = self.look();
        }
        if self.why_poll.is_some() {
            wait = wait.min(self.next_poll.saturating_duration_since(Instant::now()));
        }
        if self.fan.is_some() {
            wait = wait.min(self.next_mounts.saturating_duration_since(Instant::now()));
        }
        if let Some(d) = self.events_due {
            wait = wait.min(d.saturating_duration_since(Instant::now()));
        }
        self.each_second(now);
        wait
    }

    fn look(&mut self) -> Duration {
        let (scopes, members, tags) = (&self.scopes, &self.members, &mut self.tags);
        let mut admit = |c: &Candidate<'_>| -> Admit {
            let Some(m) = members.get(&c.pid) else {
                return Admit::Skip {
                    why: "its process is not in scope".into(),
                    recheck: false,
                };
            };
            match scopes.file(&m.scopes, c.path, c.size) {
                FileVerdict::In(i) => {
                    let s = &scopes.scopes[i];
                    Admit::Follow {
                        tag: intern(tags, &s.name, m.owner),
                        window: s.window,
                    }
                }
                FileVerdict::TooSmall(why) => Admit::Skip {
                    why,
                    recheck: c.writable(),
                },
                FileVerdict::OutForAll(why) | FileVerdict::Out(why) => Admit::Skip {
                    why,
                    recheck: false,
                },
            }
        };
        let wait = self.follower.look_admitting(Some(&mut admit));
        // A process with nothing of the scope's open is no longer looked
        // at (its next event, or the next poll, brings it back), once its
        // last event is [`MEMBER_GRACE`] old.
        let idle: Vec<u32> = self
            .members
            .iter()
            .filter(|(&p, m)| !self.follower.has_files(p) && m.last_event.elapsed() >= MEMBER_GRACE)
            .map(|(&p, _)| p)
            .collect();
        for pid in idle {
            self.members.remove(&pid);
            self.follower.remove(pid);
        }
        let done = self.follower.take_finished();
        self.count_finished(done);
        wait
    }

    fn read_events(&mut self) {
        self.events_due = None;
        for _ in 0..READS_PER_STEP {
            let Some(fan) = self.fan.as_mut() else {
                return;
            };
            let events = match fan.read() {
                Ok(e) if e.is_empty() => return,
                Ok(e) if self.events_due.is_none() => {
                    self.events_due = Some(Instant::now() + EVENT_BATCH);
                    e
                }
                Ok(e) => e,
                Err(e) => {
                    self.notices
                        .push(format!("fanotify: reading events failed: {e}"));
                    return;
                }
            };
            for e in events {
                self.on_event(e);
            }
        }
    }

    fn on_event(&mut self, e: FanEvent) {
        self.events += 1;
        if e.mask.contains(EventMask::Q_OVERFLOW) {
            self.overflows += 1;
            self.notices.push(
                "fanotify: the event queue overflowed (events were lost); scanning the scopes' processes once"
                    .into(),
            );
            self.scan("overflow");
            return;
        }
        let Some(file) = e.file else {
            return;
        };
        if e.pid == self.own_pid || e.pid == 0 {
            return;
        }
        match self.members.get_mut(&e.pid) {
            Some(m) => m.last_event = Instant::now(),
            None => self.judge(e.pid, e.mask, e.pidfd.as_ref().map(|p| p.as_fd())),
        }
        // Once a file was read or written, its reads and writes need no
        // more events: out of scope, it stays so for this process, and the
        // engine follows it by its position if in scope. Opens still come:
        // a process in scope that opens it later is found then.
        if e.mask.intersects(discover::QUIET) {
            if let Some(fan) = self.fan.as_mut() {
                if fan.quiet(&file, true) {
                    self.quieted += 1;
                } else if !self.quiet_said {
                    self.quiet_said = true;
                    self.notices.push(
                        "fanotify: evictable ignore marks are not available (Linux < 5.19): \
                         every read and write on the watched filesystems costs an event"
                            .into(),
                    );
                }
            }
        }
    }

    /// Judge the process of an event that is not followed, unless it was
    /// judged out of every scope lately and has not exec'd since.
    fn judge(&mut self, pid: u32, mask: EventMask, pidfd: Option<BorrowedFd<'_>>) {
        let now = Instant::now();
        let exec = mask.contains(EventMask::OPEN_EXEC);
        let fresh = |t: &Instant| now.duration_since(*t) < OUTSIDE_FOR;
        if !exec && self.outside.get(&pid).is_some_and(fresh) {
            return;
        }
        self.outside.remove(&pid);
        let taken = self.consider(pid, pidfd).is_some();
        // At an exec's open the process may still be the program before
        // it: that verdict is not kept. Without exec events none is.
        let execs_seen = self.fan.as_ref().is_some_and(|f| f.exec_events);
        if !taken && !exec && execs_seen {
            self.outside.insert(pid, now);
        }
    }

    /// Judge process `pid`; follow it if a scope takes it. `pidfd`, when
    /// the event had one, proves the facts read belong to that process
    /// (still alive after they were read: its pid was not reused).
    fn consider(&mut self, pid: u32, pidfd: Option<BorrowedFd<'_>>) -> Option<&Member> {
        if pid == self.own_pid {
            return None;
        }
        let mut facts = ProcessFacts::new(pid);
        let ProcessVerdict::In(scopes) = self.scopes.process(&mut facts) else {
            return None;
        };
        let (uids, gids) = facts.id_sets();
        if let Some(fd) = pidfd {
            if sys::poll_readable(fd, Duration::ZERO).unwrap_or(true) {
                return None; // exited (its pid may be another's by now)
            }
        }
        if !self.members.contains_key(&pid) {
            self.follower.add_root(pid);
        }
        self.members.insert(
            pid,
            Member {
                scopes,
                owner: Owner { uids, gids },
                last_event: Instant::now(),
            },
        );
        self.members.get(&pid)
    }

    /// Take every process of the scopes that is not followed yet (at the
    /// start, after an overflow or a reload, and each poll).
    fn scan(&mut self, _why: &str) {
        self.scans += 1;
        let patterns = self.scopes.cgroup_patterns();
        for pid in discover::scope_pids(patterns.as_deref()) {
            if !self.members.contains_key(&pid) {
                self.consider(pid, None);
            }
        }
    }

    fn mark_new_mounts(&mut self) {
        let Some(fan) = self.fan.as_mut() else {
            return;
        };
        let prefixes = self.scopes.path_prefixes();
        for m in fan.mark(prefixes.as_deref(), self.opts.marks) {
            self.notices.push(mark_notice(&m, " (mounted since)"));
            if m.how.is_err() {
                self.why_poll.get_or_insert_with(|| {
                    format!("fanotify marks refused on {}", m.path.display())
                });
            }
            self.marks.push(m);
        }
    }

    /// Once a second: a sample of the events so far (for the rate), and
    /// the verdicts "out of every scope" that expired are forgotten.
    fn each_second(&mut self, now: Instant) {
        if self
            .rate
            .back()
            .is_none_or(|(t, _)| now - *t >= Duration::from_secs(1))
        {
            self.rate.push_back((now, self.events));
            while self.rate.len() > 11 {
                self.rate.pop_front();
            }
            self.outside
                .retain(|_, t| now.duration_since(*t) < OUTSIDE_FOR);
        }
    }

    /// The figures now.
    pub fn status(&self) -> Status {
        let (user, system) = sys::cpu_time(sys::Usage::Process).unwrap_or_default();
        let events_per_s = match (self.rate.front(), self.rate.back()) {
            (Some((t0, e0)), Some((t1, e1))) if t1 > t0 => {
                (e1 - e0) as f64 / (*t1 - *t0).as_secs_f64()
            }
            _ => 0.0,
        };
        let tag = |t: u64| self.tags.get((t as usize).wrapping_sub(1)).cloned();
        let mut owners: Vec<OwnerTotals> = self
            .finished
            .iter()
            .filter_map(|(t, tot)| {
                let (scope, owner) = tag(*t)?;
                Some(OwnerTotals {
                    scope,
                    owner,
                    finished: tot.clone(),
                })
            })
            .collect();
        owners.sort_by(|a, b| (&a.scope, a.owner.uids).cmp(&(&b.scope, b.owner.uids)));
        let mut files: Vec<LiveFile> = self
            .follower
            .live()
            .into_iter()
            .filter(|r| r.managed)
            .filter_map(|r| {
                let (scope, owner) = tag(r.tag)?;
                let figures = Totals::of(&r);
                Some(LiveFile {
                    path: r.path,
                    scope,
                    owner,
                    figures,
                    own_cached_bytes: r.own_cached,
                })
            })
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Status {
            pid: self.own_pid,
            uptime_s: self.started.elapsed().as_secs_f64(),
            discovery: if self.fan.is_some() {
                "fanotify"
            } else {
                "poll"
            }
            .into(),
            why_poll: self.why_poll.clone(),
            marks: self.marks.clone(),
            events: self.events,
            events_per_s,
            overflows: self.overflows,
            scans: self.scans,
            quieted_inodes: self.quieted,
            processes_followed: self.members.len() as u64,
            cpu_user_s: user.as_secs_f64(),
            cpu_system_s: system.as_secs_f64(),
            scopes: self.scopes.scopes.iter().map(|s| s.name.clone()).collect(),
            dry_run: self.opts.follow.dry_run,
            lateness: self.follower.lateness().clone(),
            owners,
            files,
            restricted: false,
        }
    }

    /// Stop: write back what was written and drop what the streams brought
    /// in (waiting at most `deadline` for writeback), then the figures.
    pub fn finish(&mut self, deadline: Duration) -> Status {
        let stats = self.follower.finish(deadline);
        self.count_finished(stats.files);
        self.members.clear();
        self.status()
    }

    /// Add finished files to their scope's and owner's figures.
    fn count_finished(&mut self, files: Vec<FileReport>) {
        for r in files {
            self.finished
                .entry(r.tag)
                .or_default()
                .merge(&Totals::of(&r));
        }
    }
}

/// The log line about a filesystem marked (or not).
fn mark_notice(m: &Marked, when: &str) -> String {
    match &m.how {
        Ok(how) => format!(
            "watching {} ({}) with a {how} mark{when}",
            m.path.display(),
            m.fstype
        ),
        Err(why) => format!(
            "not watching {} ({}){when}: {why}",
            m.path.display(),
            m.fstype
        ),
    }
}

/// The tag of (scope, owner), made on first use.
fn intern(tags: &mut Vec<(String, Owner)>, scope: &str, owner: Owner) -> u64 {
    let i = match tags.iter().position(|(s, o)| s == scope && *o == owner) {
        Some(i) => i,
        None => {
            tags.push((scope.to_string(), owner));
            tags.len() - 1
        }
    };
    i as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(u: u32, g: u32) -> Owner {
        Owner {
            uids: [u; 3],
            gids: [g; 3],
        }
    }

    #[test]
    fn readers_see_only_what_proc_would_show_them() {
        let t = |n| Totals {
            files: 1,
            bytes_read: n,
            ..Totals::default()
        };
        let st = Status {
            pid: 1,
            uptime_s: 1.0,
            discovery: "fanotify".into(),
            why_poll: None,
            marks: vec![],
            events: 10,
            events_per_s: 1.0,
            overflows: 0,
            scans: 1,
            quieted_inodes: 3,
            processes_followed: 2,
            cpu_user_s: 0.1,
            cpu_system_s: 0.1,
            scopes: vec!["s".into()],
            dry_run: false,
            lateness: Lateness::default(),
            owners: vec![
                OwnerTotals {
                    scope: "s".into(),
                    owner: owner(1000, 1000),
                    finished: t(5),
                },
                OwnerTotals {
                    scope: "s".into(),
                    owner: owner(1001, 1001),
                    finished: t(7),
                },
            ],
            files: vec![LiveFile {
                path: "/x".into(),
                scope: "s".into(),
                owner: Owner {
                    uids: [1000, 0, 0],
                    gids: [1000; 3],
                },
                figures: t(1),
                own_cached_bytes: 0,
            }],
            restricted: false,
        };
        assert_eq!(st.for_reader(0, 0), st);
        let v = st.for_reader(1000, 1000);
        assert!(v.restricted && v.events == 0 && v.processes_followed == 0);
        assert_eq!(v.owners.len(), 1);
        assert_eq!(v.owners[0].finished.bytes_read, 5);
        // A setuid-root process of user 1000 is not readable by 1000.
        assert!(v.files.is_empty());
        assert_eq!(v.per_scope()[0].totals.bytes_read, 5);
        assert_eq!(st.per_scope()[0].totals.bytes_read, 13);
        assert_eq!(st.per_scope()[0].managed_now, 1);
        assert!(st.for_reader(1002, 1002).per_scope()[0].totals == Totals::default());
    }
}
