//! `emulated`: plain buffered I/O; the tracker drops what the stream read
//! (fadvise DONTNEED behind the read position) and writes behind it
//! (sync_file_range, then DONTNEED once written back). Works on every kernel
//! and filesystem with a page cache that can be dropped.

use super::{pwrite_with_flags, Backend, BackendKind, Caps};
use crate::sys::{self, RwFlags};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;

#[derive(Debug, Default)]
pub struct Emulated;

impl Backend for Emulated {
    fn kind(&self) -> BackendKind {
        BackendKind::Emulated
    }
    fn caps(&self) -> Caps {
        Caps {
            manages_cache: true,
            ..Caps::default()
        }
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
