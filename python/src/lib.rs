//! `ubio._ubio`: the extension module behind the `ubio` Python package
//! (ubio/__init__.py opens files as io.FileIO does and moves their data
//! through a `Stream`). I/O runs with the GIL released.

use pyo3::exceptions::{PyOSError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{BorrowedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use ubio::residency::{FileCount, Source};
use ubio::BackendKind;
use ubio_capi::ops;

/// OSError(errno, "operation: strerror", filename) for what ubio itself
/// reports (an open refused, a copy, stat or probe): Python maps the errno
/// to FileNotFoundError, PermissionError, ... as for the builtin open().
fn os_error(err: io::Error) -> PyErr {
    let errno = ops::errno_of(&err);
    let (op, path, cause) = match err
        .get_ref()
        .and_then(|e| e.downcast_ref::<ubio::error::Error>())
    {
        Some(e) => (Some(e.op), e.path.clone(), e.source.to_string()),
        None => (None, None, err.to_string()),
    };
    let cause = match cause.rfind(" (os error ") {
        Some(i) => cause[..i].to_string(),
        None => cause,
    };
    let msg = match op {
        Some(op) => format!("{op}: {cause}"),
        None => cause,
    };
    match path {
        // As str (bytes undecodable in UTF-8 escaped), as the builtin open() gives it.
        Some(p) => PyOSError::new_err((errno, msg, p.into_os_string())),
        None => PyOSError::new_err((errno, msg)),
    }
}

/// The error of a read or write as the builtin FileIO raises it:
/// OSError(errno, strerror) (BlockingIOError for EAGAIN, ...), no filename.
fn io_error(err: io::Error) -> PyErr {
    match err.raw_os_error() {
        Some(errno) => {
            let msg = io::Error::from_raw_os_error(errno).to_string();
            let msg = msg
                .rfind(" (os error ")
                .map_or(msg.as_str(), |i| &msg[..i])
                .to_string();
            PyOSError::new_err((errno, msg))
        }
        None => os_error(err),
    }
}

fn to_py(py: Python<'_>, value: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    let json = serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(py.import("json")?.call_method1("loads", (json,))?.unbind())
}

/// A setting given by name (`backend="auto"`, `direct_writes="never"`);
/// ValueError with the names it takes otherwise.
fn parse<T: std::str::FromStr<Err = String>>(name: &str) -> PyResult<T> {
    name.parse().map_err(PyValueError::new_err)
}

fn backend(name: &str) -> PyResult<BackendKind> {
    parse(name)
}

/// The same, the library's default where None.
fn setting<T: std::str::FromStr<Err = String> + Default>(name: Option<&str>) -> PyResult<T> {
    name.map_or(Ok(T::default()), parse)
}

/// When a stream's calls go through O_DIRECT and how it reads ahead: the
/// keywords `direct_reads`, `direct_writes` and `small_readahead` of the
/// Python API (as `--direct-reads` etc. of the command).
struct DataPath {
    direct_reads: ubio::DirectReads,
    direct_writes: ubio::DirectWrites,
    small_readahead: ubio::SmallReadahead,
}

impl DataPath {
    fn new(
        direct_reads: Option<&str>,
        direct_writes: Option<&str>,
        small_readahead: Option<&str>,
    ) -> PyResult<DataPath> {
        Ok(DataPath {
            direct_reads: setting(direct_reads)?,
            direct_writes: setting(direct_writes)?,
            small_readahead: setting(small_readahead)?,
        })
    }
}

fn options(
    backend_name: &str,
    window: Option<u64>,
    read_lag: Option<u64>,
    preserve_cached: bool,
    data_path: &DataPath,
) -> PyResult<ubio::OpenOptions> {
    let mut o = ubio::OpenOptions::new();
    o.backend(backend(backend_name)?)
        .window(window.unwrap_or(ubio::DEFAULT_WINDOW))
        .read_lag(read_lag.unwrap_or(ubio::DEFAULT_READ_LAG))
        .preserve_cached(preserve_cached)
        .direct_reads(data_path.direct_reads)
        .direct_writes(data_path.direct_writes)
        .small_readahead(data_path.small_readahead);
    Ok(o)
}

/// The uncached-I/O state of a descriptor that `ubio.FileIO` holds: reads
/// and writes at the descriptor's offset through ubio (or, for what ubio
/// does not manage, plain read(2) and write(2)). The descriptor stays the
/// FileIO's: this object never closes it; `finish()` ends the stream
/// (write-behind flushed, pages dropped, deferred errors reported) while
/// it is still open.
///
/// No lock is held while data moves (the GIL is released): a read blocked
/// on a FIFO leaves every other call and attribute free.
#[pyclass(module = "ubio._ubio", frozen)]
struct Stream {
    live: Mutex<Option<Arc<Live>>>,
    /// The final statistics, once finished.
    last: Mutex<Option<ubio::Stats>>,
}

struct Live {
    fd: RawFd,
    stream: ubio::Stream,
}

impl Live {
    fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the FileIO that made this stream keeps `fd` open until it
        // has called finish() (after which this is never reached); a caller
        // that closes it behind the FileIO's back gets EBADF, as with the
        // builtin FileIO.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }

    /// read(2) at the descriptor's offset, through ubio where it manages the
    /// file (a long read in pieces, so that drop-behind keeps up: the
    /// library's own).
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let bufs = &mut [IoSliceMut::new(buf)];
        if self.stream.is_regular() {
            self.stream.read(self.fd(), bufs, None)
        } else {
            ubio::sys::preadv2(self.fd(), bufs, None, ubio::sys::RwFlags::NONE)
        }
    }

    /// write(2) at the descriptor's offset (the end for O_APPEND).
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let bufs = &[IoSlice::new(buf)];
        if self.stream.is_regular() {
            self.stream.write_at(self.fd(), bufs, None).map(|(_, n)| n)
        } else {
            ubio::sys::pwritev2(self.fd(), bufs, None, ubio::sys::RwFlags::NONE)
        }
    }
}

