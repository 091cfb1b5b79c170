//! The C API of ubio: `libubio` and `ubio.h` (generated from this file by
//! cbindgen; tests/header.rs checks the checked-in copy is current).
//!
//! Every function catches panics and returns its error value; errors set
//! errno and a thread-local message (`ubio_last_error`). The handle is an
//! `RwLock<ubio::File>`: positional calls share it, calls that move the
//! descriptor's offset take it alone (the direct backend moves it in a
//! second call, after the data).

#![allow(non_camel_case_types)]

pub mod ops;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use ubio::residency::{FileCount, Source};
use ubio::BackendKind;

/// Pick the fastest backend that keeps the contract for the file.
pub const UBIO_BACKEND_AUTO: c_int = 0;
/// preadv2()/pwritev2() with RWF_DONTCACHE (Linux 6.14+, some filesystems).
pub const UBIO_BACKEND_KERNEL: c_int = 1;
/// Buffered I/O plus fadvise(DONTNEED), sync_file_range() and cachestat().
pub const UBIO_BACKEND_EMULATED: c_int = 2;
/// O_DIRECT through aligned bounce buffers.
pub const UBIO_BACKEND_DIRECT: c_int = 3;
/// Plain buffered I/O: the baseline; the page cache is not managed.
pub const UBIO_BACKEND_BUFFERED: c_int = 4;

/// `ubio_evict` flag: write dirty pages back (and wait) before dropping.
pub const UBIO_EVICT_SYNC: c_uint = 1;

/// Fill `ubio_stats.reason`, `ubio_probe.fs_type` and friends up to this many bytes.
pub const UBIO_REASON_LEN: usize = 256;

const BACKENDS: [(c_int, BackendKind); 5] = [
    (UBIO_BACKEND_AUTO, BackendKind::Auto),
    (UBIO_BACKEND_KERNEL, BackendKind::Kernel),
    (UBIO_BACKEND_EMULATED, BackendKind::Emulated),
    (UBIO_BACKEND_DIRECT, BackendKind::Direct),
    (UBIO_BACKEND_BUFFERED, BackendKind::Buffered),
];

fn backend_code(kind: BackendKind) -> c_int {
    BACKENDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or(-1, |b| b.0)
}

/// How a file is streamed. Initialise with `ubio_options_init` (a NULL
/// options pointer means these defaults), then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ubio_options {
    /// One of UBIO_BACKEND_* (default UBIO_BACKEND_AUTO).
    pub backend: c_int,
    /// Dirty + writeback bytes a writing stream may have at once (default 16 MiB).
    pub window: u64,
    /// How far behind the read position read pages may stay (default 4 MiB).
    pub read_lag: u64,
    /// Keep pages that were cached before the stream reached them (default true).
    pub preserve_cached: bool,
}

impl Default for ubio_options {
    fn default() -> Self {
        ubio_options {
            backend: UBIO_BACKEND_AUTO,
            window: ubio::DEFAULT_WINDOW,
            read_lag: ubio::DEFAULT_READ_LAG,
            preserve_cached: true,
        }
    }
}

impl ubio_options {
    fn to_open_options(self) -> io::Result<ubio::OpenOptions> {
        let backend = BACKENDS
            .iter()
            .find(|(c, _)| *c == self.backend)
            .map(|b| b.1)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unknown backend {} (expected UBIO_BACKEND_*)", self.backend),
                )
            })?;
        let mut o = ubio::OpenOptions::new();
        o.backend(backend)
            .window(self.window)
            .read_lag(self.read_lag)
            .preserve_cached(self.preserve_cached);
        Ok(o)
    }
}

