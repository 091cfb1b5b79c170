//! Copying a file's data from one ubio stream to another.
//!
//! - Cloned (FICLONE) where the filesystem shares extents: no data moves.
//! - A file of [`PIPELINE_FROM`] or more whose destination may be written
//!   through O_DIRECT (the emulated backend's race) goes through the
//!   pipeline below, whose streams race the page cache against O_DIRECT
//!   in each direction: copy_file_range can only go through the page cache.
//! - Otherwise the kernel copies (copy_file_range) in pieces of 8 MiB, the
//!   streams' contract applied to each piece: one call for a whole file
//!   would copy it through the page cache of both files first (on ext4 a
//!   cold 256 MiB copy left 250 MiB of the source and all 256 MiB of the
//!   destination cached).
//! - Where that cannot be used (the direct backend, zeros to skip, a kernel
//!   or a pair of filesystems that refuses it), a reader thread and the
//!   calling thread (the writer) pass a small ring of page-aligned buffers
//!   between them, so a copy takes about the longer of reading and writing,
//!   not their sum.
//! - Both sides are ubio streams: neither file's new pages stay in the page
//!   cache. Holes are kept (SEEK_DATA/SEEK_HOLE); `Sparse::Always` also
//!   leaves blocks of zeros unwritten.
//! - A source that changes while it is read (shrinks, grows, or is written in
//!   place) is never turned into a plausible wrong copy: the destination ends
//!   at what was read and the copy fails with [`SourceChanged`], as tar says
//!   "file changed as we read it".

use crate::error::context;
use crate::{AlignedBuf, File, OpenOptions, Stats};
use std::fmt;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::mpsc;

/// Holes in the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sparse {
    /// Keep the source's holes.
    #[default]
    Auto,
    /// Keep them and leave blocks of zeros unwritten too.
    Always,
    /// Write every byte (and never clone, which would keep holes).
    Never,
}

/// Cloning (FICLONE) instead of copying data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reflink {
    /// Clone where the filesystem can, copy otherwise.
    #[default]
    Auto,
    /// Clone or fail.
    Always,
    /// Always copy the data.
    Never,
}

/// How to copy.
#[derive(Debug, Clone, Copy)]
pub struct CopyOptions {
    /// Bytes per read and write.
    pub block: usize,
    /// Buffers in flight between the reader and the writer (at least 2 for
    /// them to overlap).
    pub buffers: usize,
    pub sparse: Sparse,
    pub reflink: Reflink,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            block: 1 << 20,
            buffers: 4,
            sparse: Sparse::Auto,
            reflink: Reflink::Auto,
        }
    }
}

/// How a file's data was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// FICLONE: the destination shares the source's extents.
    Clone,
    /// Read and written through ubio streams.
    Stream,
    /// Copied by the kernel (copy_file_range) in pieces, the streams'
    /// contract applied to each.
    CopyFileRange,
}

/// What a copy did.
#[derive(Debug, Clone, Copy)]
pub struct Copied {
    /// The destination's length: the bytes copied, holes included.
    pub bytes: u64,
    /// Bytes left as holes rather than written.
    pub hole_bytes: u64,
    pub method: Method,
}

/// A failed copy: the error (naming the operation and the file) and how far
/// the destination holds the source's bytes.
#[derive(Debug)]
pub struct CopyError {
    pub error: io::Error,
    /// The destination holds the source's first `complete` bytes.
    pub complete: u64,
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for CopyError {}

impl From<CopyError> for io::Error {
    fn from(e: CopyError) -> Self {
        e.error
    }
}

/// How the source changed while it was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It ended before the size it had when the copy began.
    Shrank,
    /// It went on past that size.
    Grew,
    /// Its size is the same but it was written (mtime or ctime moved).
    Modified,
}

/// The source changed while it was read: the destination is not a copy of
/// any version of it. Carried inside the `io::Error` of a [`CopyError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceChanged {
    pub change: Change,
    /// The source's size when the copy began.
    pub size_before: u64,
    /// The bytes read (the destination's length).
    pub read: u64,
}

