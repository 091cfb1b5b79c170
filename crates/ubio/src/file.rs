//! `ubio::File`: a file opened for uncached buffered I/O.

use crate::backend::BackendKind;
use crate::error::context;
use crate::probe::Choice;
use crate::stream::{Stats, Stream, StreamOptions, WriteError};
use crate::sys;
use std::io::{self, IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Options for opening a [`File`], shaped like `std::fs::OpenOptions`.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
    custom_flags: i32,
    stream: StreamOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    pub fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
            custom_flags: 0,
            stream: StreamOptions::default(),
        }
    }
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        self
    }
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.create_new = v;
        self
    }
    /// Permission bits for a created file (before the umask).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }
    /// Extra open(2) flags, as `std::os::unix::fs::OpenOptionsExt`.
    pub fn custom_flags(&mut self, flags: i32) -> &mut Self {
        self.custom_flags = flags;
        self
    }
    /// Which backend moves the data; `Auto` (the default) picks per file.
    pub fn backend(&mut self, backend: BackendKind) -> &mut Self {
        self.stream.backend = backend;
        self
    }
    /// Dirty + writeback bytes a stream may have at once (default 16 MiB).
    pub fn window(&mut self, bytes: u64) -> &mut Self {
        self.stream.window = bytes;
        self
    }
    /// How far behind the read position read pages may stay (default 4 MiB).
    pub fn read_lag(&mut self, bytes: u64) -> &mut Self {
        self.stream.read_lag = bytes;
        self
    }
    /// Keep pages that others had cached before the stream (default true).
    pub fn preserve_cached(&mut self, v: bool) -> &mut Self {
        self.stream.preserve_cached = v;
        self
    }
    /// When the emulated backend reads through O_DIRECT (default: while
    /// the kernel reclaims the stream's own pages, or where it is faster;
    /// see [`crate::DirectReads`]).
    pub fn direct_reads(&mut self, when: crate::DirectReads) -> &mut Self {
        self.stream.direct_reads = when;
        self
    }
    /// When the emulated backend writes through O_DIRECT (default: where
    /// it is faster; see [`crate::DirectWrites`]).
    pub fn direct_writes(&mut self, when: crate::DirectWrites) -> &mut Self {
        self.stream.direct_writes = when;
        self
    }
    /// When the emulated backend reads ahead in small folios itself
    /// (default: while kswapd reclaims for high-order allocations, on a
    /// device whose readahead reaches 2 MiB folios; see
    /// [`crate::SmallReadahead`]).
    pub fn small_readahead(&mut self, when: crate::SmallReadahead) -> &mut Self {
        self.stream.small_readahead = when;
        self
    }

    /// Open `path` with these options.
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File> {
        let path = path.as_ref();
        let file = std::fs::OpenOptions::new()
            .read(self.read)
            .write(self.write)
            .append(self.append)
            .truncate(self.truncate)
            .create(self.create)
            .create_new(self.create_new)
            .mode(self.mode)
            .custom_flags(self.custom_flags)
            .open(path)
            .map_err(|e| context(e, "open", Some(path)))?;
        self.wrap(file, Some(path))
    }

    /// Take over a file the caller opened (the descriptor's flags decide
    /// what is allowed; the read/write/create options are ignored).
    pub fn wrap(&self, file: std::fs::File, path: Option<&Path>) -> io::Result<File> {
        let fd = file.as_fd();
        let stream = Stream::new(fd, &self.stream).map_err(|e| context(e, "open", path))?;
        let choice = stream.choice();
        log::debug!(
            "{}: backend {} ({})",
            path.map_or_else(
                || format!("fd {}", fd.as_raw_fd()),
                |p| p.display().to_string()
            ),
            choice.backend,
            choice.reason
        );
        Ok(File {
            file: Some(file),
            path: path.map(Path::to_path_buf),
            stream,
            finished: false,
        })
    }
}

