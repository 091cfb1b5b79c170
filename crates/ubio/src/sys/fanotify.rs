//! fanotify: filesystem-wide notification of file access, with the pid (or
//! a pidfd) of the process that caused each event and a descriptor of the
//! file. `ubio policy` finds the streams of the processes in its scope with
//! it instead of polling the whole machine.
//!
//! The descriptor an event carries is the kernel's own open of the file
//! (read-only here, and never read from: the daemon only calls fadvise,
//! sync_file_range, cachestat and mincore on what it manages); it does not
//! itself cause events.

use super::{c_path, cvt};
use std::fs::File;
use std::io;
use std::ops::BitOr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Flags of [`fanotify_init`] (`FAN_*`). Unknown bits are passed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitFlags(pub u32);

impl InitFlags {
    /// Notification only: no permission events, no decisions to answer.
    pub const CLASS_NOTIF: InitFlags = InitFlags(libc::FAN_CLASS_NOTIF);
    /// Close-on-exec on the group's descriptor.
    pub const CLOEXEC: InitFlags = InitFlags(libc::FAN_CLOEXEC);
    /// Reads return EAGAIN instead of blocking when no event is queued.
    pub const NONBLOCK: InitFlags = InitFlags(libc::FAN_NONBLOCK);
    /// Each event carries a pidfd of the process (Linux 5.15+).
    pub const REPORT_PIDFD: InitFlags = InitFlags(libc::FAN_REPORT_PIDFD);
    /// No limit on the queue (default 16,384 events, then FAN_Q_OVERFLOW).
    pub const UNLIMITED_QUEUE: InitFlags = InitFlags(libc::FAN_UNLIMITED_QUEUE);
}

impl BitOr for InitFlags {
    type Output = InitFlags;
    fn bitor(self, rhs: InitFlags) -> InitFlags {
        InitFlags(self.0 | rhs.0)
    }
}

/// Flags of [`fanotify_mark`] (`FAN_MARK_*`). Unknown bits are passed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkFlags(pub u32);

impl MarkFlags {
    pub const ADD: MarkFlags = MarkFlags(libc::FAN_MARK_ADD);
    pub const REMOVE: MarkFlags = MarkFlags(libc::FAN_MARK_REMOVE);
    /// Mark the mount the path is on (every file reached through it).
    pub const MOUNT: MarkFlags = MarkFlags(libc::FAN_MARK_MOUNT);
    /// Mark the filesystem the path is on (every mount of it; Linux 4.20+).
    pub const FILESYSTEM: MarkFlags = MarkFlags(libc::FAN_MARK_FILESYSTEM);
    /// The mask is an ignore mask: these events of this inode are not
    /// reported, whatever other marks say (Linux 6.0+).
    pub const IGNORE: MarkFlags = MarkFlags(libc::FAN_MARK_IGNORE);
    /// The mask is the inode's ignore mask (since 2.6.37; [`IGNORE`](Self::IGNORE)
    /// is the stricter form of 6.0).
    pub const IGNORED_MASK: MarkFlags = MarkFlags(libc::FAN_MARK_IGNORED_MASK);
    /// The ignore mask is kept when the file is modified (else a write
    /// clears it).
    pub const IGNORED_SURV_MODIFY: MarkFlags = MarkFlags(libc::FAN_MARK_IGNORED_SURV_MODIFY);
    /// The inode mark does not pin the inode in memory: it goes when the
    /// inode is evicted (Linux 5.19+).
    pub const EVICTABLE: MarkFlags = MarkFlags(libc::FAN_MARK_EVICTABLE);
}

impl BitOr for MarkFlags {
    type Output = MarkFlags;
    fn bitor(self, rhs: MarkFlags) -> MarkFlags {
        MarkFlags(self.0 | rhs.0)
    }
}

/// Event bits (`FAN_ACCESS`...), in marks and in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventMask(pub u64);

impl EventMask {
    /// A file was read (read, pread, sendfile, splice from it...).
    pub const ACCESS: EventMask = EventMask(libc::FAN_ACCESS);
    /// A file was written.
    pub const MODIFY: EventMask = EventMask(libc::FAN_MODIFY);
    /// A file was opened.
    pub const OPEN: EventMask = EventMask(libc::FAN_OPEN);
    /// A file was opened to be executed (execve, the ELF interpreter);
    /// reported with [`OPEN`](Self::OPEN) when both are asked for. Since
    /// Linux 5.0.
    pub const OPEN_EXEC: EventMask = EventMask(libc::FAN_OPEN_EXEC);
    /// A file open for writing was closed.
    pub const CLOSE_WRITE: EventMask = EventMask(libc::FAN_CLOSE_WRITE);
    /// A file open read-only was closed.
    pub const CLOSE_NOWRITE: EventMask = EventMask(libc::FAN_CLOSE_NOWRITE);
    /// Events were lost: the queue was full.
    pub const Q_OVERFLOW: EventMask = EventMask(libc::FAN_Q_OVERFLOW);