/// readall()'s growth when the file turns out longer than fstat said.
const READALL_GROW: usize = 64 << 10;
/// What readall() asks for past the size fstat said, to find the end.
const READALL_PROBE: usize = 4 << 10;

impl Live {
    /// What the builtin readall() expects to read: the size from fstat
    /// less the offset, for a regular file.
    fn size_hint(&self) -> Option<usize> {
        if !self.stream.is_regular() {
            return None;
        }
        let size = ubio::sys::fstat(self.fd()).ok()?.st_size as u64;
        let pos = ubio::sys::lseek_cur(self.fd()).ok()?;
        usize::try_from(size.checked_sub(pos)?).ok()
    }
}

/// A bytes object being filled in place, so that read() and readall() copy
/// the data once, as the builtin does: PyBytes_FromStringAndSize(NULL, n)
/// makes it uninitialised, and it is written until anything else sees it.
/// Only the stable ABI, so that the wheel is abi3 (CPython's PyBytesWriter
/// and _PyBytes_Resize are not in it): growing makes a new object and copies
/// into it, and so does finishing short of the size (a short read).
struct BytesWriter<'py> {
    obj: Bound<'py, PyBytes>,
    len: usize,
}

impl<'py> BytesWriter<'py> {
    fn new(py: Python<'py>, len: usize) -> PyResult<Self> {
        Ok(BytesWriter {
            obj: new_bytes(py, std::ptr::null(), len)?,
            len,
        })
    }

    fn len(&self) -> usize {
        self.len
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: a bytes object (never NULL for one); its buffer holds
        // `len` bytes and is ours alone until finish.
        unsafe { ffi::PyBytes_AsString(self.obj.as_ptr()) }.cast()
    }

    /// Grow to `len` bytes, keeping the contents.
    fn resize(&mut self, len: usize) -> PyResult<()> {
        let grown = BytesWriter::new(self.obj.py(), len)?;
        // SAFETY: two distinct objects' buffers, each at least this long.
        unsafe { std::ptr::copy_nonoverlapping(self.data(), grown.data(), self.len.min(len)) };
        *self = grown;
        Ok(())
    }

    /// The bytes object of the first `len` bytes (`len` <= its size).
    fn finish(self, len: usize) -> PyResult<Bound<'py, PyBytes>> {
        if len == self.len {
            return Ok(self.obj);
        }
        new_bytes(self.obj.py(), self.data(), len.min(self.len))
    }
}

/// PyBytes_FromStringAndSize: `len` bytes from `data`, or uninitialised
/// ones (a new object, never a shared one, unless `len` is 0) for NULL;
/// MemoryError, not an abort, when they cannot be had.
fn new_bytes<'py>(py: Python<'py>, data: *const u8, len: usize) -> PyResult<Bound<'py, PyBytes>> {
    let size =
        ffi::Py_ssize_t::try_from(len).map_err(|_| PyOverflowError::new_err("file too large"))?;
    // SAFETY: the GIL is held (py); `data` is NULL or holds `len` bytes; a
    // NULL result has set the exception; the object is a bytes object.
    unsafe {
        let obj = ffi::PyBytes_FromStringAndSize(data.cast(), size);
        Bound::from_owned_ptr_or_err(py, obj).map(|b| b.cast_into_unchecked())
    }
}

