//! The processes the engine follows and their open regular files: which
//! processes form the tree, which descriptors each has, and each
//! descriptor's position and flags (fdinfo, read through ubio::procfs).
//! No /proc/PID/task/*/children here (CONFIG_PROC_CHILDREN is often off):
//! the tree is found from parent pids, reading the stat of new pids only.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use ubio::procfs::{self, all_pids, parse_fdinfo, FdInfo};

/// One descriptor of a member process, watched through its fdinfo file
/// (kept open: one pread per look; it shows whatever file the number
/// refers to at that moment, so the inode is compared each time).
struct Watched {
    info: File,
    last: Option<FdInfo>,
    /// (st_dev, st_ino) if it is a regular file.
    regular: Option<(u64, u64)>,
}

/// A regular file open in a process of the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub pid: u32,
    pub fd: i32,
    pub dev: u64,
    pub ino: u64,
    pub info: FdInfo,
}

impl Seen {
    /// A duplicate of the program's descriptor (pidfd_getfd): the same
    /// open file description, its offset and advice included.
    pub fn duplicate(&self) -> io::Result<File> {
        ubio::sys::pidfd_getfd(ubio::sys::pidfd_open(self.pid)?.as_fd(), self.fd)
    }

    /// The file behind the descriptor, for reading: through /proc/PID/fd,
    /// or, for a file this user may not read (write-only to us), a
    /// duplicate of the program's descriptor.
    pub fn open(&self) -> io::Result<File> {
        File::open(format!("/proc/{}/fd/{}", self.pid, self.fd)).or_else(|_| self.duplicate())
    }

    /// The descriptor's position now, if it still refers to the file seen.
    pub fn position_now(&self) -> Option<u64> {
        let now = procfs::fdinfo(self.pid, self.fd)?;
        ((now.ino, now.mnt_id) == (self.info.ino, self.info.mnt_id)).then_some(now.pos)
    }

    /// `st` (an fstat of a descriptor opened for this one) is still the
    /// file seen: the program may have closed and reused the descriptor.
    pub fn is(&self, st: &libc::stat) -> bool {
        (st.st_dev, st.st_ino) == (self.dev, self.ino)
    }
}

/// The process tree below some roots and its open regular files; or
/// ([`Tree::listed`]) just the processes the caller lists, without their
/// children (`ubio policy` decides about every process by itself).
#[derive(Default)]
pub struct Tree {
    members: BTreeMap<u32, HashMap<i32, Watched>>,
    /// Pids known not to be members (never re-read: a process does not
    /// move into the tree; its children are new pids).
    others: HashSet<u32>,
    /// The last pid the kernel handed out when /proc was last listed.
    last_pid: Option<u32>,
    /// Members are only those added: children are not followed.
    listed: bool,
}

impl Tree {
    /// Follow `pid` and every process it forks from now on (and those it
    /// has forked already, found at the next [`refresh`](Self::refresh)).
    pub fn add_root(&mut self, pid: u32) {
        self.others.remove(&pid);
        self.members.entry(pid).or_default();
    }

    /// Members are the processes [`add_root`](Self::add_root) names, and
    /// not their children.
    pub fn listed() -> Tree {
        Tree {
            listed: true,
            ..Tree::default()
        }
    }

    /// Stop following `pid`.
    pub fn remove(&mut self, pid: u32) {
        self.members.remove(&pid);
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn members(&self) -> impl Iterator<Item = u32> + '_ {
        self.members.keys().copied()
    }

    pub fn contains(&self, pid: u32) -> bool {
        self.members.contains_key(&pid)
    }

    /// Find new members (pids whose parent is a member) and forget pids
    /// that are gone; returns how many joined. Lists /proc only when a
    /// process was created since the last time (one read of /proc/loadavg
    /// otherwise).
    pub fn refresh(&mut self) -> io::Result<usize> {
        if self.listed {
            return Ok(0); // gone members are dropped by scan
        }
        let last = procfs::last_pid();
        if last.is_some() && last == self.last_pid {
            return Ok(0);
        }
        self.last_pid = last;
        let pids = all_pids()?;
        let live: HashSet<u32> = pids.iter().copied().collect();
        self.members.retain(|p, _| live.contains(p));
        self.others.retain(|p| live.contains(p));
        let mut fresh: Vec<(u32, u32)> = pids
            .into_iter()
            .filter(|p| !self.members.contains_key(p) && !self.others.contains(p))
            .filter_map(|p| Some((p, procfs::pid_stat(p).ok()?.ppid)))
            .collect();
        let unknown = fresh.len();
        // A new process may be the child of another new one: repeat until
        // nothing more joins.
        loop {
            let before = fresh.len();
            fresh.retain(|&(p, pp)| {
                if self.members.contains_key(&pp) {
                    self.members.entry(p).or_default();
                    false
                } else {
                    true
                }
            });
            if fresh.len() == before {
                break;
            }
        }
        let joined = unknown - fresh.len();
        self.others.extend(fresh.into_iter().map(|(p, _)| p));
        Ok(joined)
    }