impl fmt::Display for SourceChanged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.change {
            Change::Shrank => "it shrank",
            Change::Grew => "it grew",
            Change::Modified => "it was written",
        };
        write!(
            f,
            "file changed as we read it ({how}: {} bytes at the start, {} read)",
            self.size_before, self.read
        )
    }
}

impl std::error::Error for SourceChanged {}

impl SourceChanged {
    /// The `SourceChanged` inside `err`, looking through the context.
    pub fn of(err: &io::Error) -> Option<&SourceChanged> {
        let inner = err.get_ref()?;
        if let Some(c) = inner.downcast_ref::<SourceChanged>() {
            return Some(c);
        }
        inner
            .downcast_ref::<crate::error::Error>()
            .and_then(|e| SourceChanged::of(&e.source))
    }
}

/// What identifies a version of the source: compared before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of(meta: &std::fs::Metadata) -> Self {
        Version {
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Copy all of `src` into `dst` (opened for writing, normally empty), as
/// [`CopyOptions`] says; `progress` is called with each number of bytes done
/// (holes included). Does not flush or sync `dst`: close it (or call
/// `sync_all`) to learn of deferred write errors.
pub fn copy(
    src: &File,
    dst: &File,
    opts: &CopyOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Copied, CopyError> {
    let fail = |error, complete| CopyError { error, complete };
    let meta = src
        .get_ref()
        .metadata()
        .map_err(|e| fail(context(e, "stat", src.path()), 0))?;
    // Stated once: a destination that is not a regular file (a pipe, a
    // socket or a terminal) is written in order (see `pipeline`).
    let dst_meta = dst.get_ref().metadata();
    if !meta.is_file() {
        // A fifo or a device: read until its end, no holes, no size to check.
        let regular = dst_meta.is_ok_and(|m| m.is_file());
        let piped = pipeline(src, dst, opts, Plan::Sequential, regular, progress)?;
        return Ok(Copied {
            bytes: piped.end,
            hole_bytes: 0,
            method: Method::Stream,
        });
    }
    let before = Version::of(&meta);
    // A pipe, a socket or a terminal: written in order, holes as zeros,
    // no length to set (GNU cp's sparse-to-pipe).
    let dst_meta = dst_meta.map_err(|e| fail(context(e, "stat", dst.path()), 0))?;
    if !dst_meta.is_file() {
        let plan = Plan::Segments {
            segments: vec![(0, before.size)],
            size: before.size,
        };
        let piped = pipeline(src, dst, opts, plan, false, progress)?;
        return Ok(Copied {
            bytes: piped.end,
            hole_bytes: 0,
            method: Method::Stream,
        });
    }
    if try_clone(src, dst, opts).map_err(|e| fail(e, 0))? {
        progress(before.size);
        return Ok(Copied {
            bytes: before.size,
            hole_bytes: 0,
            method: Method::Clone,
        });
    }
    let segments = data_segments(src, before.size, opts.sparse);
    let plan = Plan::Segments {
        segments,
        size: before.size,
    };
    let piped = match kernel_copy(src, dst, opts, &plan, progress)? {
        Some(piped) => piped,
        None => pipeline(src, dst, opts, plan, true, progress)?,
    };
    let bytes = piped.end;
    // The destination ends where the reading ended (a trailing hole counts),
    // truncated only where its length is not that already, as GNU cp does:
    // on ext4 even a truncate to the same size journals the size at once
    // (ext4_setattr calls ext4_truncate, which sets i_disksize to i_size),
    // before delayed allocation has placed the data, so a power cut could
    // leave the copy at its full size over a hole (the 6.1 guest's power
    // cuts saw it).
    progress(bytes - piped.written_end);
    // Stated again: `written_end` counts the holes skipped (--sparse), which
    // extend nothing, so only the file can say its length.
    let len = (dst.get_ref().metadata())
        .map_err(|e| fail(context(e, "stat", dst.path()), piped.written_end))?
        .len();
    if len != bytes {
        dst.get_ref()
            .set_len(bytes)
            .map_err(|e| fail(context(e, "truncate", dst.path()), piped.written_end))?;
    }
    let after = src
        .get_ref()
        .metadata()
        .map(|m| Version::of(&m))
        .map_err(|e| fail(context(e, "stat", src.path()), bytes))?;
    if let Some(change) = changed(&before, &after, bytes) {
        let changed = SourceChanged {
            change,
            size_before: before.size,
            read: bytes,
        };
        return Err(fail(
            context(io::Error::other(changed), "read", src.path()),
            bytes,
        ));
    }
    Ok(Copied {
        bytes,
        hole_bytes: bytes - piped.written,
        method: piped.method,
    })
}

/// Copy `plan` with copy_file_range in pieces (the kernel moves the data,
/// no copy through user space: with it `ubio cp` reached `ubio run -- cp`,
/// which the pipeline alone did not; bench/runs/2026-11-24-truth), with the
/// contract applied to each piece. None
/// where it cannot be used, before anything was copied: `--reflink=never`
/// and `--sparse=never` (it may share extents or keep holes), blocks of
/// zeros to skip, the direct backend, a size of 0 (a /proc file: the kernel
/// would copy nothing), or a kernel or filesystem pair that refuses it;
/// and where the pipeline is faster: [`PIPELINE_FROM`] bytes or more to a
/// destination that may be written through O_DIRECT.
fn kernel_copy(
    src: &File,
    dst: &File,
    opts: &CopyOptions,
    plan: &Plan,
    progress: &mut dyn FnMut(u64),
) -> Result<Option<Piped>, CopyError> {
    let Plan::Segments { segments, size } = plan else {
        return Ok(None);
    };
    // The direct backend: `copy_range_from` refuses it (Unsupported), below.
    if opts.reflink != Reflink::Auto || opts.sparse != Sparse::Auto || *size == 0 {
        return Ok(None);
    }
    if *size >= PIPELINE_FROM && dst.may_write_direct() {
        return Ok(None);
    }
    let mut done = Piped {
        end: 0,
        written_end: 0,
        written: 0,
        method: Method::CopyFileRange,
    };
    for (start, end) in with_tail(segments, *size) {
        let mut offset = start;
        while offset < end {
            let want = (end - offset).min(crate::PIECE as u64) as usize;
            match dst.copy_range_from(src, offset, offset, want) {
                Ok(0) => {
                    done.end = offset;
                    return Ok(Some(done));
                }
                Ok(n) => {
                    offset += n as u64;
                    done.written += n as u64;
                    progress(offset - done.written_end);
                    done.written_end = offset;
                }
                Err(e) if done.written == 0 && refused(&e) => {
                    log::debug!(
                        "{:?}: copy_file_range refused ({e}), copying through buffers",
                        dst.path()
                    );
                    return Ok(None);
                }
                Err(error) => {
                    return Err(CopyError {
                        error,
                        complete: done.written_end,
                    })
                }
            }
        }
    }
    unreachable!("the last segment ends only at the end of the file")
}

/// The smallest file copied through the pipeline rather than by
/// copy_file_range where the destination may be written through O_DIRECT:
/// large enough for the streams' races (a write race moves 32 MiB, a read
/// race 72). A 2 GiB copy on ext4 went from 2,692 to 3,657 MB/s over
/// /dev/shm and from 2,000 to 2,307 on the disk, its CPU from 0.32-0.33
/// s/GB to 0.11-0.14 (bench/runs/2026-12-06-cp-device-limit); copy_file_range
/// stays for smaller files, where no race ends and the kernel's copy
/// saves the user-space one.
pub const PIPELINE_FROM: u64 = 64 << 20;

/// copy_file_range cannot copy between these files (kernel, filesystems).
fn refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || matches!(
            crate::error::raw_os_error(e),
            Some(libc::EXDEV | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS | libc::EBADF)
        )
}

/// Whether the source changed between `before` and `after`, `read` bytes
/// having been read. A size of 0 at the start means "unknown" (files in
/// /proc and /sys say 0 whatever they hold): reading on is expected there.
fn changed(before: &Version, after: &Version, read: u64) -> Option<Change> {
    if before.size == 0 && after.size == 0 && before.mtime == after.mtime {
        return None;
    }
    if read < before.size {
        Some(Change::Shrank)
    } else if read > before.size || after.size > before.size {
        Some(Change::Grew)
    } else if after != before {
        Some(if after.size < before.size {
            Change::Shrank
        } else {
            Change::Modified
        })
    } else {
        None
    }
}

/// Clone `src` into `dst` if allowed and the filesystem can; `Ok(false)` to
/// copy the data instead.
fn try_clone(src: &File, dst: &File, opts: &CopyOptions) -> io::Result<bool> {
    // Cloning keeps holes but cannot write zeros: Sparse::Never copies bytes.
    if opts.reflink == Reflink::Never || opts.sparse == Sparse::Never {
        return Ok(false);
    }
    match crate::sys::ficlone(dst.get_ref().as_fd(), src.get_ref().as_fd()) {
        Ok(()) => Ok(true),
        Err(e) if opts.reflink == Reflink::Always => Err(context(e, "clone to", dst.path())),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(
                    libc::EOPNOTSUPP
                        | libc::EXDEV
                        | libc::EINVAL
                        | libc::ENOTTY
                        | libc::ENOSYS
                        | libc::EPERM
                        | libc::ETXTBSY
                )
            ) =>
        {
            log::debug!("{:?}: no clone ({e}), copying the data", dst.path());
            Ok(false)
        }
        Err(e) => Err(context(e, "clone to", dst.path())),
    }
}

