//! `buffered`: plain buffered I/O, the page cache left to the kernel. The
//! baseline every other backend is compared with, and the pass-through for
//! files whose cache there is nothing to manage (pipes, /proc, tmpfs).

use super::{pwrite_with_flags, Backend, BackendKind, Caps};
use crate::sys::{self, RwFlags};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;

#[derive(Debug, Default)]
pub struct Buffered;

impl Backend for Buffered {
    fn kind(&self) -> BackendKind {
        BackendKind::Buffered
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn read(&self, fd: BorrowedFd<'_>, bufs: &mut [IoSliceMut<'_>], off: u64) -> io::Result<usize> {
        sys::preadv2(fd, bufs, Some(off), RwFlags::NONE)
    }
    fn write(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        off: Option<u64>,
        _keep: bool,
    ) -> io::Result<(u64, usize)> {
        pwrite_with_flags(fd, bufs, off, RwFlags::NONE)
    }
}
