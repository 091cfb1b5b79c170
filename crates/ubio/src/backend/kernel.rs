//! `kernel`: preadv2()/pwritev2() with RWF_DONTCACHE (Linux 6.14+, where the
//! filesystem sets FOP_DONTCACHE). The kernel drops pages it brought in and
//! starts writeback right after each write; the tracker still bounds the
//! writeback in flight and cleans up what the kernel leaves: readahead beyond
//! the last read, and (ext4 on 6.18) overwritten pages that stay cached.

use super::{pwrite_with_flags, Backend, BackendKind, Caps};
use crate::sys::{self, RwFlags};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;

#[derive(Debug, Default)]
pub struct Kernel;

impl Backend for Kernel {
    fn kind(&self) -> BackendKind {
        BackendKind::Kernel
    }
    fn caps(&self) -> Caps {
        Caps {
            manages_cache: true,
            kernel_drops_reads: true,
            kernel_starts_writeback: true,
        }
    }
    fn read(&self, fd: BorrowedFd<'_>, bufs: &mut [IoSliceMut<'_>], off: u64) -> io::Result<usize> {
        sys::preadv2(fd, bufs, Some(off), RwFlags::DONTCACHE)
    }
    fn write(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        off: Option<u64>,
        _keep: bool,
    ) -> io::Result<(u64, usize)> {
        pwrite_with_flags(fd, bufs, off, RwFlags::DONTCACHE)
    }
}
