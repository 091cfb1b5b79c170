//! How `ubio policy` finds the processes whose files to follow, instead of
//! a process tree: fanotify marks on the filesystems the scopes can reach
//! (every read, write, open and close there reported with the pid and the
//! file), or, where fanotify cannot be used, a list of the scope's
//! processes read from their cgroups (or /proc) now and then.
//!
//! Inodes found out of scope are silenced with evictable ignore marks
//! ("quiet"): their reads and writes stop costing events, while opens and
//! closes are still reported, so a process in scope that opens one later
//! is still found.

use crate::scope::CgroupPattern;
use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use ubio::mounts::{self, Mount};
use ubio::sys::{self, EventMask, FanEvent, FanInit, MarkFlags};

/// What a filesystem mark covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// The whole filesystem, through every mount of it (Linux 4.20+).
    Filesystem,
    /// One mount: accesses through other mounts of the same filesystem
    /// (bind mounts, a container's view) are not seen.
    Mount,
}

impl MarkKind {
    pub fn name(self) -> &'static str {
        match self {
            MarkKind::Filesystem => "filesystem",
            MarkKind::Mount => "mount",
        }
    }

    fn flag(self) -> MarkFlags {
        match self {
            MarkKind::Filesystem => MarkFlags::FILESYSTEM,
            MarkKind::Mount => MarkFlags::MOUNT,
        }
    }
}

/// A filesystem the daemon watches or tried to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Marked {
    pub path: PathBuf,
    pub fstype: String,
    /// "filesystem" or "mount"; or why neither could be marked.
    pub how: Result<String, String>,
}

/// The events a watched filesystem reports.
const WATCH: EventMask = EventMask(
    EventMask::ACCESS.0
        | EventMask::MODIFY.0
        | EventMask::OPEN.0
        | EventMask::CLOSE_WRITE.0
        | EventMask::CLOSE_NOWRITE.0,
);
/// [`WATCH`] with execs, where the kernel has them (5.0+): an exec changes
/// what a process is, so the policy judges it again then.
const WATCH_EXECS: EventMask = EventMask(WATCH.0 | EventMask::OPEN_EXEC.0);
/// What a quiet inode no longer reports.
pub const QUIET: EventMask = EventMask(EventMask::ACCESS.0 | EventMask::MODIFY.0);

/// A fanotify group watching filesystems.
pub struct Fanotify {
    group: OwnedFd,
    buf: Vec<u8>,
    /// Events carry pidfds (Linux 5.15+).
    pub pidfds: bool,
    /// Evictable ignore marks work (Linux 5.19+); else nothing is quieted
    /// (an ignore mark that pins its inode would fill memory).
    quiet_works: Option<bool>,
    /// st_dev of the filesystems (or mount ids) marked.
    marked: HashSet<(u32, u32, u64)>,
    /// Execs are reported ([`EventMask::OPEN_EXEC`]); false once a mark
    /// asking for them was refused as invalid (Linux < 5.0).
    pub exec_events: bool,
}

impl Fanotify {
    /// A new group; the error says why fanotify cannot be used here.
    pub fn open() -> Result<Fanotify, String> {
        let base = FanInit::CLASS_NOTIF | FanInit::CLOEXEC | FanInit::NONBLOCK;
        let f_flags = libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC;
        let (group, pidfds) = match sys::fanotify_init(base | FanInit::REPORT_PIDFD, f_flags) {
            Ok(g) => (g, true),
            // Before 5.15: no pidfds, pids only.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (
                sys::fanotify_init(base, f_flags).map_err(|e| init_error(&e))?,
                false,
            ),
            Err(e) => return Err(init_error(&e)),
        };
        Ok(Fanotify {
            group,
            // About 500 events a read: each holds two descriptors (the file
            // and a pidfd) until it is handled.
            buf: vec![0u8; 16 << 10],
            pidfds,
            quiet_works: None,
            marked: HashSet::new(),
            exec_events: true,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.group.as_fd()
    }

    /// Mark the filesystems that hold `paths` (None: every mounted
    /// filesystem that holds file data) with `kind` marks, falling back to
    /// a mount mark where a filesystem mark is refused. Only filesystems
    /// not marked yet are tried: call it again to take new mounts.
    pub fn mark(&mut self, paths: Option<&[PathBuf]>, kind: MarkKind) -> Vec<Marked> {
        let mounts = mounts::mounts().unwrap_or_default();
        let targets: Vec<(PathBuf, &Mount)> = match paths {
            Some(paths) => paths
                .iter()
                .filter_map(|p| Some((p.clone(), mount_of(&mounts, p)?)))
                .collect(),
            None => mounts
                .iter()
                .filter(|m| !mounts::holds_no_file_data(&m.fstype))
                .map(|m| (m.mount_point.clone(), m))
                .collect(),
        };
        let mut out = Vec::new();
        for (path, m) in targets {
            let key = match kind {
                MarkKind::Filesystem => (m.dev.0, m.dev.1, 0),
                MarkKind::Mount => (m.dev.0, m.dev.1, m.id),
            };
            if mounts::holds_no_file_data(&m.fstype) || !self.marked.insert(key) {
                continue;
            }
            let how = self.mark_one(&path, kind);
            if how.is_err() {
                self.marked.remove(&key);
            }
            out.push(Marked {
                path,
                fstype: m.fstype.clone(),
                how,
            });
        }
        out
    }

    fn mark_one(&mut self, path: &Path, kind: MarkKind) -> Result<String, String> {
        let mut try_mark = |k: MarkKind| {
            let mask = if self.exec_events { WATCH_EXECS } else { WATCH };
            let flags = MarkFlags::ADD | k.flag();
            match sys::fanotify_mark(self.group.as_fd(), flags, mask, path) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.exec_events => {
                    self.exec_events = false;
                    sys::fanotify_mark(self.group.as_fd(), flags, WATCH, path)
                }
                r => r,
            }
        };
        match try_mark(kind) {
            Ok(()) => Ok(kind.name().into()),
            Err(e) if kind == MarkKind::Filesystem => match try_mark(MarkKind::Mount) {
                Ok(()) => Ok(format!("mount (a filesystem mark was refused: {e})")),
                Err(e2) => Err(format!("refused: filesystem mark: {e}; mount mark: {e2}")),
            },
            Err(e) => Err(format!("refused: mount mark: {e}")),
        }
    }