/// A bytes-like object's memory, exported as one contiguous block for as
/// long as this lives (what the builtin's "w*" and "y*" arguments take:
/// a ctypes structure too, which has no shape).
struct ContiguousBuffer(Box<ffi::Py_buffer>);

impl ContiguousBuffer {
    fn get(obj: &Bound<'_, PyAny>, flags: std::ffi::c_int) -> PyResult<Self> {
        // SAFETY: an all-zero Py_buffer is a valid out-parameter.
        let mut view: Box<ffi::Py_buffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: the GIL is held (obj); `view` outlives the export (Drop).
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) } < 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(ContiguousBuffer(view))
    }

    /// For readinto(): writable, or TypeError as the builtin says it.
    fn writable(obj: &Bound<'_, PyAny>, method: &str) -> PyResult<Self> {
        Self::get(obj, ffi::PyBUF_WRITABLE).map_err(|_| {
            PyTypeError::new_err(format!(
                "{method}() argument must be read-write bytes-like object, not {}",
                obj.get_type()
                    .name()
                    .map_or_else(|_| "?".into(), |n| n.to_string())
            ))
        })
    }

    /// For write(): any bytes-like object.
    fn readable(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        Self::get(obj, ffi::PyBUF_SIMPLE)
    }

    fn span(&self) -> Span {
        Span(self.0.buf.cast(), self.0.len as usize)
    }
}

impl Drop for ContiguousBuffer {
    fn drop(&mut self) {
        // SAFETY: exported by get(); released once. The GIL is held: every
        // ContiguousBuffer lives within a #[pymethods] call (never moved
        // into code that runs without the GIL; only its Span is).
        unsafe { ffi::PyBuffer_Release(&mut *self.0) };
    }
}

/// A buffer pointer handed to code running without the GIL.
struct Span(*mut u8, usize);
// SAFETY: the pointer is used by one thread at a time, while the Python
// buffer it points into stays exported (pinned) by the caller.
unsafe impl Send for Span {}

impl Stream {
    fn live(&self) -> PyResult<Arc<Live>> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| PyValueError::new_err("I/O operation on closed file"))
    }

    /// Run `f` without the GIL and without any lock of this object; after
    /// an EINTR, run the signal handlers (their exception ends the call)
    /// and retry, as the builtin FileIO does (PEP 475).
    fn io<T: Send>(
        &self,
        py: Python<'_>,
        mut f: impl FnMut(&Live) -> io::Result<T> + Send,
    ) -> PyResult<T> {
        let live = self.live()?;
        loop {
            match py.detach(|| f(&live)) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => py.check_signals()?,
                r => return r.map_err(io_error),
            }
        }
    }
}

