//! `direct`: O_DIRECT through aligned bounce buffers, for callers that want
//! no page cache at all. Any offset, length and buffer works: unaligned edges
//! are read-modify-written under a per-handle lock; the part of a write that
//! ends inside a filesystem block past EOF goes through the page cache (all
//! of the write's part of that block), so that the file is never longer
//! than what was written and no write splits a new block between the two
//! paths. Ranges that other users
//! had cached are written through the page cache instead (an O_DIRECT write
//! would invalidate them), so they stay cached and coherent.
//!
//! The read-modify-write of edge blocks is atomic only against this handle:
//! another process writing the same block at the same time can lose an
//! update, as with any O_DIRECT user of unaligned data.

use super::{pwrite_with_flags, Backend, Caps, ReadAt, WriteAt};
use crate::buffer::AlignedBuf;
use crate::sys::{self, DioAlign, RwFlags};
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;

/// Bytes moved per bounce-buffer round trip.
const BOUNCE: usize = 4 << 20;

/// The largest filesystem block iomap zeroes around a direct write (and a
/// bound on what a write's tail puts through the page cache where
/// st_blksize is a transfer size, as NFS's).
const MAX_FS_BLOCK: u64 = 64 << 10;

#[derive(Debug)]
pub struct Direct {
    /// A second open file description of the same file, with O_DIRECT;
    /// read-write where permitted, for the read-modify-write of edges.
    dfd: File,
    /// False when only a write-only O_DIRECT descriptor could be had: then
    /// unaligned writes go through the page cache instead.
    dfd_readable: bool,
    /// The caller's descriptor was opened for writing (so is `dfd`).
    writable: bool,
    /// The caller's descriptor was opened for reading: reads of a
    /// write-only one fail with EBADF, as read(2) would, although the
    /// O_DIRECT descriptor may be readable (for the edges of writes).
    readable: bool,
    /// Offset and length alignment (at least 512).
    align: u64,
    /// The filesystem's block (st_blksize, at least `align` and a page, at
    /// most 64 KiB): a write past EOF that ends inside one writes that
    /// whole last block through the page cache (see `write_direct`).
    fs_block: u64,
    /// Buffer address alignment.
    mem_align: usize,
    pool: Mutex<Vec<AlignedBuf>>,
    /// Serialises writes: edge read-modify-write and size trimming.
    write_lock: Mutex<()>,
}

impl Direct {
    /// Bind to the file behind `fd`, opening it again with O_DIRECT.
    pub fn open(fd: BorrowedFd<'_>, dio: DioAlign) -> io::Result<Direct> {
        let access = sys::getfl(fd)? & libc::O_ACCMODE;
        let (dfd, dfd_readable) = match access {
            libc::O_WRONLY => match crate::descriptors::reopen(fd, libc::O_RDWR | libc::O_DIRECT) {
                Ok(f) => (f, true),
                Err(_) => (
                    crate::descriptors::reopen(fd, access | libc::O_DIRECT)?,
                    false,
                ),
            },
            _ => (
                crate::descriptors::reopen(fd, access | libc::O_DIRECT)?,
                true,
            ),
        };
        // Where the kernel serves an O_DIRECT read through the page cache
        // after all (btrfs: a compressed extent, or a buffer that faults),
        // no readahead beyond the call on this descriptor.
        let _ = sys::fadvise(dfd.as_fd(), 0, 0, sys::Advice::Random);
        let align = u64::from(dio.offset_align.max(512));
        let fs_block = (sys::fstat(fd)?.st_blksize as u64)
            .clamp(sys::page_size(), MAX_FS_BLOCK)
            .next_multiple_of(align);
        let mem_align = (dio.mem_align as usize)
            .max(align as usize)
            .max(sys::page_size() as usize);
        Ok(Direct {
            dfd,
            dfd_readable,
            readable: access != libc::O_WRONLY,
            writable: access != libc::O_RDONLY,
            align,
            fs_block,
            mem_align,
            pool: Mutex::new(Vec::new()),
            write_lock: Mutex::new(()),
        })
    }