/// Per-handle statistics (`ubio_stats`, `ubio_close`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ubio_stats {
    /// The backend in use (UBIO_BACKEND_*) and the one asked for.
    pub backend: c_int,
    pub requested: c_int,
    /// False when the file's page cache is not managed (pass-through).
    pub managed: bool,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Pages this handle dropped from the page cache.
    pub pages_dropped: u64,
    /// Pages cached before the handle reached them, and kept.
    pub pages_preserved: u64,
    pub drop_calls: u64,
    pub writeback_starts: u64,
    pub writeback_waits: u64,
    pub writeback_wait_secs: f64,
    /// False when the residency of the file's pages cannot be known (then
    /// nothing is dropped); `reason` says why.
    pub residency_known: bool,
    /// A writeback error happened during the stream.
    pub failed: bool,
    /// Why the backend was chosen (and why residency is unknown, if it is), NUL-terminated.
    pub reason: [c_char; UBIO_REASON_LEN],
}

impl From<&ubio::Stats> for ubio_stats {
    fn from(s: &ubio::Stats) -> Self {
        let mut reason = s.reason.clone();
        if let Some(why) = &s.residency_unknown {
            reason = format!("{reason}; residency unknown: {why}");
        }
        ubio_stats {
            backend: backend_code(s.backend),
            requested: backend_code(s.requested),
            managed: s.managed,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            pages_dropped: s.pages_dropped,
            pages_preserved: s.pages_preserved,
            drop_calls: s.drop_calls,
            writeback_starts: s.writeback_starts,
            writeback_waits: s.writeback_waits,
            writeback_wait_secs: s.writeback_wait_secs,
            residency_known: s.residency_unknown.is_none(),
            failed: s.failed,
            reason: c_text(&reason),
        }
    }
}

/// What `ubio_probe` found for a path.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ubio_probe {
    /// The backend UBIO_BACKEND_AUTO picks for it, and why.
    pub auto_backend: c_int,
    pub auto_reason: [c_char; UBIO_REASON_LEN],
    /// RWF_DONTCACHE works on its filesystem.
    pub dontcache: bool,
    /// O_DIRECT works on its filesystem.
    pub direct_io: bool,
    /// cachestat() works on it (the caller can write or owns it, Linux 6.5+).
    pub cachestat: bool,
    /// mincore() tells the truth about it (false for files the caller cannot write).
    pub mincore_trustworthy: bool,
    pub regular_file: bool,
    /// The filesystem type ("ext4") and the kernel release, NUL-terminated.
    pub fs_type: [c_char; 32],
    pub kernel: [c_char; 64],
}

/// A file's pages in the page cache (`ubio_cachestat`, `ubio_evict`).
/// Counts cachestat() cannot give (when mincore() was used) are UINT64_MAX.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ubio_cachestat {
    pub size_bytes: u64,
    pub page_size: u64,
    pub pages: u64,
    pub cached: u64,
    pub dirty: u64,
    pub writeback: u64,
    pub evicted: u64,
    pub recently_evicted: u64,
    /// The counts come from mincore(): `cached` only, an upper bound for
    /// files the caller cannot write.
    pub from_mincore: bool,
}

impl From<&FileCount> for ubio_cachestat {
    fn from(info: &FileCount) -> Self {
        let c = &info.count;
        let unknown = u64::MAX;
        ubio_cachestat {
            size_bytes: info.size_bytes,
            page_size: ubio::sys::page_size(),
            pages: info.pages,
            cached: c.cached,
            dirty: c.dirty.unwrap_or(unknown),
            writeback: c.writeback.unwrap_or(unknown),
            evicted: c.evicted.unwrap_or(unknown),
            recently_evicted: c.recently_evicted.unwrap_or(unknown),
            from_mincore: c.source != Source::Cachestat,
        }
    }
}

/// An open ubio handle (opaque).
pub struct ubio_file {
    // I/O shares the lock (the stream keeps each read or write at the
    // position one step for the other threads, as the kernel does);
    // ubio_seek takes it alone, so that it waits for a read or write at the
    // position in progress, as lseek(2) does.
    file: RwLock<ubio::File>,
}

impl ubio_file {
    fn shared(&self) -> RwLockReadGuard<'_, ubio::File> {
        self.file.read().unwrap_or_else(|e| e.into_inner())
    }
    fn exclusive(&self) -> RwLockWriteGuard<'_, ubio::File> {
        self.file.write().unwrap_or_else(|e| e.into_inner())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn c_text<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    let mut end = s.len().min(N - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    for (o, b) in out.iter_mut().zip(&s.as_bytes()[..end]) {
        *o = *b as c_char;
    }
    out
}

