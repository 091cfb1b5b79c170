//! The state of one open file description: its `ubio::Stream`, shared by
//! every descriptor of this process that refers to it (dup, dup2, fcntl
//! F_DUPFD), and finished when the last of them closes.

use crate::{config, fdtable, log};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use ubio::{sys, Stream};

/// Bumped in the child of every fork: state of an older generation belongs
/// to the parent and is neither used nor finished here.
static GENERATION: AtomicU64 = AtomicU64::new(0);

pub fn new_generation() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

#[derive(Debug)]
pub struct Desc {
    /// `None` when no stream could be made (an explicitly named backend that
    /// cannot run here): the description is passed through.
    stream: Option<Stream>,
    generation: u64,
    dev: u64,
    ino: u64,
    /// Descriptors of this process in the table that refer to this state.
    fds: AtomicUsize,
    /// Stop managing: the file was mapped, or its O_DIRECT/O_APPEND flag
    /// changed (the stream's choice no longer fits).
    passthrough: AtomicBool,
    /// Claimed from `ubio run`'s engine (at the first managed I/O).
    claimed: AtomicBool,
}

impl Desc {
    fn new(fd: BorrowedFd<'_>, st: &libc::stat) -> Desc {
        let stream = match Stream::new(fd, &config::get().stream) {
            Ok(s) => Some(s),
            Err(e) => {
                log::debug(&format!("fd {fd:?}: passed through: {e}"));
                None
            }
        };
        Desc {
            stream,
            generation: generation(),
            dev: st.st_dev,
            ino: st.st_ino,
            fds: AtomicUsize::new(0),
            passthrough: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
        }
    }

    pub fn add_fd(&self) {
        self.fds.fetch_add(1, Ordering::AcqRel);
    }

    /// True when this was the last descriptor.
    pub fn remove_fd(&self) -> bool {
        self.fds.fetch_sub(1, Ordering::AcqRel) == 1
    }

    fn current(&self, st: &libc::stat) -> bool {
        self.generation == generation() && self.dev == st.st_dev && self.ino == st.st_ino
    }

    /// The stream, if this description is managed.
    pub fn stream(&self) -> Option<&Stream> {
        if self.passthrough.load(Ordering::Relaxed) {
            return None;
        }
        self.stream
            .as_ref()
            .filter(|s| s.choice().managed && s.is_regular())
    }

    /// Tell the engine of `ubio run`, if there is one, that this process
    /// manages (or, `claim` false, stopped managing) the file, once.
    fn tell_engine(&self, claim: bool) {
        let Some(name) = &config::get().engine else {
            return;
        };
        if self.claimed.swap(claim, Ordering::AcqRel) == claim {
            return;
        }
        let c = ubio::claims::Claim {
            claim,
            pid: std::process::id(),
            dev: self.dev,
            ino: self.ino,
        };
        if let Err(e) = ubio::claims::send(name, &c) {
            log::debug(&format!("cannot reach the engine {name}: {e}"));
        }
    }

    /// Stop managing this description (flush what was written first).
    pub fn pass_through(&self, fd: BorrowedFd<'_>) {
        if let Some(s) = self.stream() {
            let _ = s.flush(fd);
        }
        self.passthrough.store(true, Ordering::Relaxed);
    }
}

/// The file position of `fd`, for the tracker of a copy the kernel makes.
pub fn position(fd: BorrowedFd<'_>) -> Option<u64> {
    sys::lseek_cur(fd).ok()
}

/// fstat of a raw descriptor that may not be open (ubio::sys::fstat takes a
/// BorrowedFd, which promises it is).
fn fstat(fd: i32) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid out-pointer for struct stat.
    let r = unsafe { libc::fstat(fd, st.as_mut_ptr()) };
    // SAFETY: fstat succeeded and filled it.
    (r == 0).then(|| unsafe { st.assume_init() })
}