    /// The events queued now (none if the queue is empty).
    pub fn read(&mut self) -> io::Result<Vec<FanEvent>> {
        sys::fanotify_read(self.group.as_fd(), &mut self.buf)
    }

    /// Stop reporting reads and writes of `file`'s inode (opens and closes
    /// still come). `survive_modify`: else the next write of the file
    /// lifts it (a file too small now may grow into scope). Returns false
    /// if ignore marks cannot be used here (said once by the caller).
    pub fn quiet(&mut self, file: &File, survive_modify: bool) -> bool {
        if self.quiet_works == Some(false) {
            return false;
        }
        let mut flags = MarkFlags::ADD | MarkFlags::IGNORED_MASK | MarkFlags::EVICTABLE;
        if survive_modify {
            flags = flags | MarkFlags::IGNORED_SURV_MODIFY;
        }
        match sys::fanotify_mark_fd(self.fd(), flags, QUIET, file.as_fd()) {
            Ok(()) => {
                self.quiet_works = Some(true);
                true
            }
            // EINVAL: no evictable marks (Linux < 5.19). EEXIST: the inode
            // has a non-evictable mark of ours (not made here).
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.quiet_works.is_none() => {
                self.quiet_works = Some(false);
                false
            }
            Err(_) => true,
        }
    }
}

fn init_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => format!("fanotify_init: {e} (filesystem marks need CAP_SYS_ADMIN)"),
        Some(libc::ENOSYS) => format!("fanotify_init: {e} (a kernel built without fanotify)"),
        _ => format!("fanotify_init: {e}"),
    }
}

/// The mount `path` is on: the longest mount point that is a prefix of it
/// (the last mounted, where several are on the same point).
fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| (m.mount_point.components().count(), m.id))
}

/// The processes to look at when polling: those of the cgroups `patterns`
/// match (and of their descendants), or every process when the scopes do
/// not limit cgroups (None).
pub fn scope_pids(patterns: Option<&[CgroupPattern]>) -> Vec<u32> {
    let Some(patterns) = patterns else {
        return ubio::procfs::all_pids().unwrap_or_default();
    };
    let mut pids = HashSet::new();
    for m in mounts::mounts().unwrap_or_default() {
        let controllers = match m.fstype.as_str() {
            "cgroup" => m.super_opts.clone(),
            "cgroup2" => String::new(),
            _ => continue,
        };
        walk_cgroups(&m.mount_point, &m.root, &controllers, patterns, &mut pids);
    }
    let mut v: Vec<u32> = pids.into_iter().collect();
    v.sort_unstable();
    v
}

/// Add the processes of `dir` (cgroup path `cg`) and below when a pattern
/// takes it.
fn walk_cgroups(
    dir: &Path,
    cg: &str,
    controllers: &str,
    patterns: &[CgroupPattern],
    pids: &mut HashSet<u32>,
) {
    if patterns.iter().any(|p| p.matches(controllers, cg)) {
        if let Ok(s) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            pids.extend(s.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let child = if cg.ends_with('/') {
                format!("{cg}{name}")
            } else {
                format!("{cg}/{name}")
            };
            walk_cgroups(&e.path(), &child, controllers, patterns, pids);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_cgroup_lists_us() {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        // The first hierarchy we are in, below its root (the root cgroup
        // holds every process: too many to prove anything).
        let Some((ctl, path)) = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            (path != "/").then(|| (ctl.to_string(), path.to_string()))
        }) else {
            eprintln!("SKIP our_own_cgroup_lists_us: this process is in root cgroups only");
            return;
        };
        let pat = if ctl.is_empty() || ctl.starts_with("name=") {
            CgroupPattern::parse(&path).unwrap()
        } else {
            CgroupPattern::parse(&format!("{}:{path}", ctl.split(',').next().unwrap())).unwrap()
        };
        let pids = scope_pids(Some(&[pat]));
        assert!(pids.contains(&std::process::id()), "{ctl}:{path}: {pids:?}");
    }
}