    fn take_buf(&self) -> AlignedBuf {
        self.pool
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| AlignedBuf::new(BOUNCE, self.mem_align))
    }

    fn put_buf(&self, buf: AlignedBuf) {
        let mut pool = self.pool.lock().unwrap();
        if pool.len() < 4 {
            pool.push(buf);
        }
    }

    fn down(&self, x: u64) -> u64 {
        x / self.align * self.align
    }
    fn up(&self, x: u64) -> u64 {
        x.div_ceil(self.align) * self.align
    }

    /// One O_DIRECT read of `buf` at aligned `off`; bytes past EOF are zeroed.
    fn read_block(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let n = loop {
            match sys::preadv2(
                self.dfd.as_fd(),
                &mut [IoSliceMut::new(buf)],
                Some(off),
                RwFlags::NONE,
            ) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        buf[n..].fill(0);
        Ok(n)
    }

    fn write_block(&self, buf: &[u8], off: u64) -> io::Result<()> {
        write_all_at(self.dfd.as_fd(), buf, off, &mut 0)
    }

    fn aligned(&self, ptr: *const u8, off: u64, len: usize) -> bool {
        off.is_multiple_of(self.align)
            && (len as u64).is_multiple_of(self.align)
            && (ptr as usize).is_multiple_of(self.mem_align)
    }

    /// Whether O_DIRECT reads `len` bytes at `off` into the buffer at
    /// `ptr` as they are, without a bounce buffer (short of the end of
    /// file, which [`read`](Backend::read) handles).
    pub fn takes_read(&self, ptr: *const u8, off: u64, len: usize) -> bool {
        self.readable && self.aligned(ptr, off, len)
    }

    /// Whether O_DIRECT writes `len` bytes at `off` from the buffer at
    /// `ptr` as they are, and in whole filesystem blocks: so a write of
    /// the page cache's path never shares a block with one of O_DIRECT
    /// (see [`write_direct`](Self::write_direct) for what sharing did).
    pub fn takes_write(&self, ptr: *const u8, off: u64, len: usize) -> bool {
        self.writable
            && off.is_multiple_of(self.fs_block)
            && (len as u64).is_multiple_of(self.fs_block)
            && (ptr as usize).is_multiple_of(self.mem_align)
    }

    /// One O_DIRECT write of `bufs` (one buffer that
    /// [`takes_write`](Self::takes_write)) at `at`, an offset or the file
    /// position (which it moves past the data, as write(2)).
    pub fn write_aligned(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        at: WriteAt,
    ) -> io::Result<(u64, usize)> {
        let off = match at {
            WriteAt::Offset(o) | WriteAt::Position(o) => o,
            WriteAt::End | WriteAt::EndPositional => {
                return Err(io::Error::from_raw_os_error(libc::EINVAL))
            }
        };
        let n = sys::pwritev2(self.dfd.as_fd(), bufs, Some(off), RwFlags::NONE)?;
        if let WriteAt::Position(_) = at {
            sys::lseek_set(fd, off + n as u64)?;
        }
        Ok((off, n))
    }
}

/// Write all of `buf` at `off`, adding to `done` as it goes (a short
/// write is retried; 0 bytes written is ENOSPC).
fn write_all_at(fd: BorrowedFd<'_>, buf: &[u8], off: u64, done: &mut usize) -> io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        match sys::pwritev2(
            fd,
            &[IoSlice::new(&buf[at..])],
            Some(off + at as u64),
            RwFlags::NONE,
        ) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            Ok(n) => {
                at += n;
                *done += n;
            }
        }
    }
    Ok(())
}