/// The data segments of a regular file of `len` bytes: SEEK_DATA/SEEK_HOLE,
/// or the whole file when holes are not wanted or the filesystem cannot tell.
fn data_segments(src: &File, len: u64, sparse: Sparse) -> Vec<(u64, u64)> {
    if sparse == Sparse::Never || len == 0 {
        return vec![(0, len)];
    }
    let fd = src.get_ref().as_fd();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < len {
        let start = match crate::sys::seek_data(fd, pos) {
            Ok(Some(s)) if s < len => s,
            Ok(_) => break,
            Err(_) => return vec![(0, len)],
        };
        let end = match crate::sys::seek_hole(fd, start) {
            Ok(e) => e.min(len),
            Err(_) => return vec![(0, len)],
        };
        out.push((start, end));
        pos = end;
    }
    out
}

/// What the reader reads.
enum Plan {
    /// A regular file of `size` bytes (at the start): its data segments, then
    /// on from `size` to the real end.
    Segments {
        segments: Vec<(u64, u64)>,
        size: u64,
    },
    /// A fifo or device: read() until the end.
    Sequential,
}

/// The data segments, then on from `size` to the real end: as GNU cp reads
/// on past the size stat() gave, so that a file that grew is seen to have
/// grown and /proc files (size 0) are copied whole.
fn with_tail(segments: &[(u64, u64)], size: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
    segments.iter().copied().chain([(size, u64::MAX)])
}