fn set_errno(n: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = n };
}

fn record(err: &io::Error) {
    let msg = err.to_string().replace('\0', "");
    LAST_ERROR.with(|m| *m.borrow_mut() = CString::new(msg).unwrap_or_default());
    set_errno(ops::errno_of(err));
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// Run `f`; on an error or a panic, record it and return `failed`.
fn call<T>(failed: T, f: impl FnOnce() -> io::Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            record(&e);
            failed
        }
        Err(_) => {
            record(&io::Error::other("internal error (panic in libubio)"));
            failed
        }
    }
}

fn ssize(n: io::Result<usize>) -> io::Result<libc::ssize_t> {
    n.map(|n| n as libc::ssize_t)
}

/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives the returned path.
unsafe fn path_arg<'a>(p: *const c_char) -> io::Result<&'a Path> {
    if p.is_null() {
        return Err(invalid("path is NULL"));
    }
    // SAFETY: the caller passes a NUL-terminated string (header contract).
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    Ok(Path::new(std::ffi::OsStr::from_bytes(bytes)))
}

/// # Safety
/// `opts` is NULL or points to a valid `ubio_options`.
unsafe fn options_arg(opts: *const ubio_options) -> io::Result<ubio::OpenOptions> {
    // SAFETY: NULL or valid, per the header.
    unsafe { opts.as_ref() }
        .copied()
        .unwrap_or_default()
        .to_open_options()
}

/// # Safety
/// `f` is NULL or a handle from ubio_open/ubio_wrap_fd not yet closed.
unsafe fn handle<'a>(f: *const ubio_file) -> io::Result<&'a ubio_file> {
    // SAFETY: NULL or live, per the header.
    unsafe { f.as_ref() }.ok_or_else(|| invalid("ubio_file is NULL"))
}

/// # Safety
/// `iov` is NULL or points to `n` iovecs.
unsafe fn check_iov(iov: *const libc::iovec, n: c_int) -> io::Result<usize> {
    if n < 0 || (n > 0 && iov.is_null()) {
        return Err(invalid("bad iovec array"));
    }
    if n > 0 {
        // SAFETY: `n` readable iovecs, per the contract.
        let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
        if v.iter().any(|e| e.iov_base.is_null() && e.iov_len > 0) {
            return Err(invalid("buffer is NULL"));
        }
    }
    Ok(n as usize)
}