/// A file opened for uncached buffered I/O.
///
/// Reads and writes go through the chosen backend; pages the stream brings
/// into the page cache are dropped behind it, writeback is started early and
/// bounded by the window, and pages others had cached stay. `read_at` and
/// `write_at` take `&self`, and Read and Write are implemented for `&File`
/// too (as for `&std::fs::File`), so threads can share one handle.
///
/// The handle is the descriptor it wraps: Read, Write and Seek use and move
/// the open file description's offset as read(2), write(2) and lseek(2) do,
/// so other descriptors of it (the caller's own, a child's that inherited
/// it) see the same offset; `read_at` and `write_at` leave it alone; an
/// O_APPEND file appends.
#[derive(Debug)]
pub struct File {
    /// Some until `close` or `into_inner` takes it.
    file: Option<std::fs::File>,
    path: Option<PathBuf>,
    stream: Stream,
    finished: bool,
}

impl File {
    /// Open for reading with the default options.
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new().read(true).open(path)
    }

    /// Create or truncate for writing with the default options.
    pub fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// The backend in use and why it was chosen.
    pub fn choice(&self) -> &Choice {
        self.stream.choice()
    }

    /// Large aligned writes to this file may go through O_DIRECT (the
    /// emulated backend's race, or `DirectWrites::Always`).
    pub fn may_write_direct(&self) -> bool {
        self.stream.may_write_direct()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The underlying standard file (for metadata, set_len, ...).
    pub fn get_ref(&self) -> &std::fs::File {
        self.file
            .as_ref()
            .expect("a File is open until close or into_inner")
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }

    fn ctx(&self, op: &'static str) -> impl Fn(io::Error) -> io::Error + '_ {
        move |e| context(e, op, self.path.as_deref())
    }

    /// Read at `off` into `bufs`, without moving the file position.
    pub fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], off: u64) -> io::Result<usize> {
        self.stream
            .read_at(self.fd(), bufs, off)
            .map_err(self.ctx("read"))
    }

    /// Read at `off` into `buf`, without moving the file position.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.read_vectored_at(&mut [IoSliceMut::new(buf)], off)
    }

    /// Write `bufs` at `off` (at the end of file on an O_APPEND handle, as
    /// pwrite(2) does on Linux), without moving the file position.
    pub fn write_vectored_at(&self, bufs: &[IoSlice<'_>], off: u64) -> io::Result<usize> {
        self.write_inner(bufs, Some(off)).map(|(_, n)| n)
    }

    /// Write `buf` at `off`, without moving the file position.
    pub fn write_at(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        self.write_vectored_at(&[IoSlice::new(buf)], off)
    }

    /// Write all of `buf` at `off`.
    pub fn write_all_at(&self, mut buf: &[u8], mut off: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, off) {
                Ok(0) => return Err(self.ctx("write")(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    buf = &buf[n..];
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Read exactly `buf.len()` bytes at `off`.
    pub fn read_exact_at(&self, mut buf: &mut [u8], mut off: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, off) {
                Ok(0) => return Err(self.ctx("read")(io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => {
                    buf = &mut buf[n..];
                    off += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `off` None: at the file position (the end for O_APPEND). Returns
    /// where the data went and how much.
    fn write_inner(&self, bufs: &[IoSlice<'_>], off: Option<u64>) -> io::Result<(u64, usize)> {
        self.stream
            .write(self.fd(), bufs, off)
            .map_err(|e| match e {
                WriteError::Deferred(e) => self.ctx("write back")(e),
                WriteError::Now(e) => self.ctx("write")(e),
            })
    }

    /// Copy up to `len` bytes of `src` at `src_off` to `off` in this file
    /// in the kernel (copy_file_range(2): no copy through user space), with
    /// both streams' contract applied: a long copy is made in pieces of
    /// [`PIECE`](crate::PIECE), drop-behind on `src` and write-behind here
    /// after each (one call would copy all of it through the page cache
    /// first). Returns the bytes copied: short only at the source's end or
    /// on an error after some data (the error recurs on the next call).
    /// Both files must be on page-cache backends (not `direct`):
    /// `Unsupported` otherwise.
    pub fn copy_range_from(
        &self,
        src: &File,
        src_off: u64,
        off: u64,
        len: usize,
    ) -> io::Result<usize> {
        if [src, self]
            .iter()
            .any(|f| f.choice().backend == BackendKind::Direct)
        {
            return Err(self.ctx("copy_file_range to")(io::Error::new(
                io::ErrorKind::Unsupported,
                "the direct backend's descriptors bypass the page cache",
            )));
        }
        let (from, to) = (src.fd(), self.fd());
        crate::stream::piecewise(len, crate::PIECE, |done, want| {
            let (src_at, at) = (src_off + done as u64, off + done as u64);
            src.stream.before_external_read(from, src_at, want as u64);
            self.stream.before_external_io(to, at, want as u64);
            let n = sys::copy_file_range(from, src_at, to, at, want, 0)?;
            src.stream.after_external_read(from, src_at, n as u64);
            self.stream.after_external_write(to, at, n as u64);
            Ok(n)
        })
        .map_err(self.ctx("copy_file_range to"))
    }

    /// Start and wait for the writeback of everything written so far, drop
    /// those pages, and report any writeback error not yet reported. Does
    /// not promise durability: use `sync_all`/`sync_data` for that.
    pub fn flush_writeback(&self) -> io::Result<()> {
        self.stream.flush(self.fd()).map_err(self.ctx("write back"))
    }

    /// Start the writeback of everything written so far, without waiting:
    /// `close` (or `flush_writeback`) later waits for it and drops the
    /// pages, by then often without waiting at all. For a program that
    /// writes many small files: close them a few files later instead of
    /// waiting for each in turn.
    pub fn start_writeback(&self) {
        self.stream.start_writeback(self.fd());
    }

    /// As `std::fs::File::sync_all`, after flushing the write-behind.
    pub fn sync_all(&self) -> io::Result<()> {
        self.flush_writeback()?;
        self.get_ref().sync_all().map_err(self.ctx("fsync"))
    }

    /// As `std::fs::File::sync_data`, after flushing the write-behind.
    pub fn sync_data(&self) -> io::Result<()> {
        self.flush_writeback()?;
        self.get_ref().sync_data().map_err(self.ctx("fdatasync"))
    }

    /// The statistics so far.
    pub fn stats(&self) -> Stats {
        self.stream.stats()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.finished = true;
        self.stream.finish(self.fd()).map_err(self.ctx("close"))
    }

    /// Flush the write-behind, drop what the stream cached, and report any
    /// deferred error; then close the descriptor and report close(2)'s
    /// error (NFS reports writeback errors there). Returns the final
    /// statistics.
    pub fn close(mut self) -> io::Result<Stats> {
        let res = self.finish();
        let stats = self.stats();
        let file = self.file.take().expect("open until close");
        let closed = sys::close(file.into()).map_err(self.ctx("close"));
        res.and(closed).map(|()| stats)
    }

    /// As `close`, but hand back the descriptor instead of closing it.
    pub fn into_inner(mut self) -> io::Result<std::fs::File> {
        self.finish()?;
        Ok(self.file.take().expect("open until into_inner"))
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if !self.finished {
            if let Err(e) = self.finish() {
                log::warn!("error at implicit close (use File::close to handle it): {e}");
            }
        }
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }
}

/// As `impl Read for &std::fs::File`: threads may share a File, the stream
/// keeps each read at the position one step for the others.
impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_vectored(&mut [IoSliceMut::new(buf)])
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        if !self.stream.is_regular() {
            return sys::preadv2(self.fd(), bufs, None, sys::RwFlags::NONE)
                .map_err(self.ctx("read"));
        }
        self.stream
            .read(self.fd(), bufs, None)
            .map_err(self.ctx("read"))
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

/// As `impl Write for &std::fs::File` (see `impl Read for &File`).
impl Write for &File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if !self.stream.is_regular() {
            return sys::pwritev2(self.fd(), bufs, None, sys::RwFlags::NONE)
                .map_err(self.ctx("write"));
        }
        self.write_inner(bufs, None).map(|(_, n)| n)
    }
    /// Pushes the write-behind out and waits for it (see `flush_writeback`).
    fn flush(&mut self) -> io::Result<()> {
        self.flush_writeback()
    }
}

/// lseek(2) on the descriptor: the position is the kernel's.
impl Seek for File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.get_ref().seek(to).map_err(self.ctx("seek"))
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}