/// The reader thread's stack: it reads into heap buffers; its frames are small.
pub const READER_STACK: usize = 128 << 10;

/// A filled buffer on its way to the writer.
struct Chunk {
    buf: AlignedBuf,
    offset: u64,
    len: usize,
}

/// What [`pipeline`] did.
struct Piped {
    /// Where the reading stopped: the end of the source as read.
    end: u64,
    /// The end of the last chunk read (data, not a trailing hole).
    written_end: u64,
    /// Bytes written (not holes, not skipped zeros).
    written: u64,
    /// Through buffers, or by copy_file_range.
    method: Method,
}

/// Read `plan` from `src` and write it to `dst` (`regular`: a regular file,
/// written at the chunks' offsets; else written in order); `progress` sees
/// every byte up to the last chunk, holes included. A file that fits in one
/// block is read and written in this thread; anything larger overlaps a
/// reader thread with the writer (this thread) through `opts.buffers` buffers.
fn pipeline(
    src: &File,
    dst: &File,
    opts: &CopyOptions,
    plan: Plan,
    regular: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Piped, CopyError> {
    let block = opts.block.max(1);
    let mut writer = Writer {
        dst,
        skip_zeros: matches!(&plan, Plan::Segments { .. })
            && opts.sparse == Sparse::Always
            && regular,
        sequential: !regular,
        progress,
        written_end: 0,
        written: 0,
    };
    if matches!(&plan, Plan::Segments { size, .. } if *size <= block as u64) {
        return in_turn(src, plan, &mut writer, block);
    }
    let buffers = opts.buffers.max(1);
    let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<Chunk>>(buffers);
    let (empty_tx, empty_rx) = mpsc::channel::<AlignedBuf>();
    for _ in 0..buffers {
        empty_tx
            .send(AlignedBuf::page_aligned(block))
            .expect("the receiver is alive");
    }
    // `move`: the writer's ends of both channels drop when it returns, so a
    // reader waiting for a buffer or sending one wakes up and stops.
    std::thread::scope(move |scope| {
        // A thread that cannot start (a small `ulimit -v`, a thread limit)
        // means reading and writing in turn in this thread, not a failure:
        // the plan goes to the reader only once it runs.
        let (hand_tx, hand_rx) = mpsc::channel::<(Plan, ChannelSink)>();
        let spawned = std::thread::Builder::new()
            .name("ubio-copy-reader".into())
            .stack_size(READER_STACK)
            .spawn_scoped(scope, move || match hand_rx.recv() {
                Ok((plan, mut sink)) => read_plan(src, plan, &mut sink),
                Err(_) => 0,
            });
        let sink = ChannelSink {
            empty: empty_rx,
            full: full_tx,
        };
        let reader = match spawned {
            Ok(reader) => {
                hand_tx
                    .send((plan, sink))
                    .expect("the reader waits for its plan");
                reader
            }
            Err(e) => {
                log::debug!("copy: no reader thread ({e}): reading and writing in turn");
                drop(sink);
                return in_turn(src, plan, &mut writer, block);
            }
        };
        for chunk in full_rx {
            let chunk = chunk.map_err(|error| writer.failed(error))?;
            writer.write(&chunk)?;
            // The reader may have stopped already: then the buffer is not needed.
            let _ = empty_tx.send(chunk.buf);
        }
        // The channel closed: the reader is done (it sent its errors first).
        let end = reader.join().expect("the reader does not panic");
        Ok(writer.done(end))
    })
}

/// Read `plan` and write it in this thread, one buffer at a time.
fn in_turn(src: &File, plan: Plan, writer: &mut Writer, block: usize) -> Result<Piped, CopyError> {
    let mut sink = InlineSink {
        buf: Some(AlignedBuf::page_aligned(block)),
        writer,
        error: None,
    };
    let end = read_plan(src, plan, &mut sink);
    if let Some(error) = sink.error {
        return Err(error);
    }
    Ok(writer.done(end))
}

/// The size of the blocks of zeros `Sparse::Always` leaves unwritten:
/// a filesystem block, whatever the request size (GNU cp uses st_blksize).
const HOLE_BLOCK: usize = 4096;

/// The writing side: chunks arrive in file order; a gap is a hole.
struct Writer<'a> {
    dst: &'a File,
    /// Sparse::Always: blocks of zeros are left as holes.
    skip_zeros: bool,
    /// Not a regular file (a pipe, a terminal): written with write(), in order.
    sequential: bool,
    progress: &'a mut dyn FnMut(u64),
    written_end: u64,
    written: u64,
}

