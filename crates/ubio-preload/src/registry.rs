//! Which descriptors have state, and its life: made at a descriptor's
//! first use, shared by dup, finished when the last descriptor of its
//! description closes or at exit. The state itself is [`Desc`]; the table
//! that holds it, [`fdtable`].

use crate::desc::Desc;
use crate::{fdtable, log};
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

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
    if !last || !d.of_this_generation() {
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
             writeback starts {}, waits {} ({:.3} s){}{}{}",
            st.backend,
            st.reason,
            st.bytes_read,
            st.bytes_written,
            st.pages_dropped,
            st.pages_preserved,
            st.writeback_starts,
            st.writeback_waits,
            st.writeback_wait_secs,
            match st.small_readahead_phases {
                0 => String::new(),
                n => format!("; small readahead {n} times, {} B", st.small_readahead_bytes),
            },
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