#[pymethods]
impl Stream {
    /// Stream the open descriptor `fd` (which stays the caller's) with ubio.
    #[new]
    #[pyo3(signature = (fd, *, backend="auto", window=None, read_lag=None, preserve_cached=true, path=None, direct_reads=None, direct_writes=None, small_readahead=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        fd: RawFd,
        backend: &str,
        window: Option<u64>,
        read_lag: Option<u64>,
        preserve_cached: bool,
        path: Option<PathBuf>,
        direct_reads: Option<&str>,
        direct_writes: Option<&str>,
        small_readahead: Option<&str>,
    ) -> PyResult<Stream> {
        let data_path = DataPath::new(direct_reads, direct_writes, small_readahead)?;
        let mut opts = ubio::StreamOptions {
            backend: self::backend(backend)?,
            direct_reads: data_path.direct_reads,
            direct_writes: data_path.direct_writes,
            small_readahead: data_path.small_readahead,
            ..Default::default()
        };
        opts.window = window.unwrap_or(opts.window);
        opts.read_lag = read_lag.unwrap_or(opts.read_lag);
        opts.preserve_cached = preserve_cached;
        if fd < 0 {
            return Err(io_error(io::Error::from_raw_os_error(libc::EBADF)));
        }
        let stream = py
            .detach(|| {
                // SAFETY: `fd` is open for this call (the caller's contract).
                ubio::Stream::new(unsafe { BorrowedFd::borrow_raw(fd) }, &opts)
            })
            .map_err(|e| os_error(ubio::error::context(e, "open", path.as_deref())))?;
        Ok(Stream {
            live: Mutex::new(Some(Arc::new(Live { fd, stream }))),
            last: Mutex::new(None),
        })
    }

    /// Read into a writable, contiguous bytes-like object at the
    /// descriptor's offset; the number of bytes read (0 at end of file).
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buf = ContiguousBuffer::writable(buffer, "readinto")?;
        let span = buf.span();
        self.io(py, move |live| {
            let span = &span;
            // SAFETY: `buf` keeps the buffer exported, so valid and unmoved,
            // until this call returns; nothing else writes it meanwhile.
            let slice = unsafe { std::slice::from_raw_parts_mut(span.0, span.1) };
            live.read(slice)
        })
    }

    /// Up to `size` bytes from the descriptor's offset (one read).
    fn read<'py>(&self, py: Python<'py>, size: usize) -> PyResult<Bound<'py, PyBytes>> {
        // Read into the bytes object itself (MemoryError, not an abort, when
        // `size` cannot be had).
        let out = BytesWriter::new(py, size)?;
        let span = Span(out.data(), size);
        let n = self.io(py, move |live| {
            let span = &span;
            // SAFETY: the writer's buffer holds `size` bytes, is ours alone
            // and does not move before finish.
            live.read(unsafe { std::slice::from_raw_parts_mut(span.0, span.1) })
        })?;
        out.finish(n)
    }

    /// Everything from the descriptor's offset to the end of file, read
    /// into one bytes object as the builtin readall() does (sized from
    /// fstat, grown while the file turns out longer: /proc files, FIFOs, a
    /// file being appended to). None when a non-blocking descriptor has
    /// nothing.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let live = self.live()?;
        // Exactly the size fstat gave: once it is full, a read into `probe`
        // looks for more (where the builtin reads one byte past the size),
        // so that a file of that size is read into its object and no copy
        // (BytesWriter cannot shrink in place).
        let mut out = BytesWriter::new(py, live.size_hint().unwrap_or(READALL_GROW))?;
        let mut probe = [0u8; READALL_PROBE];
        let mut got = 0usize;
        loop {
            let full = got == out.len();
            let span = if full {
                Span(probe.as_mut_ptr(), probe.len())
            } else {
                // SAFETY: the writer's buffer holds out.len() bytes and is
                // ours alone (no Python object sees it before finish); it
                // does not move until the next resize, after this read.
                Span(unsafe { out.data().add(got) }, out.len() - got)
            };
            let live = &*live;
            let res = py.detach(move || {
                let span = span;
                // SAFETY: see above; the kernel writes it, nothing reads it.
                live.read(unsafe { std::slice::from_raw_parts_mut(span.0, span.1) })
            });
            match res {
                Ok(0) => break,
                Ok(n) if full => {
                    out.resize(got + got.max(READALL_GROW).max(n))?;
                    // SAFETY: the writer's buffer now holds at least got + n
                    // bytes; `probe` is another buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(probe.as_ptr(), out.data().add(got), n)
                    };
                    got += n;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => py.check_signals()?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && got == 0 => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(io_error(e)),
            }
        }
        out.finish(got).map(Some)
    }

    /// Write a contiguous bytes-like object at the descriptor's offset (the
    /// end for O_APPEND); the number of bytes written.
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buf = ContiguousBuffer::readable(data)?;
        let span = buf.span();
        self.io(py, move |live| {
            let span = &span;
            // SAFETY: as in readinto; only read here.
            live.write(unsafe { std::slice::from_raw_parts(span.0 as *const u8, span.1) })
        })
    }

    /// Write back what was written so far, wait, and drop those pages; a
    /// deferred writeback error is raised here.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.io(py, |live| live.stream.flush(live.fd()))
    }

    /// End the stream while the descriptor is still open: flush the
    /// write-behind, drop what the stream cached, report a deferred
    /// writeback error. A second call does nothing.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        let Some(live) = self.live.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        let res = py.detach(|| live.stream.finish(live.fd()));
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(live.stream.stats());
        res.map_err(io_error)
    }

    /// Whether ubio manages the file's page cache (else it passes through).
    #[getter]
    fn managed(&self) -> PyResult<bool> {
        Ok(self.live()?.stream.choice().managed)
    }

    /// The per-stream statistics as a dict (the final ones after finish).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = match self.live() {
            Ok(live) => live.stream.stats(),
            Err(e) => self
                .last
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .ok_or(e)?,
        };
        to_py(py, &stats)
    }

    /// The backend in use and why it was chosen.
    fn backend(&self) -> PyResult<(String, String)> {
        let live = self.live()?;
        let c = live.stream.choice();
        Ok((c.backend.to_string(), c.reason.clone()))
    }
}