impl Writer<'_> {
    fn write(&mut self, chunk: &Chunk) -> Result<(), CopyError> {
        let data = &chunk.buf[..chunk.len];
        if self.sequential {
            let mut out = self.dst.get_ref();
            std::io::Write::write_all(&mut out, data)
                .map_err(|e| self.failed(context(e, "write", self.dst.path())))?;
            self.written += data.len() as u64;
        } else if self.skip_zeros {
            // Runs of data between blocks of zeros, blocks aligned to the file.
            for (start, end) in data_runs(data, chunk.offset) {
                self.dst
                    .write_all_at(&data[start..end], chunk.offset + start as u64)
                    .map_err(|error| self.failed(error))?;
                self.written += (end - start) as u64;
            }
        } else {
            self.dst
                .write_all_at(data, chunk.offset)
                .map_err(|error| self.failed(error))?;
            self.written += data.len() as u64;
        }
        let end = chunk.offset + chunk.len as u64;
        (self.progress)(end - self.written_end);
        self.written_end = end;
        Ok(())
    }

    /// `error` with how far the destination is complete.
    fn failed(&self, error: io::Error) -> CopyError {
        CopyError {
            error,
            complete: self.written_end,
        }
    }

    fn done(&self, end: u64) -> Piped {
        Piped {
            end,
            written_end: self.written_end,
            written: self.written,
            method: Method::Stream,
        }
    }
}