    /// Every regular file open in the members now, with its position.
    /// Members whose descriptors cannot be listed any more (they exited)
    /// are dropped.
    pub fn scan(&mut self) -> Vec<Seen> {
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for (&pid, fds) in self.members.iter_mut() {
            let Some(now) = fd_numbers(pid) else {
                // Gone, or briefly unreadable (during an exec): only the
                // first loses it.
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    gone.push(pid);
                }
                continue;
            };
            fds.retain(|fd, _| now.contains(fd));
            for fd in now {
                if let Some(s) = look(pid, fd, fds) {
                    out.push(s);
                }
            }
        }
        for pid in gone {
            self.members.remove(&pid);
        }
        out
    }
}

/// The regular files open in `pid` now, read afresh (not from a tree's
/// last scan, which may predate a file the process opened since).
pub fn open_files(pid: u32) -> Vec<Seen> {
    let mut fds = HashMap::new();
    fd_numbers(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|fd| look(pid, fd, &mut fds))
        .collect()
}

/// The descriptor numbers open in `pid` (None: it cannot be listed).
fn fd_numbers(pid: u32) -> Option<HashSet<i32>> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// Read one descriptor's fdinfo; classify the file behind it when it is
/// new or changed.
fn look(pid: u32, fd: i32, fds: &mut HashMap<i32, Watched>) -> Option<Seen> {
    let w = match fds.get_mut(&fd) {
        Some(w) => w,
        None => {
            let info = File::open(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
            fds.entry(fd).or_insert(Watched {
                info,
                last: None,
                regular: None,
            })
        }
    };
    let mut buf = [0u8; 512];
    let n = w.info.read_at(&mut buf, 0).ok()?;
    let info = parse_fdinfo(std::str::from_utf8(&buf[..n]).ok()?)?;
    let changed = w
        .last
        .is_none_or(|l| l.ino != info.ino || l.mnt_id != info.mnt_id);
    if changed {
        w.regular = std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
            .ok()
            .filter(|m| m.file_type().is_file())
            .map(|m| (m.dev(), m.ino()));
    }
    w.last = Some(info);
    let (dev, ino) = w.regular?;
    Some(Seen {
        pid,
        fd,
        dev,
        ino,
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_descriptors_are_seen_with_their_position() {
        use std::io::{Seek, SeekFrom};
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![0u8; 10000]).unwrap();
        let mut f = File::open(&p).unwrap();
        f.seek(SeekFrom::Start(4321)).unwrap();
        let mut t = Tree::default();
        t.add_root(std::process::id());
        let ino = f.metadata().unwrap().ino();
        let seen = t.scan();
        let s = seen
            .iter()
            .find(|s| s.ino == ino)
            .expect("our file is seen");
        assert_eq!(s.info.pos, 4321);
        assert_eq!(s.info.flags & libc::O_ACCMODE, libc::O_RDONLY);
    }

    /// A file opened after a tree's scan is in a fresh listing, and a
    /// position read again is where the descriptor is now, or nothing once
    /// the number refers to another file.
    #[test]
    fn a_fresh_look_sees_what_the_last_scan_did_not() {
        use std::io::{Seek, SeekFrom};
        use std::os::fd::AsRawFd;
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![0u8; 10000]).unwrap();
        let mut f = File::open(&p).unwrap();
        let ino = f.metadata().unwrap().ino();
        let mut t = Tree::default();
        t.add_root(std::process::id());
        let s = *t.scan().iter().find(|s| s.ino == ino).unwrap();
        assert_eq!(s.info.pos, 0);
        f.seek(SeekFrom::Start(777)).unwrap();
        assert_eq!(s.position_now(), Some(777));

        let q = dir.path().join("written");
        let w = File::create(&q).unwrap();
        let wino = w.metadata().unwrap().ino();
        let fresh = open_files(std::process::id());
        let ws = fresh
            .iter()
            .find(|s| s.ino == wino)
            .expect("the new file is listed");
        assert_eq!(ws.fd, w.as_raw_fd());
        assert_ne!(ws.info.flags & libc::O_ACCMODE, libc::O_RDONLY);

        // The number reused for another file: the old sighting has no position.
        let fd = f.as_raw_fd();
        drop(f);
        let other = File::open(&q).unwrap();
        if other.as_raw_fd() == fd {
            assert_eq!(s.position_now(), None);
        }
    }

    /// A child forked by a member joins at the next refresh, which counts
    /// it (other tests of this process may fork children meanwhile too).
    #[test]
    fn a_members_child_joins() {
        let mut t = Tree::default();
        t.add_root(std::process::id());
        t.refresh().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let joined = t.refresh().unwrap();
        let member = t.contains(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(member, "the child is a member");
        assert!(joined >= 1, "{joined} joined");
    }
}