/// A file's cache counts as a dict: size_bytes, page_size, pages, cached,
/// dirty, writeback, evicted, recently_evicted (None from mincore()),
/// source ("cachestat" or "mincore") and note (why mincore(), or None).
fn cache_dict<'py>(py: Python<'py>, info: &FileCount) -> PyResult<Bound<'py, PyDict>> {
    let c = &info.count;
    let page = ubio::sys::page_size();
    let d = PyDict::new(py);
    d.set_item("size_bytes", info.size_bytes)?;
    d.set_item("page_size", page)?;
    d.set_item("pages", info.pages)?;
    d.set_item("cached", c.cached)?;
    d.set_item("dirty", c.dirty)?;
    d.set_item("writeback", c.writeback)?;
    d.set_item("evicted", c.evicted)?;
    d.set_item("recently_evicted", c.recently_evicted)?;
    let (source, note) = match c.source {
        Source::Cachestat => ("cachestat", None),
        Source::Mincore { why, .. } => ("mincore", Some(why.note())),
    };
    d.set_item("source", source)?;
    d.set_item("note", note)?;
    Ok(d)
}

/// ValueError if a name is not one its keyword takes: `ubio.FileIO` asks
/// before it opens the file, so that a wrong name truncates nothing.
#[pyfunction]
#[pyo3(signature = (backend, *, direct_reads=None, direct_writes=None, small_readahead=None))]
fn check_names(
    backend: &str,
    direct_reads: Option<&str>,
    direct_writes: Option<&str>,
    small_readahead: Option<&str>,
) -> PyResult<()> {
    self::backend(backend)?;
    DataPath::new(direct_reads, direct_writes, small_readahead).map(drop)
}

/// Copy `src` to `dst` with ubio's copy engine; {"bytes", "hole_bytes",
/// "method", "src", "dst"}.
#[pyfunction]
#[pyo3(signature = (src, dst, *, backend="auto", window=None, direct_reads=None, direct_writes=None, small_readahead=None))]
#[allow(clippy::too_many_arguments)]
fn copy<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    backend: &str,
    window: Option<u64>,
    direct_reads: Option<&str>,
    direct_writes: Option<&str>,
    small_readahead: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let data_path = DataPath::new(direct_reads, direct_writes, small_readahead)?;
    let o = options(backend, window, None, true, &data_path)?;
    let copied = py
        .detach(|| ubio::copy::copy_path(&src, &dst, &o, &Default::default()))
        .map_err(|e| os_error(e.error))?;
    let d = PyDict::new(py);
    d.set_item("bytes", copied.copied.bytes)?;
    d.set_item("hole_bytes", copied.copied.hole_bytes)?;
    d.set_item("method", to_py(py, &copied.copied.method)?)?;
    d.set_item("src", to_py(py, &copied.src)?)?;
    d.set_item("dst", to_py(py, &copied.dst)?)?;
    Ok(d)
}

/// The page-cache counts of a file.
#[pyfunction]
fn stat(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let c = py.detach(|| ops::cache_info(&path)).map_err(os_error)?;
    cache_dict(py, &c)
}

/// Drop a file's clean pages from the page cache; {"before", "after"}.
#[pyfunction]
#[pyo3(signature = (path, *, sync=false))]
fn evict(py: Python<'_>, path: PathBuf, sync: bool) -> PyResult<Bound<'_, PyDict>> {
    let evicted = py.detach(|| ops::evict(&path, sync)).map_err(os_error)?;
    let d = PyDict::new(py);
    d.set_item("before", cache_dict(py, &evicted.before)?)?;
    d.set_item("after", cache_dict(py, &evicted.after)?)?;
    Ok(d)
}

/// What ubio would do with a file or directory.
#[pyfunction]
fn probe(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let p = py.detach(|| ubio::probe_path(&path)).map_err(os_error)?;
    to_py(py, &p)
}

#[pymodule]
fn _ubio(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Stream>()?;
    m.add_function(wrap_pyfunction!(check_names, m)?)?;
    m.add_function(wrap_pyfunction!(copy, m)?)?;
    m.add_function(wrap_pyfunction!(stat, m)?)?;
    m.add_function(wrap_pyfunction!(evict, m)?)?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    m.add("DEFAULT_WINDOW", ubio::DEFAULT_WINDOW)?;
    m.add("DEFAULT_READ_LAG", ubio::DEFAULT_READ_LAG)?;
    Ok(())
}