/// The byte ranges of `data` (at file offset `offset`) that are not
/// blocks of zeros, [`HOLE_BLOCK`] blocks aligned to the file, adjacent
/// runs merged into one.
fn data_runs(data: &[u8], offset: u64) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let to_boundary = HOLE_BLOCK - (offset + start as u64) as usize % HOLE_BLOCK;
        let end = (start + to_boundary).min(data.len());
        if !all_zeros(&data[start..end]) {
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => runs.push((start, end)),
            }
        }
        start = end;
    }
    runs
}

/// Whether `block` holds only zeros: 64 bytes at a time ORed together,
/// which the compiler turns into vector instructions (a byte-by-byte test
/// that stops at the first non-zero byte it does not: 1.8 GB/s against
/// about 90 on this machine, bench/runs/2026-11-26-zero-scan).
fn all_zeros(block: &[u8]) -> bool {
    let mut words = block.chunks_exact(64);
    words.all(|w| w.iter().fold(0, |acc, &b| acc | b) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// Where the reader gets empty buffers and delivers chunks.
trait Sink {
    /// An empty buffer; None when the writer has stopped.
    fn empty(&mut self) -> Option<AlignedBuf>;
    /// Deliver a chunk or a read error; false when the writer has stopped.
    fn full(&mut self, chunk: io::Result<Chunk>) -> bool;
}

/// To a writer thread through channels.
struct ChannelSink {
    empty: mpsc::Receiver<AlignedBuf>,
    full: mpsc::SyncSender<io::Result<Chunk>>,
}

impl Sink for ChannelSink {
    fn empty(&mut self) -> Option<AlignedBuf> {
        self.empty.recv().ok()
    }
    fn full(&mut self, chunk: io::Result<Chunk>) -> bool {
        self.full.send(chunk).is_ok()
    }
}

/// Straight to the writer, in the reader's thread, with one buffer.
struct InlineSink<'w, 'a> {
    buf: Option<AlignedBuf>,
    writer: &'w mut Writer<'a>,
    error: Option<CopyError>,
}

impl Sink for InlineSink<'_, '_> {
    fn empty(&mut self) -> Option<AlignedBuf> {
        self.buf.take()
    }
    fn full(&mut self, chunk: io::Result<Chunk>) -> bool {
        let written = chunk
            .map_err(|e| self.writer.failed(e))
            .and_then(|chunk| self.writer.write(&chunk).map(|()| chunk.buf));
        match written {
            Ok(buf) => {
                self.buf = Some(buf);
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}

/// Read `plan` from `src` into `sink`'s buffers, in file order, until the
/// end, a read error (delivered) or the writer stopping. Returns where the
/// reading stopped.
fn read_plan(src: &File, plan: Plan, sink: &mut dyn Sink) -> u64 {
    // Fill one buffer (at most `max` bytes) with `read` and deliver it as the
    // chunk at `offset`. None at the end of the file, after an error, or
    // when the writer has stopped.
    let mut next = |offset: u64,
                    max: u64,
                    read: &mut dyn FnMut(&mut [u8]) -> io::Result<usize>|
     -> Option<usize> {
        let mut buf = sink.empty()?;
        let want = (buf.len() as u64).min(max) as usize;
        match read(&mut buf[..want]) {
            Ok(0) => None,
            Ok(len) => sink.full(Ok(Chunk { buf, offset, len })).then_some(len),
            Err(e) => {
                sink.full(Err(e));
                None
            }
        }
    };
    match plan {
        Plan::Sequential => {
            let mut offset = 0;
            let mut file = src.get_ref();
            while let Some(n) = next(offset, u64::MAX, &mut |buf| {
                retry(|| file.read(buf)).map_err(|e| context(e, "read", src.path()))
            }) {
                offset += n as u64;
            }
            offset
        }
        Plan::Segments { segments, size } => {
            for (start, end) in with_tail(&segments, size) {
                let mut offset = start;
                while offset < end {
                    let at = offset;
                    match next(at, end - at, &mut |buf| retry(|| src.read_at(buf, at))) {
                        Some(n) => offset += n as u64,
                        // The end of the file (before `end` if it shrank: the
                        // caller compares with the size), or a stop.
                        None => return offset,
                    }
                }
            }
            unreachable!("the last segment ends only at the end of the file")
        }
    }
}

/// `f` again while it is interrupted by a signal.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// What [`copy_path`] did: the copy and both streams' final statistics.
#[derive(Debug, Clone)]
pub struct PathCopied {
    pub copied: Copied,
    pub src: Stats,
    pub dst: Stats,
}

/// Copy the file at `src` to `dst` (created or truncated, with the source's
/// permission bits) through two ubio streams opened with `open`, then flush
/// the destination's write-behind and close both: the whole of a copy for a
/// program that has two paths. The destination is not synced.
pub fn copy_path(
    src: &Path,
    dst: &Path,
    open: &OpenOptions,
    opts: &CopyOptions,
) -> Result<PathCopied, CopyError> {
    let fail = |error| CopyError { error, complete: 0 };
    let input = open
        .clone()
        .read(true)
        .write(false)
        .open(src)
        .map_err(fail)?;
    let mode = input
        .get_ref()
        .metadata()
        .map_err(|e| fail(context(e, "stat", Some(src))))?
        .permissions()
        .mode();
    let output = open
        .clone()
        .read(false)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode & 0o7777)
        .open(dst)
        .map_err(fail)?;
    let copied = copy(&input, &output, opts, &mut |_| {})?;
    let dst_stats = output.close().map_err(|error| CopyError {
        error,
        // A deferred write error: nothing written is known to be there.
        complete: 0,
    })?;
    let src_stats = input.close().map_err(|error| CopyError {
        error,
        complete: copied.bytes,
    })?;
    Ok(PathCopied {
        copied,
        src: src_stats,
        dst: dst_stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// --sparse=always's runs: a lone non-zero byte anywhere in a block
    /// (in a 64-byte word, in the tail after the last whole word) keeps
    /// the block; blocks are aligned to the file, not to the chunk.
    #[test]
    fn copy_zero_blocks_are_found_whatever_byte_is_not_zero() {
        let mut data = vec![0u8; 4 * HOLE_BLOCK + 100];
        assert!(data_runs(&data, 0).is_empty());
        for at in [0, 63, 64, 4095, 4096 + 4032, 2 * 4096 + 17, 4 * 4096 + 99] {
            data[at] = 1;
            let block = at / HOLE_BLOCK * HOLE_BLOCK;
            let end = (block + HOLE_BLOCK).min(data.len());
            assert_eq!(data_runs(&data, 0), vec![(block, end)], "byte {at}");
            data[at] = 0;
        }
        // Data in the file's first and fourth blocks, zeros between, the
        // chunk at file offset 4000: its first 96 bytes end the first block.
        data[10] = 1;
        data[96 + 2 * HOLE_BLOCK + 5] = 1;
        assert_eq!(
            data_runs(&data, 4000),
            vec![(0, 96), (96 + 2 * HOLE_BLOCK, 96 + 3 * HOLE_BLOCK)]
        );
        // A tail shorter than a word, after whole words of zeros.
        let mut short = vec![0u8; 64 * 3 + 5];
        assert!(all_zeros(&short));
        short[64 * 3 + 4] = 9;
        assert!(!all_zeros(&short));
    }
}