    pub const fn contains(self, other: EventMask) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn intersects(self, other: EventMask) -> bool {
        self.0 & other.0 != 0
    }
}

impl BitOr for EventMask {
    type Output = EventMask;
    fn bitor(self, rhs: EventMask) -> EventMask {
        EventMask(self.0 | rhs.0)
    }
}

/// `fanotify_init(flags, event_f_flags)`: a new notification group.
/// `event_f_flags` are the open flags of the descriptors events carry
/// (`O_RDONLY | O_LARGEFILE | O_CLOEXEC` for watching without writing).
/// Needs CAP_SYS_ADMIN for filesystem and mount marks and for
/// [`InitFlags::REPORT_PIDFD`].
///
/// See fanotify_init(2), fanotify(7); since Linux 2.6.37.
pub fn fanotify_init(flags: InitFlags, event_f_flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: no pointers are passed.
    let fd = cvt(unsafe { libc::fanotify_init(flags.0, event_f_flags as u32) } as libc::c_long)?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `fanotify_mark(fd, flags, mask, AT_FDCWD, path)`: add, change or remove
/// the mark of the inode, mount or filesystem `path` names. Symlinks in the
/// last component are followed.
///
/// See fanotify_mark(2); since Linux 2.6.37.
pub fn fanotify_mark(
    group: BorrowedFd<'_>,
    flags: MarkFlags,
    mask: EventMask,
    path: &Path,
) -> io::Result<()> {
    let c = c_path(path)?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let ret = unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            flags.0,
            mask.0,
            libc::AT_FDCWD,
            c.as_ptr(),
        )
    };
    cvt(ret as libc::c_long).map(drop)
}

/// `fanotify_mark(fd, flags, mask, file, NULL)`: the same on the inode an
/// open descriptor refers to (no path is looked up: nothing another user
/// controls can redirect it).
///
/// See fanotify_mark(2); since Linux 2.6.37.
pub fn fanotify_mark_fd(
    group: BorrowedFd<'_>,
    flags: MarkFlags,
    mask: EventMask,
    file: BorrowedFd<'_>,
) -> io::Result<()> {
    // SAFETY: a null pathname is allowed: the mark is on `file` itself.
    let ret = unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            flags.0,
            mask.0,
            file.as_raw_fd(),
            std::ptr::null(),
        )
    };
    cvt(ret as libc::c_long).map(drop)
}

/// One event read from a group.
#[derive(Debug)]
pub struct Event {
    pub mask: EventMask,
    /// The file (None for [`EventMask::Q_OVERFLOW`]).
    pub file: Option<File>,
    /// The process that caused it (its thread group id).
    pub pid: u32,
    /// A pidfd of that process, with [`InitFlags::REPORT_PIDFD`]; None if
    /// it had exited or the kernel could not make one.
    pub pidfd: Option<OwnedFd>,
}

const METADATA_LEN: usize = std::mem::size_of::<libc::fanotify_event_metadata>();