/// # Safety
/// `iov` points to `n` iovecs whose buffers are valid for writes.
unsafe fn iov_mut<'a>(iov: *const libc::iovec, n: c_int) -> io::Result<&'a mut [IoSliceMut<'a>]> {
    // SAFETY: per this function's contract.
    let n = unsafe { check_iov(iov, n)? };
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: IoSliceMut is ABI-compatible with struct iovec on Unix (std
    // documents it); the array and its buffers are valid, per the header.
    // The array is only read (IoSliceMut::advance is never called on it).
    Ok(unsafe { std::slice::from_raw_parts_mut(iov as *mut IoSliceMut<'a>, n) })
}

/// # Safety
/// `iov` points to `n` iovecs whose buffers are valid for reads.
unsafe fn iov_ref<'a>(iov: *const libc::iovec, n: c_int) -> io::Result<&'a [IoSlice<'a>]> {
    // SAFETY: per this function's contract.
    let n = unsafe { check_iov(iov, n)? };
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: IoSlice is ABI-compatible with struct iovec on Unix; valid per the header.
    Ok(unsafe { std::slice::from_raw_parts(iov as *const IoSlice<'a>, n) })
}

fn offset(off: libc::off_t) -> io::Result<u64> {
    u64::try_from(off).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The defaults: backend auto, window 16 MiB, read lag 4 MiB, preserve cached pages.
///
/// # Safety
/// `opts` is NULL (nothing happens) or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ubio_options_init(opts: *mut ubio_options) {
    // SAFETY: NULL or valid, per the doc.
    if let Some(o) = unsafe { opts.as_mut() } {
        *o = ubio_options::default();
    }
}

/// Open `path` as open(2) would with `flags` (O_RDONLY, O_WRONLY, O_RDWR,
/// O_CREAT, O_TRUNC, O_APPEND, O_EXCL, ...) and `mode` (for O_CREAT), and
/// stream it with `opts` (NULL: defaults). Returns NULL on error.
///
/// # Safety
/// `path` is a NUL-terminated string; `opts` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn ubio_open(
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    opts: *const ubio_options,
) -> *mut ubio_file {
    call(std::ptr::null_mut(), || {
        // SAFETY: per this function's contract.
        let (path, mut o) = unsafe { (path_arg(path)?, options_arg(opts)?) };
        let acc = flags & libc::O_ACCMODE;
        let known = libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_APPEND;
        o.read(acc == libc::O_RDONLY || acc == libc::O_RDWR)
            .write(acc == libc::O_WRONLY || acc == libc::O_RDWR)
            .append(flags & libc::O_APPEND != 0)
            .truncate(flags & libc::O_TRUNC != 0)
            .create(flags & libc::O_CREAT != 0)
            .create_new(flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0)
            .mode(mode)
            .custom_flags(flags & !known);
        let file = o.open(path)?;
        Ok(Box::into_raw(Box::new(ubio_file {
            file: RwLock::new(file),
        })))
    })
}

/// Stream a descriptor the caller opened (and keeps: ubio works on a
/// duplicate, closed by `ubio_close`; `fd` stays open and the caller's
/// own fsync()/fdatasync() on it remain the durability point). The
/// duplicate shares `fd`'s open file description, so the handle behaves as
/// `fd` would: ubio_read/ubio_write/ubio_seek use and move `fd`'s offset as
/// read(2)/write(2)/lseek(2) do, the caller's own read, write and lseek on
/// `fd` (or a child's on an inherited copy) move the handle's, and
/// ubio_pread/ubio_pwrite move neither. Returns NULL on error.
///
/// # Safety
/// `opts` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn ubio_wrap_fd(fd: c_int, opts: *const ubio_options) -> *mut ubio_file {
    call(std::ptr::null_mut(), || {
        // SAFETY: per this function's contract.
        let o = unsafe { options_arg(opts)? };
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        // SAFETY: only borrowed for the dup; the caller keeps `fd` open meanwhile.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let dup = borrowed
            .try_clone_to_owned()
            .map_err(|e| ubio::error::context(e, "dup", None))?;
        let file = o.wrap(std::fs::File::from(dup), None)?;
        Ok(Box::into_raw(Box::new(ubio_file {
            file: RwLock::new(file),
        })))
    })
}

/// The descriptor the handle does its I/O on (owned by the handle).
///
/// # Safety
/// `f` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn ubio_fd(f: *const ubio_file) -> c_int {
    // SAFETY: per this function's contract.
    call(-1, || Ok(unsafe { handle(f)? }.shared().as_raw_fd()))
}

/// As read(2), at the descriptor's offset, which moves past the data.
///
/// # Safety
/// `f` is a live handle; `buf` is valid for writes of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn ubio_read(
    f: *mut ubio_file,
    buf: *mut c_void,
    count: usize,
) -> libc::ssize_t {
    let iov = libc::iovec {
        iov_base: buf,
        iov_len: count,
    };
    // SAFETY: per this function's contract.
    unsafe { ubio_readv(f, &iov, 1) }
}

/// As write(2), at the descriptor's offset (at the end with O_APPEND),
/// which moves past the data.
///
/// # Safety
/// `f` is a live handle; `buf` is valid for reads of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn ubio_write(
    f: *mut ubio_file,
    buf: *const c_void,
    count: usize,
) -> libc::ssize_t {
    let iov = libc::iovec {
        iov_base: buf.cast_mut(),
        iov_len: count,
    };
    // SAFETY: per this function's contract (the buffer is only read).
    unsafe { ubio_writev(f, &iov, 1) }
}

/// As pread(2): at `offset`; the descriptor's offset does not move.
///
/// # Safety
/// `f` is a live handle; `buf` is valid for writes of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn ubio_pread(
    f: *mut ubio_file,
    buf: *mut c_void,
    count: usize,
    offset: libc::off_t,
) -> libc::ssize_t {
    let iov = libc::iovec {
        iov_base: buf,
        iov_len: count,
    };
    // SAFETY: per this function's contract.
    unsafe { ubio_preadv(f, &iov, 1, offset) }
}

/// As pwrite(2): at `offset` (at the end with O_APPEND, as Linux does).
///
/// # Safety
/// `f` is a live handle; `buf` is valid for reads of `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn ubio_pwrite(
    f: *mut ubio_file,
    buf: *const c_void,
    count: usize,
    offset: libc::off_t,
) -> libc::ssize_t {
    let iov = libc::iovec {
        iov_base: buf.cast_mut(),
        iov_len: count,
    };
    // SAFETY: per this function's contract (the buffer is only read).
    unsafe { ubio_pwritev(f, &iov, 1, offset) }
}

