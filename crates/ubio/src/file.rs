//! `ubio::File`: a file opened for uncached buffered I/O.

use crate::backend::{Backend, BackendKind, Buffered, Direct, Emulated, Kernel};
use crate::error::context;
use crate::probe::{self, Choice};
use crate::sys;
use crate::tracker::{Tracker, TrackerConfig};
use serde::Serialize;
use std::io::{self, IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Default write-behind window: dirty + writeback bytes per stream.
pub const DEFAULT_WINDOW: u64 = 16 << 20;
/// Default distance that read pages may lag behind the read position.
pub const DEFAULT_READ_LAG: u64 = 4 << 20;

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
    backend: BackendKind,
    window: u64,
    read_lag: u64,
    preserve_cached: bool,
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
            backend: BackendKind::Auto,
            window: DEFAULT_WINDOW,
            read_lag: DEFAULT_READ_LAG,
            preserve_cached: true,
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
        self.backend = backend;
        self
    }
    /// Dirty + writeback bytes a stream may have at once (default 16 MiB).
    pub fn window(&mut self, bytes: u64) -> &mut Self {
        self.window = bytes;
        self
    }
    /// How far behind the read position read pages may stay (default 4 MiB).
    pub fn read_lag(&mut self, bytes: u64) -> &mut Self {
        self.read_lag = bytes;
        self
    }
    /// Keep pages that others had cached before the stream (default true).
    pub fn preserve_cached(&mut self, v: bool) -> &mut Self {
        self.preserve_cached = v;
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
        let ctx = |e| context(e, "open", path);
        let fd = file.as_fd();
        let st = sys::fstat(fd).map_err(ctx)?;
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        let flags = sys::getfl(fd).map_err(ctx)?;
        let fs = probe::fs_caps(fd).map_err(ctx)?;
        let residency_known = !self.preserve_cached || crate::residency::blindness(fd).is_none();
        let choice =
            probe::choose(self.backend, &fs, regular, flags, residency_known).map_err(ctx)?;
        let backend: Box<dyn Backend> = match choice.backend {
            BackendKind::Kernel => Box::new(Kernel),
            BackendKind::Emulated => Box::new(Emulated),
            BackendKind::Direct => {
                let align = fs
                    .dio_align
                    .expect("direct chosen only where alignment is known");
                Box::new(Direct::open(fd, align).map_err(ctx)?)
            }
            BackendKind::Buffered | BackendKind::Auto => Box::new(Buffered),
        };
        let tracker = choice.managed.then(|| {
            let cfg = TrackerConfig {
                window: self.window,
                read_lag: self.read_lag,
                lookahead: fs.lookahead(),
                preserve_cached: self.preserve_cached,
            };
            Mutex::new(Tracker::new(fd, backend.caps(), cfg))
        });
        let pos = if regular {
            sys::lseek_cur(fd).unwrap_or(0)
        } else {
            0
        };
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
            file,
            path: path.map(Path::to_path_buf),
            backend,
            choice,
            tracker,
            regular,
            append: flags & libc::O_APPEND != 0,
            pos,
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            finished: false,
        })
    }
}

/// Per-handle statistics.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub backend: BackendKind,
    pub requested: BackendKind,
    pub reason: String,
    /// False when the page cache of this file is not managed (pass-through).
    pub managed: bool,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Pages this stream dropped from the page cache.
    pub pages_dropped: u64,
    /// Pages that were cached before the stream reached them and were kept.
    pub pages_preserved: u64,
    pub drop_calls: u64,
    pub writeback_starts: u64,
    pub writeback_waits: u64,
    pub writeback_wait_secs: f64,
    pub residency_snapshots: u64,
    /// Why the residency of the file's pages cannot be known, if it cannot
    /// (then nothing is dropped).
    pub residency_unknown: Option<String>,
    /// A writeback error happened during the stream.
    pub failed: bool,
}

/// A file opened for uncached buffered I/O.
///
/// Reads and writes go through the chosen backend; pages the stream brings
/// into the page cache are dropped behind it, writeback is started early and
/// bounded by the window, and pages others had cached stay. `read_at` and
/// `write_at` take `&self`, so threads can share one handle.
#[derive(Debug)]
pub struct File {
    file: std::fs::File,
    path: Option<PathBuf>,
    backend: Box<dyn Backend>,
    choice: Choice,
    tracker: Option<Mutex<Tracker>>,
    regular: bool,
    append: bool,
    /// Position for Read/Write/Seek (positional I/O underneath).
    pos: u64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
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
        &self.choice
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The underlying standard file (for metadata, set_len, ...).
    pub fn get_ref(&self) -> &std::fs::File {
        &self.file
    }

    fn ctx(&self, op: &'static str) -> impl Fn(io::Error) -> io::Error + '_ {
        move |e| context(e, op, self.path.as_deref())
    }

    fn tracker(&self) -> Option<MutexGuard<'_, Tracker>> {
        self.tracker
            .as_ref()
            .map(|t| t.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Read at `off` into `bufs`, without moving the stream position.
    pub fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], off: u64) -> io::Result<usize> {
        let fd = self.file.as_fd();
        let len: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if let Some(mut t) = self.tracker() {
            t.before_read(fd, off, len);
        }
        let n = self.backend.read(fd, bufs, off).map_err(self.ctx("read"))?;
        if let Some(mut t) = self.tracker() {
            t.after_read(fd, off, n as u64);
        }
        self.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    /// Read at `off` into `buf`, without moving the stream position.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.read_vectored_at(&mut [IoSliceMut::new(buf)], off)
    }