/// `read(fd, buf)` on a group, parsed: the events queued now (none when
/// the group is non-blocking and the queue is empty). Descriptors come
/// back owned, so none is leaked whatever the caller keeps.
///
/// See fanotify(7) (reading events, information records).
pub fn fanotify_read(group: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Vec<Event>> {
    // SAFETY: `buf` is valid for writes of its length for the call.
    let ret = unsafe { libc::read(group.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = match cvt(ret as libc::c_long) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(parse_events(&buf[..n]))
}

/// Parse what one read of a group returned, taking ownership of every
/// descriptor in it.
fn parse_events(mut buf: &[u8]) -> Vec<Event> {
    let mut out = Vec::new();
    while buf.len() >= METADATA_LEN {
        // SAFETY: at least METADATA_LEN bytes are there; read_unaligned
        // copes with the buffer's alignment.
        let m: libc::fanotify_event_metadata =
            unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) };
        let len = (m.event_len as usize).clamp(METADATA_LEN, buf.len());
        let meta_len = (m.metadata_len as usize).clamp(METADATA_LEN, len);
        let file = (m.fd >= 0).then(|| {
            // SAFETY: the kernel installed this descriptor for us to own.
            unsafe { File::from_raw_fd(m.fd) }
        });
        let pidfd = pidfd_record(&buf[meta_len..len]);
        out.push(Event {
            mask: EventMask(m.mask),
            file,
            pid: m.pid.max(0) as u32,
            pidfd,
        });
        buf = &buf[len..];
    }
    out
}

/// The pidfd in an event's information records, if there is one.
fn pidfd_record(mut info: &[u8]) -> Option<OwnedFd> {
    let mut found = None;
    while info.len() >= 4 {
        let (kind, len) = (info[0], u16::from_ne_bytes([info[2], info[3]]) as usize);
        if len < 4 || len > info.len() {
            break;
        }
        if kind == libc::FAN_EVENT_INFO_TYPE_PIDFD && len >= 8 {
            let fd = i32::from_ne_bytes([info[4], info[5], info[6], info[7]]);
            if fd >= 0 {
                // SAFETY: the kernel installed this descriptor for us to own.
                found = Some(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        info = &info[len..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn records_are_parsed_without_leaking() {
        // One overflow event (no fd), then a truncated one that is ignored.
        let mut m: libc::fanotify_event_metadata = unsafe { std::mem::zeroed() };
        m.event_len = METADATA_LEN as u32;
        m.metadata_len = METADATA_LEN as u16;
        m.vers = libc::FANOTIFY_METADATA_VERSION;
        m.mask = libc::FAN_Q_OVERFLOW;
        m.fd = libc::FAN_NOFD;
        m.pid = 0;
        // SAFETY: plain old data.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&m as *const libc::fanotify_event_metadata).cast::<u8>(),
                METADATA_LEN,
            )
        };
        let mut buf = bytes.to_vec();
        buf.extend_from_slice(&bytes[..10]);
        let ev = parse_events(&buf);
        assert_eq!(ev.len(), 1);
        assert!(ev[0].mask.contains(EventMask::Q_OVERFLOW));
        assert!(ev[0].file.is_none() && ev[0].pidfd.is_none());
    }

    /// As root: a filesystem mark reports our own read of a file, with our
    /// pid and the file; an ignore mark on the inode silences it.
    #[test]
    fn filesystem_mark_reports_reads_with_pid() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP filesystem_mark_reports_reads_with_pid: needs root (CAP_SYS_ADMIN)");
            return;
        }
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        let g = fanotify_init(
            InitFlags::CLASS_NOTIF
                | InitFlags::CLOEXEC
                | InitFlags::NONBLOCK
                | InitFlags::REPORT_PIDFD,
            libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC,
        )
        .unwrap();
        fanotify_mark(
            g.as_fd(),
            MarkFlags::ADD | MarkFlags::FILESYSTEM,
            EventMask::ACCESS | EventMask::CLOSE_NOWRITE,
            dir.path(),
        )
        .unwrap();
        let ino = std::fs::metadata(&p).unwrap().ino();
        let read_it = || {
            let mut s = String::new();
            File::open(&p).unwrap().read_to_string(&mut s).unwrap();
        };
        read_it();
        let mut buf = vec![0u8; 64 << 10];
        let mine = |evs: Vec<Event>| {
            evs.into_iter()
                .filter(|e| {
                    e.file
                        .as_ref()
                        .is_some_and(|f| f.metadata().unwrap().ino() == ino)
                })
                .collect::<Vec<_>>()
        };
        let ev = mine(fanotify_read(g.as_fd(), &mut buf).unwrap());
        assert!(!ev.is_empty(), "no event for our read");
        let e = &ev[0];
        assert_eq!(e.pid, std::process::id());
        assert!(e.pidfd.is_some(), "FAN_REPORT_PIDFD gave no pidfd");
        assert!(ev.iter().any(|e| e.mask.contains(EventMask::ACCESS)));
        // Silence the inode's reads (not its close).
        fanotify_mark_fd(
            g.as_fd(),
            MarkFlags::ADD
                | MarkFlags::IGNORE
                | MarkFlags::IGNORED_SURV_MODIFY
                | MarkFlags::EVICTABLE,
            EventMask::ACCESS,
            e.file.as_ref().unwrap().as_fd(),
        )
        .unwrap();
        read_it();
        let ev = mine(fanotify_read(g.as_fd(), &mut buf).unwrap());
        assert!(
            ev.iter().all(|e| !e.mask.contains(EventMask::ACCESS)),
            "the ignore mark did not silence reads: {ev:?}"
        );
        assert!(ev.iter().any(|e| e.mask.contains(EventMask::CLOSE_NOWRITE)));
    }
}