/// As readv(2).
///
/// # Safety
/// `f` is a live handle; `iov` holds `iovcnt` valid, writable buffers.
#[no_mangle]
pub unsafe extern "C" fn ubio_readv(
    f: *mut ubio_file,
    iov: *const libc::iovec,
    iovcnt: c_int,
) -> libc::ssize_t {
    call(-1, || {
        // SAFETY: per this function's contract.
        let (h, v) = unsafe { (handle(f)?, iov_mut(iov, iovcnt)?) };
        ssize((&*h.shared()).read_vectored(v))
    })
}

/// As writev(2).
///
/// # Safety
/// `f` is a live handle; `iov` holds `iovcnt` valid buffers.
#[no_mangle]
pub unsafe extern "C" fn ubio_writev(
    f: *mut ubio_file,
    iov: *const libc::iovec,
    iovcnt: c_int,
) -> libc::ssize_t {
    call(-1, || {
        // SAFETY: per this function's contract.
        let (h, v) = unsafe { (handle(f)?, iov_ref(iov, iovcnt)?) };
        ssize((&*h.shared()).write_vectored(v))
    })
}

/// As preadv(2).
///
/// # Safety
/// `f` is a live handle; `iov` holds `iovcnt` valid, writable buffers.
#[no_mangle]
pub unsafe extern "C" fn ubio_preadv(
    f: *mut ubio_file,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: libc::off_t,
) -> libc::ssize_t {
    call(-1, || {
        // SAFETY: per this function's contract.
        let (h, v) = unsafe { (handle(f)?, iov_mut(iov, iovcnt)?) };
        ssize(h.shared().read_vectored_at(v, self::offset(offset)?))
    })
}

/// As pwritev(2).
///
/// # Safety
/// `f` is a live handle; `iov` holds `iovcnt` valid buffers.
#[no_mangle]
pub unsafe extern "C" fn ubio_pwritev(
    f: *mut ubio_file,
    iov: *const libc::iovec,
    iovcnt: c_int,
    offset: libc::off_t,
) -> libc::ssize_t {
    call(-1, || {
        // SAFETY: per this function's contract.
        let (h, v) = unsafe { (handle(f)?, iov_ref(iov, iovcnt)?) };
        ssize(h.shared().write_vectored_at(v, self::offset(offset)?))
    })
}

/// As lseek(2) on the descriptor (SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA,
/// SEEK_HOLE): the new offset, or -1 with errno as lseek(2) sets it.
///
/// # Safety
/// `f` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn ubio_seek(
    f: *mut ubio_file,
    offset: libc::off_t,
    whence: c_int,
) -> libc::off_t {
    call(-1, || {
        // SAFETY: per this function's contract.
        let h = unsafe { handle(f)? }.exclusive();
        let pos = ubio::sys::lseek(h.as_fd(), offset, whence)
            .map_err(|e| ubio::error::context(e, "seek", h.path()))?;
        Ok(pos as libc::off_t)
    })
}

