//! The state of one open file description: its `ubio::Stream`, shared by
//! every descriptor of this process that refers to it (dup, dup2, fcntl
//! F_DUPFD), and finished when the last of them closes ([`crate::registry`]).

use crate::{config, log};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
    /// Made in this process since its last fork (state of an older
    /// generation is the parent's: neither used nor finished here).
    pub fn of_this_generation(&self) -> bool {
        self.generation == generation()
    }

    pub fn new(fd: BorrowedFd<'_>, st: &libc::stat) -> Desc {
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

    pub fn current(&self, st: &libc::stat) -> bool {
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
    pub fn tell_engine(&self, claim: bool) {
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