    /// Write `bufs` at `off` (at the end of file on an O_APPEND handle, as
    /// pwrite(2) does on Linux), without moving the stream position.
    pub fn write_vectored_at(&self, bufs: &[IoSlice<'_>], off: u64) -> io::Result<usize> {
        let off = (!self.append).then_some(off);
        self.write_inner(bufs, off).map(|(_, n)| n)
    }

    /// Write `buf` at `off`, without moving the stream position.
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

    /// `off` None: append. Returns where the data went and how much.
    fn write_inner(&self, bufs: &[IoSlice<'_>], off: Option<u64>) -> io::Result<(u64, usize)> {
        let fd = self.file.as_fd();
        let len: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let keep_cached = match self.tracker() {
            Some(mut t) => {
                if let Some(e) = t.take_deferred() {
                    return Err(self.ctx("write back")(e));
                }
                let at = match off {
                    Some(o) => o,
                    None => sys::fstat(fd).map_err(self.ctx("stat"))?.st_size as u64,
                };
                t.before_write(fd, at, len)
            }
            None => false,
        };
        let (at, n) = self
            .backend
            .write(fd, bufs, off, keep_cached)
            .map_err(self.ctx("write"))?;
        if let Some(mut t) = self.tracker() {
            t.after_write(fd, at, n as u64);
        }
        self.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
        Ok((at, n))
    }

    /// Start and wait for the writeback of everything written so far, drop
    /// those pages, and report any writeback error not yet reported. Does
    /// not promise durability: use `sync_all`/`sync_data` for that.
    pub fn flush_writeback(&self) -> io::Result<()> {
        match self.tracker() {
            Some(mut t) => t.flush(self.file.as_fd()).map_err(self.ctx("write back")),
            None => Ok(()),
        }
    }

    /// As `std::fs::File::sync_all`, after flushing the write-behind.
    pub fn sync_all(&self) -> io::Result<()> {
        self.flush_writeback()?;
        self.file.sync_all().map_err(self.ctx("fsync"))
    }

    /// As `std::fs::File::sync_data`, after flushing the write-behind.
    pub fn sync_data(&self) -> io::Result<()> {
        self.flush_writeback()?;
        self.file.sync_data().map_err(self.ctx("fdatasync"))
    }

    /// The statistics so far.
    pub fn stats(&self) -> Stats {
        let (counts, preserved, blind, failed) = match self.tracker() {
            Some(t) => (
                t.counts(),
                t.residency().precached_pages(),
                t.residency().blindness().map(|b| b.to_string()),
                t.failed,
            ),
            None => Default::default(),
        };
        Stats {
            backend: self.choice.backend,
            requested: self.choice.requested,
            reason: self.choice.reason.clone(),
            managed: self.choice.managed,
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            pages_dropped: counts.pages_dropped,
            pages_preserved: preserved,
            drop_calls: counts.drop_calls,
            writeback_starts: counts.writeback_starts,
            writeback_waits: counts.writeback_waits,
            writeback_wait_secs: counts.writeback_wait_time.as_secs_f64(),
            residency_snapshots: counts.residency_snapshots,
            residency_unknown: blind,
            failed,
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        self.finished = true;
        match self.tracker() {
            Some(mut t) => t.finish(self.file.as_fd()).map_err(self.ctx("close")),
            None => Ok(()),
        }
    }

    /// Flush the write-behind, drop what the stream cached, and report any
    /// deferred error; then close. Returns the final statistics.
    pub fn close(mut self) -> io::Result<Stats> {
        let res = self.finish();
        let stats = self.stats();
        res.map(|()| stats)
    }

    /// As `close`, but hand back the descriptor (positioned at the stream
    /// position) instead of closing it.
    pub fn into_inner(mut self) -> io::Result<std::fs::File> {
        self.finish()?;
        let file = self.file.try_clone().map_err(self.ctx("dup"))?;
        if self.regular {
            let mut f = &file;
            f.seek(SeekFrom::Start(self.pos))
                .map_err(self.ctx("seek"))?;
        }
        Ok(file)
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
        self.read_vectored(&mut [IoSliceMut::new(buf)])
    }
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        if !self.regular {
            return sys::preadv2(self.file.as_fd(), bufs, None, sys::RwFlags::NONE)
                .map_err(self.ctx("read"));
        }
        let n = self.read_vectored_at(bufs, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if !self.regular {
            return sys::pwritev2(self.file.as_fd(), bufs, None, sys::RwFlags::NONE)
                .map_err(self.ctx("write"));
        }
        let off = (!self.append).then_some(self.pos);
        let (at, n) = self.write_inner(bufs, off)?;
        self.pos = at + n as u64;
        Ok(n)
    }
    /// Pushes the write-behind out and waits for it (see `flush_writeback`).
    fn flush(&mut self) -> io::Result<()> {
        self.flush_writeback()
    }
}

impl Seek for File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        if !self.regular {
            return (&self.file).seek(to).map_err(self.ctx("seek"));
        }
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => {
                let size = sys::fstat(self.file.as_fd())
                    .map_err(self.ctx("stat"))?
                    .st_size as u64;
                size.checked_add_signed(d)
            }
        };
        match new {
            Some(n) => {
                self.pos = n;
                Ok(n)
            }
            None => Err(self.ctx("seek")(io::Error::from_raw_os_error(libc::EINVAL))),
        }
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}