/// Write back everything written so far, wait, drop those pages, and
/// report any writeback error not yet reported. No durability promise:
/// use ubio_sync (or fsync() on your own descriptor) for that. 0 or -1.
///
/// # Safety
/// `f` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn ubio_flush(f: *mut ubio_file) -> c_int {
    // SAFETY: per this function's contract.
    call(-1, || {
        unsafe { handle(f)? }.shared().flush_writeback().map(|()| 0)
    })
}

/// ubio_flush, then fdatasync() (`data_only`) or fsync(). 0 or -1.
///
/// # Safety
/// `f` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn ubio_sync(f: *mut ubio_file, data_only: bool) -> c_int {
    call(-1, || {
        // SAFETY: per this function's contract.
        let h = unsafe { handle(f)? }.shared();
        if data_only {
            h.sync_data()?
        } else {
            h.sync_all()?
        }
        Ok(0)
    })
}

/// The statistics so far into `out`. 0 or -1.
///
/// # Safety
/// `f` is a live handle; `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ubio_stats(f: *const ubio_file, out: *mut ubio_stats) -> c_int {
    call(-1, || {
        // SAFETY: per this function's contract.
        let h = unsafe { handle(f)? };
        // SAFETY: valid for writes or NULL, per the header.
        let out = unsafe { out.as_mut() }.ok_or_else(|| invalid("stats pointer is NULL"))?;
        *out = ubio_stats::from(&h.shared().stats());
        Ok(0)
    })
}

/// Flush the write-behind, drop what the handle cached, report any deferred
/// writeback error, close the descriptor and free the handle (always, also
/// on error). Final statistics into `out` unless it is NULL. 0 or -1.
///
/// # Safety
/// `f` is NULL (nothing happens) or a live handle, not used afterwards by
/// any thread; `out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ubio_close(f: *mut ubio_file, out: *mut ubio_stats) -> c_int {
    if f.is_null() {
        return 0;
    }
    call(-1, || {
        // SAFETY: from Box::into_raw in ubio_open/ubio_wrap_fd; ownership returns here.
        let h = unsafe { Box::from_raw(f) };
        let file = h.file.into_inner().unwrap_or_else(|e| e.into_inner());
        let stats = file.stats();
        let res = file.close();
        // SAFETY: NULL or valid, per the contract.
        if let Some(o) = unsafe { out.as_mut() } {
            *o = ubio_stats::from(res.as_ref().unwrap_or(&stats));
        }
        res.map(|_| 0)
    })
}

/// Copy `src` to `dst` (created or truncated, with the source's permission
/// bits) with ubio's copy engine (`ubio::copy::copy_path`): cloned where the
/// filesystem can, otherwise read and written overlapped through two ubio
/// streams, holes kept; neither file's new pages stay cached. Returns the
/// bytes copied, or -1 (then `dst` may be partial). A source that changed
/// while it was read fails with EAGAIN (`dst` holds what was read).
///
/// # Safety
/// `src` and `dst` are NUL-terminated strings; `opts` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn ubio_copy(
    src: *const c_char,
    dst: *const c_char,
    opts: *const ubio_options,
) -> i64 {
    call(-1, || {
        // SAFETY: per this function's contract.
        let (src, dst, o) = unsafe { (path_arg(src)?, path_arg(dst)?, options_arg(opts)?) };
        let copied = ubio::copy::copy_path(src, dst, &o, &Default::default())?;
        Ok(copied.copied.bytes as i64)
    })
}

/// What ubio would do with `path` (a file, or a directory: probed through
/// a temporary file in it). 0 or -1.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ubio_probe(path: *const c_char, out: *mut ubio_probe) -> c_int {
    call(-1, || {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        // SAFETY: NULL or valid, per the contract.
        let out = unsafe { out.as_mut() }.ok_or_else(|| invalid("probe pointer is NULL"))?;
        let p = ubio::probe_path(path)?;
        *out = ubio_probe {
            auto_backend: backend_code(p.auto),
            auto_reason: c_text(&p.auto_reason),
            dontcache: p.fs.dontcache.available,
            direct_io: p.fs.direct_io.available,
            cachestat: p.cachestat.available,
            mincore_trustworthy: p.mincore_trustworthy,
            regular_file: p.regular_file,
            fs_type: c_text(&p.fs.fs_type),
            kernel: c_text(&p.kernel),
        };
        Ok(0)
    })
}