/// Copy `src` into the scatter list `bufs`, starting `pos` bytes in.
fn scatter(bufs: &mut [IoSliceMut<'_>], mut pos: usize, mut src: &[u8]) {
    for b in bufs.iter_mut() {
        if src.is_empty() {
            return;
        }
        if pos >= b.len() {
            pos -= b.len();
            continue;
        }
        let n = (b.len() - pos).min(src.len());
        b[pos..pos + n].copy_from_slice(&src[..n]);
        src = &src[n..];
        pos = 0;
    }
}

/// Copy from the gather list `bufs`, starting `pos` bytes in, into `dst`.
fn gather(bufs: &[IoSlice<'_>], mut pos: usize, mut dst: &mut [u8]) {
    for b in bufs {
        if dst.is_empty() {
            return;
        }
        if pos >= b.len() {
            pos -= b.len();
            continue;
        }
        let n = (b.len() - pos).min(dst.len());
        dst[..n].copy_from_slice(&b[pos..pos + n]);
        dst = &mut dst[n..];
        pos = 0;
    }
}

impl Backend for Direct {
    // O_DIRECT leaves no pages, but filesystems may fall back to buffered
    // I/O (btrfs does for some writes and for compressed extents), so the
    // tracker still writes behind and cleans up (a cachestat when empty),
    // and each read's own fallback pages go right after it.
    fn caps(&self) -> Caps {
        Caps {
            reads_o_direct: true,
            ..Caps::default()
        }
    }

    fn read(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &mut [IoSliceMut<'_>],
        at: ReadAt,
    ) -> io::Result<usize> {
        if !self.readable {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let n = self.read_direct(bufs, at.offset())?;
        if let ReadAt::Position(pos) = at {
            // The data came through the O_DIRECT descriptor: move this
            // one's position past it, as read(2) would have. (Not atomic
            // against another process using the same open file description
            // at the same moment, as the kernel's own read(2) is.)
            sys::lseek_set(fd, pos + n as u64)?;
        }
        Ok(n)
    }

    fn write(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        at: WriteAt,
        keep_cached: bool,
    ) -> io::Result<(u64, usize)> {
        if keep_cached {
            return pwrite_with_flags(fd, bufs, at, RwFlags::NONE);
        }
        let _guard = self.write_lock.lock().unwrap();
        let off = match at {
            WriteAt::Offset(off) | WriteAt::Position(off) => off,
            WriteAt::End | WriteAt::EndPositional => sys::fstat(fd)?.st_size as u64,
        };
        let n = self.write_direct(fd, bufs, off)?;
        if matches!(at, WriteAt::Position(_) | WriteAt::End) {
            // The data went through the O_DIRECT descriptor: move this
            // one's position past it, as write(2) would have.
            sys::lseek_set(fd, off + n as u64)?;
        }
        Ok((off, n))
    }
}

impl Direct {
    /// Read into `bufs` at `off` through the O_DIRECT descriptor.
    fn read_direct(&self, bufs: &mut [IoSliceMut<'_>], off: u64) -> io::Result<usize> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len == 0 {
            return Ok(0);
        }
        // Never past the block that holds the end of the file: there xfs may
        // keep a delayed-allocation preallocation (left by a buffered write
        // that extended the file), and an O_DIRECT read that meets one fails
        // with EIO ("Direct I/O collision with buffered writes").
        let size = sys::fstat(self.dfd.as_fd())?.st_size as u64;
        if off >= size {
            return Ok(0);
        }
        if bufs.len() == 1
            && self.aligned(bufs[0].as_ptr(), off, len)
            && off + len as u64 <= self.up(size)
        {
            return sys::preadv2(self.dfd.as_fd(), bufs, Some(off), RwFlags::NONE);
        }
        let end = (off + len as u64).min(size);
        let mut buf = self.take_buf();
        let mut copied = 0usize;
        let mut chunk = self.down(off);
        let result = loop {
            if chunk >= end {
                break Ok(copied);
            }
            let chunk_end = (chunk + BOUNCE as u64).min(self.up(end));
            let want = (chunk_end - chunk) as usize;
            let n = match self.read_block(&mut buf.as_mut_slice()[..want], chunk) {
                Ok(n) => n,
                // Return what was read; the error comes back on the next call.
                Err(_) if copied > 0 => break Ok(copied),
                Err(e) => break Err(e),
            };
            let from = off.max(chunk);
            let to = end.min(chunk + n as u64);
            if to > from {
                let src = &buf.as_slice()[(from - chunk) as usize..(to - chunk) as usize];
                scatter(bufs, (from - off) as usize, src);
                copied += src.len();
            }
            if n < want {
                break Ok(copied); // end of file
            }
            chunk = chunk_end;
        };
        self.put_buf(buf);
        result
    }

    /// Write `bufs` at `off` through the O_DIRECT descriptor (under the
    /// write lock); short only on an error after some data went out.
    fn write_direct(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        off: u64,
    ) -> io::Result<usize> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len == 0 {
            return Ok(0);
        }
        if bufs.len() == 1 && self.aligned(bufs[0].as_ptr(), off, len) {
            return sys::pwritev2(self.dfd.as_fd(), bufs, Some(off), RwFlags::NONE);
        }
        if !self.dfd_readable
            && (!off.is_multiple_of(self.align) || !(len as u64).is_multiple_of(self.align))
        {
            // Edges cannot be read back for read-modify-write.
            return pwrite_with_flags(fd, bufs, WriteAt::Offset(off), RwFlags::NONE)
                .map(|(_, n)| n);
        }
        let old_size = sys::fstat(fd)?.st_size as u64;
        let whole_end = off + len as u64;
        // A last filesystem block past the end of the file that the data
        // fills only in part goes through the page cache, all of the
        // write's part of it (the tracker writes it back and drops it):
        // written whole with O_DIRECT and trimmed back, the file would be,
        // until the trim, longer than anything written, with zeroes at its
        // end, which a process killed or a power cut between the two leaves
        // behind. Not split inside the block either (O_DIRECT up to a
        // sector, the rest buffered): the direct write of a new block's
        // start has the kernel zero the rest of the block on the disk
        // (iomap_dio_zero), the buffered tail then reads that block back
        // into the page cache and must write it again, two paths to one
        // block; the 6.12 guest's power cuts (integrity-3, ext4 tree
        // direct) found such a tail, fsynced, never written.
        let end = if !whole_end.is_multiple_of(self.fs_block) && whole_end > old_size {
            (whole_end / self.fs_block * self.fs_block).max(off)
        } else {
            whole_end
        };
        // Nothing for O_DIRECT when the whole write is in that last block.
        let (first, last) = match end > off {
            true => (self.down(off), self.up(end)),
            false => (0, 0),
        };
        let mut buf = self.take_buf();
        let mut chunk = first;
        let mut written = 0usize;
        let result = (|| {
            while chunk < last {
                let chunk_end = (chunk + BOUNCE as u64).min(last);
                let b = &mut buf.as_mut_slice()[..(chunk_end - chunk) as usize];
                let block = self.align as usize;
                // Edges that the caller's data covers only in part keep the file's bytes.
                if off > chunk {
                    self.read_block(&mut b[..block], chunk)?;
                }
                if end < chunk_end && (chunk_end - chunk > self.align || off <= chunk) {
                    let at = b.len() - block;
                    self.read_block(&mut b[at..], chunk_end - self.align)?;
                }
                let from = off.max(chunk);
                let to = end.min(chunk_end);
                gather(
                    bufs,
                    (from - off) as usize,
                    &mut b[(from - chunk) as usize..(to - chunk) as usize],
                );
                self.write_block(b, chunk)?;
                written += (to - from) as usize;
                chunk = chunk_end;
            }
            // A last block written whole inside the old size: trim what an
            // extension by another writer meanwhile may have left past it.
            let wanted = old_size.max(end);
            let now = sys::fstat(fd)?.st_size as u64;
            if end == whole_end && now > wanted && now <= last {
                sys::ftruncate(fd, wanted)?;
            }
            if end < whole_end {
                let mut tail = vec![0u8; (whole_end - end) as usize];
                gather(bufs, (end - off) as usize, &mut tail);
                write_all_at(fd, &tail, end, &mut written)?;
            }
            Ok(len)
        })();
        self.put_buf(buf);
        match result {
            // As write(2): a partial write reports its count; the error recurs next call.
            Err(_) if written > 0 => Ok(written),
            r => r,
        }
    }
}