/// The state of `fd` if it is a regular file, made at its first use; stale
/// state (of a descriptor closed behind our back and reused, or of the
/// parent before a fork) is replaced.
pub fn lookup_or_create(fd: i32) -> Option<Arc<Desc>> {
    let st = fstat(fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    if let Some(d) = fdtable::get(fd) {
        if d.current(&st) {
            return Some(d);
        }
    }
    // SAFETY: `fd` is open (fstat succeeded) for the duration of this call.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    let fresh = Arc::new(Desc::new(bfd, &st));
    let (d, _stale) = fdtable::insert_unless(fd, fresh, |cur| cur.current(&st));
    Some(d)
}

/// The managed state of `fd`, if any (made at its first read or write).
pub fn managed(fd: i32) -> Option<Arc<Desc>> {
    lookup_or_create(fd).filter(|d| d.stream().is_some())
}

/// As [`managed`], for a read, write or copy that the shim is about to
/// manage: from now on the file is the shim's, and the engine is told.
/// (Not for advice calls: stdio readers call fadvise themselves and then
/// read where the shim cannot see.)
pub fn managed_io(fd: i32) -> Option<Arc<Desc>> {
    let d = managed(fd)?;
    d.tell_engine(true);
    Some(d)
}

/// `fd` is a new descriptor (open, dup target): any state in its slot
/// belongs to an earlier descriptor closed behind our back.
pub fn forget(fd: i32) {
    drop(fdtable::take(fd));
}

/// Give `newfd` the state of `oldfd` (dup): they share the description.
pub fn share(d: Arc<Desc>, newfd: i32) {
    let (_, stale) = fdtable::insert_unless(newfd, d, |_| false);
    drop(stale);
}

/// `fd` is about to be closed: if it was the last descriptor of its
/// description here, finish the stream (flush the write-behind tail, drop
/// what it brought in) while the descriptor is still open.
pub fn before_close(fd: i32) -> io::Result<()> {
    let Some((d, last)) = fdtable::take(fd) else {
        return Ok(());
    };
    if !last || d.generation != generation() {
        return Ok(());
    }
    finish(&d, fd)
}

fn finish(d: &Desc, fd: i32) -> io::Result<()> {
    let Some(s) = d.stream() else {
        return Ok(());
    };
    // SAFETY: the caller keeps `fd` open during the call.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    let res = s.finish(bfd);
    d.tell_engine(false);
    let st = s.stats();
    // A description this process only duplicated or mapped is not worth a line.
    if log::enabled() && st.bytes_read + st.bytes_written > 0 {
        let path = std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "?".into());
        log::debug(&format!(
            "fd {fd} {path}: backend {} ({}); read {} B, written {} B; pages dropped {}, preserved {}; \
             writeback starts {}, waits {} ({:.3} s){}{}",
            st.backend,
            st.reason,
            st.bytes_read,
            st.bytes_written,
            st.pages_dropped,
            st.pages_preserved,
            st.writeback_starts,
            st.writeback_waits,
            st.writeback_wait_secs,
            st.residency_unknown.map(|r| format!("; residency unknown: {r}")).unwrap_or_default(),
            match &res {
                Ok(()) => String::new(),
                Err(e) => format!("; error: {e}"),
            }
        ));
    }
    res
}

/// At exit: finish the streams of every descriptor still open.
pub fn finish_all() {
    for fd in fdtable::fds_in(0, u32::MAX) {
        let _ = before_close(fd);
    }
}

/// Turn a stream result into the C return value and errno.
pub fn c_result(r: io::Result<usize>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
    }
}

pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// UIO_MAXIOV: a longer iovec array is the kernel's EINVAL, left to libc.
const IOV_MAX: libc::c_int = 1024;

/// One buffer as a slice for the stream, or None where the call should go
/// to libc as it is (empty, or longer than a slice may be).
///
/// # Safety
/// `buf..buf+len` must be the caller's buffer; only the kernel touches it.
pub unsafe fn buf_mut<'a>(buf: *mut libc::c_void, len: usize) -> Option<[IoSliceMut<'a>; 1]> {
    if buf.is_null() || len == 0 || len > isize::MAX as usize {
        return None;
    }
    // SAFETY: per the function contract.
    Some([IoSliceMut::new(unsafe {
        std::slice::from_raw_parts_mut(buf.cast(), len)
    })])
}

/// # Safety
/// As `buf_mut`.
pub unsafe fn buf<'a>(buf: *const libc::c_void, len: usize) -> Option<[IoSlice<'a>; 1]> {
    if buf.is_null() || len == 0 || len > isize::MAX as usize {
        return None;
    }
    // SAFETY: per the function contract.
    Some([IoSlice::new(unsafe {
        std::slice::from_raw_parts(buf.cast(), len)
    })])
}

/// The iovec array as slices (IoSliceMut is ABI-compatible with iovec), or
/// None for what libc should handle as it is (a bad count, empty).
///
/// # Safety
/// `iov` must point to `cnt` iovecs whose buffers only the kernel touches.
pub unsafe fn iov_mut<'a>(
    iov: *const libc::iovec,
    cnt: libc::c_int,
) -> Option<&'a mut [IoSliceMut<'a>]> {
    if iov.is_null() || !(1..=IOV_MAX).contains(&cnt) {
        return None;
    }
    // SAFETY: per the function contract; IoSliceMut has iovec's layout.
    let s = unsafe { std::slice::from_raw_parts_mut(iov as *mut IoSliceMut<'a>, cnt as usize) };
    (s.iter().map(|b| b.len() as u64).sum::<u64>() > 0).then_some(s)
}

/// # Safety
/// As `iov_mut`.
pub unsafe fn iov<'a>(iov: *const libc::iovec, cnt: libc::c_int) -> Option<&'a [IoSlice<'a>]> {
    if iov.is_null() || !(1..=IOV_MAX).contains(&cnt) {
        return None;
    }
    // SAFETY: per the function contract; IoSlice has iovec's layout.
    let s = unsafe { std::slice::from_raw_parts(iov as *const IoSlice<'a>, cnt as usize) };
    (s.iter().map(|b| b.len() as u64).sum::<u64>() > 0).then_some(s)
}