/// The full probe report for `path` as JSON (what `ubio probe --json`
/// prints). Free it with ubio_string_free. NULL on error.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ubio_probe_json(path: *const c_char) -> *mut c_char {
    call(std::ptr::null_mut(), || {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        let json = serde_json::to_string(&ubio::probe_path(path)?).map_err(io::Error::other)?;
        Ok(CString::new(json).map_err(io::Error::other)?.into_raw())
    })
}

/// Free a string returned by libubio (NULL is fine).
///
/// # Safety
/// `s` is NULL or came from libubio and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ubio_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: from CString::into_raw in this library.
        drop(unsafe { CString::from_raw(s) });
    }
}

/// The page-cache counts of the file at `path` into `out`. 0 or -1.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ubio_cachestat(path: *const c_char, out: *mut ubio_cachestat) -> c_int {
    call(-1, || {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        // SAFETY: NULL or valid, per the contract.
        let out = unsafe { out.as_mut() }.ok_or_else(|| invalid("cachestat pointer is NULL"))?;
        *out = ubio_cachestat::from(&ops::cache_info(path)?);
        Ok(0)
    })
}

/// Drop the clean pages of the file at `path` from the page cache
/// (UBIO_EVICT_SYNC: write dirty ones back first and wait); the counts
/// afterwards into `after` unless it is NULL. Fails with EOPNOTSUPP on
/// tmpfs, where the pages are the file's storage. 0 or -1.
///
/// # Safety
/// `path` is a NUL-terminated string; `after` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ubio_evict(
    path: *const c_char,
    flags: c_uint,
    after: *mut ubio_cachestat,
) -> c_int {
    call(-1, || {
        // SAFETY: per this function's contract.
        let path = unsafe { path_arg(path)? };
        if flags & !UBIO_EVICT_SYNC != 0 {
            return Err(invalid("unknown ubio_evict flags"));
        }
        let evicted = ops::evict(path, flags & UBIO_EVICT_SYNC != 0)?;
        // SAFETY: NULL or valid, per the contract.
        if let Some(o) = unsafe { after.as_mut() } {
            *o = ubio_cachestat::from(&evicted.after);
        }
        Ok(0)
    })
}

/// The message of this thread's last failed libubio call ("" if none), naming
/// the operation and the file: "open /data/x: No such file or directory (os error 2)".
/// Valid until this thread's next failing libubio call.
#[no_mangle]
pub extern "C" fn ubio_last_error() -> *const c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

/// The name of a UBIO_BACKEND_* value ("auto", "kernel", ...), NULL if unknown.
#[no_mangle]
pub extern "C" fn ubio_backend_name(backend: c_int) -> *const c_char {
    const NAMES: [&CStr; 5] = [c"auto", c"kernel", c"emulated", c"direct", c"buffered"];
    BACKENDS
        .iter()
        .position(|(c, _)| *c == backend)
        .map_or(std::ptr::null(), |i| NAMES[i].as_ptr())
}

/// The library's version ("0.1.0").
#[no_mangle]
pub extern "C" fn ubio_version() -> *const c_char {
    static VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => c"?",
        };
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_codes_cover_every_kind_once() {
        for kind in BackendKind::ALL {
            let code = backend_code(kind);
            // SAFETY: ubio_backend_name returns a static C string.
            let name = unsafe { CStr::from_ptr(ubio_backend_name(code)) };
            assert_eq!(name.to_str().unwrap(), kind.name());
        }
        assert!(ubio_backend_name(5).is_null());
    }

    #[test]
    fn c_text_truncates_on_a_char_boundary_and_terminates() {
        let t: [c_char; 4] = c_text("aé€");
        assert_eq!(t.map(|c| c as u8), [b'a', 0xc3, 0xa9, 0]);
    }
}
