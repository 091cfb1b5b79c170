//! Descriptors the library keeps for itself (a stream's O_DIRECT twin, a
//! readable reopen of a write-only file), numbered out of the way of the
//! numbers programs manage by hand, inside the descriptor table the
//! process already has.
//!
//! Out of the way: a shell closes 1 and then dup2()s a file onto it, which
//! would silently replace a descriptor the library had just been given as
//! 1 (seen under the LD_PRELOAD shim); scripts take small numbers of their
//! own (`exec 9>lock`).
//!
//! Inside the table: a number past the kernel's descriptor table makes it
//! grow, and in a process of several threads the growth waits for an RCU
//! grace period (expand_fdtable(): synchronize_rcu()), about 10 ms on the
//! machines here. Each process paid it at its first file when the floor
//! was 1024 (the table starts at 64), which cost the bench's runs of 1 GiB
//! at 7 GB/s 7-10% against O_DIRECT (bench/runs/2026-12-07-fd-table).

use crate::sys;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// [`sys::reopen`], the new descriptor numbered out of the programs' way.
pub fn reopen(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<File> {
    Ok(out_of_the_way(sys::reopen(fd, flags)?))
}

/// `file` again at a number at least [`lowest`], or as it is where it
/// already is or the duplicate fails.
fn out_of_the_way(file: File) -> File {
    let lowest = lowest();
    if file.as_raw_fd() >= lowest {
        return file;
    }
    match sys::dup_at_least(file.as_fd(), lowest) {
        Ok(high) => high.into(),
        Err(_) => file,
    }
}

/// The kernel's first descriptor table: BITS_PER_LONG entries
/// (NR_OPEN_DEFAULT), what a process that never had more starts with.
const FIRST_TABLE: u64 = 64;

/// The upper half of the descriptor table and of the soft RLIMIT_NOFILE,
/// at least 10 (above the few numbers programs claim), at most 1024.
fn lowest() -> libc::c_int {
    let limit = sys::open_files_limit().unwrap_or(FIRST_TABLE);
    (table_size().min(limit) / 2).clamp(10, 1024) as libc::c_int
}

/// This process's descriptor table, in entries (FDSize of
/// /proc/self/status), read once per process: it only grows, so an
/// earlier reading is never past it. A forked child's table may be
/// smaller than its parent's, hence the pid beside it.
fn table_size() -> u64 {
    // The pid in the high half, the size in the low half; 0: not read.
    static READ: AtomicU64 = AtomicU64::new(0);
    let pid = u64::from(std::process::id());
    let read = READ.load(Ordering::Relaxed);
    if read != 0 && read >> 32 == pid {
        return read & u64::from(u32::MAX);
    }
    let size = crate::procfs::own_status()
        .ok()
        .and_then(|s| s.fd_table_size)
        .unwrap_or(FIRST_TABLE)
        .min(u64::from(u32::MAX));
    READ.store(pid << 32 | size, Ordering::Relaxed);
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopened_descriptors_stay_clear_of_low_numbers_and_inside_the_table() {
        let table = || crate::procfs::own_status().unwrap().fd_table_size.unwrap();
        let f = File::open("/proc/self/status").unwrap();
        let before = table();
        let again = reopen(f.as_fd(), libc::O_RDONLY).unwrap();
        let fd = again.as_raw_fd() as u64;
        assert!(fd >= 10, "reopen gave fd {fd}");
        assert!(fd < before, "fd {fd} past the table of {before}");
        assert_eq!(table(), before, "the table grew");
        assert_eq!(
            sys::fstat(again.as_fd()).unwrap().st_ino,
            sys::fstat(f.as_fd()).unwrap().st_ino
        );
    }
}
