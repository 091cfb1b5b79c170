//! `ubio._ubio`: the extension module behind the `ubio` Python package
//! (ubio/__init__.py wraps `RawFile` in an io.RawIOBase subclass and parses
//! `open()` modes). I/O runs with the GIL released.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use ubio::residency::{FileCount, Source};
use ubio::BackendKind;
use ubio_capi::ops;

/// OSError(errno, "operation: strerror", filename): Python maps the errno to
/// FileNotFoundError, PermissionError, ... as for the builtin open().
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

fn to_py(py: Python<'_>, value: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    let json = serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(py.import("json")?.call_method1("loads", (json,))?.unbind())
}

fn backend(name: &str) -> PyResult<BackendKind> {
    name.parse().map_err(PyValueError::new_err)
}

fn options(
    backend_name: &str,
    window: Option<u64>,
    read_lag: Option<u64>,
    preserve_cached: bool,
) -> PyResult<ubio::OpenOptions> {
    let mut o = ubio::OpenOptions::new();
    o.backend(backend(backend_name)?)
        .window(window.unwrap_or(ubio::DEFAULT_WINDOW))
        .read_lag(read_lag.unwrap_or(ubio::DEFAULT_READ_LAG))
        .preserve_cached(preserve_cached);
    Ok(o)
}

/// A file opened for uncached buffered I/O: the raw layer under
/// `ubio.FileIO`. Methods raise ValueError once closed.
#[pyclass(module = "ubio._ubio")]
struct RawFile {
    file: Mutex<Option<ubio::File>>,
    stats: Mutex<Option<ubio::Stats>>,
    readable: bool,
    writable: bool,
}

/// A buffer pointer handed to code running without the GIL.
struct Span(*mut u8, usize);
// SAFETY: the pointer is used by one thread at a time, while the Python
// buffer it points into stays exported (pinned) by the caller.
unsafe impl Send for Span {}

impl RawFile {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut ubio::File) -> io::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut guard = self.lock();
            match guard.as_mut() {
                Some(file) => f(file).map_err(os_error),
                None => Err(PyValueError::new_err("I/O operation on closed file")),
            }
        })
    }
    fn lock(&self) -> MutexGuard<'_, Option<ubio::File>> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl RawFile {
    /// Open `path` with the flags ubio.open() derived from its mode.
    #[new]
    #[pyo3(signature = (path, *, read, write, append, create, truncate, exclusive, mode=0o666, backend="auto", window=None, read_lag=None, preserve_cached=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        read: bool,
        write: bool,
        append: bool,
        create: bool,
        truncate: bool,
        exclusive: bool,
        mode: u32,
        backend: &str,
        window: Option<u64>,
        read_lag: Option<u64>,
        preserve_cached: bool,
    ) -> PyResult<RawFile> {
        let mut o = options(backend, window, read_lag, preserve_cached)?;
        o.read(read)
            .write(write)
            .append(append)
            .create(create)
            .truncate(truncate)
            .create_new(exclusive)
            .mode(mode);
        let file = py.detach(|| o.open(&path)).map_err(os_error)?;
        Ok(RawFile {
            file: Mutex::new(Some(file)),
            stats: Mutex::new(None),
            readable: read,
            writable: write || append,
        })
    }

    /// Read into a writable bytes-like object; the number of bytes read (0 at end of file).
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buf = PyUntypedBuffer::get(buffer)?;
        if buf.readonly() || !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err(
                "readinto() needs a writable, contiguous buffer",
            ));
        }
        let span = Span(buf.buf_ptr().cast(), buf.len_bytes());
        self.with(py, move |f| {
            let span = span;
            // SAFETY: `buf` keeps the buffer exported, so valid and unmoved,
            // until this call returns; nothing else writes it meanwhile.
            let slice = unsafe { std::slice::from_raw_parts_mut(span.0, span.1) };
            f.read(slice)
        })
    }

    /// Write a bytes-like object; the number of bytes written.
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buf = PyUntypedBuffer::get(data)?;
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("write() needs a contiguous buffer"));
        }
        let span = Span(buf.buf_ptr().cast(), buf.len_bytes());
        self.with(py, move |f| {
            let span = span;
            // SAFETY: as in readinto; only read here.
            let slice = unsafe { std::slice::from_raw_parts(span.0 as *const u8, span.1) };
            f.write(slice)
        })
    }

    /// Move the position (whence 0, 1 or 2 as os.SEEK_*); the new position.
    #[pyo3(signature = (offset, whence=0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        let to =
            match whence {
                0 => SeekFrom::Start(u64::try_from(offset).map_err(|_| {
                    PyValueError::new_err(format!("negative seek position {offset}"))
                })?),
                1 => SeekFrom::Current(offset),
                2 => SeekFrom::End(offset),
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "invalid whence ({whence}, should be 0, 1 or 2)"
                    )))
                }
            };
        self.with(py, move |f| f.seek(to))
    }

    /// The position.
    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| f.stream_position())
    }

    /// Resize the file to `size` bytes (the position does not move).
    fn truncate(&self, py: Python<'_>, size: u64) -> PyResult<u64> {
        self.with(py, move |f| {
            f.flush_writeback()?;
            f.get_ref()
                .set_len(size)
                .map_err(|e| ubio::error::context(e, "truncate", f.path()))?;
            Ok(size)
        })
    }

    /// Write back what was written so far, wait, and drop those pages
    /// (no durability: use os.fsync(f.fileno()) for that).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |f| f.flush_writeback())
    }

    /// The descriptor (owned by this object).
    fn fileno(&self, py: Python<'_>) -> PyResult<i32> {
        self.with(py, |f| Ok(f.as_raw_fd()))
    }

    fn readable(&self) -> bool {
        self.readable
    }

    fn writable(&self) -> bool {
        self.writable
    }

    /// Whether the file is a regular file (a pipe is not seekable).
    fn seekable(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |f| Ok(f.get_ref().metadata()?.is_file()))
    }

    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    /// Flush the write-behind, drop what this file cached, report any
    /// deferred writeback error, and close. A second call does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let res = py.detach(|| {
            let file = self.lock().take()?;
            let stats = file.stats();
            let res = file.close();
            *self.stats.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(res.as_ref().map_or(stats, Clone::clone));
            Some(res)
        });
        match res {
            Some(Err(e)) => Err(os_error(e)),
            _ => Ok(()),
        }
    }

    /// The per-handle statistics as a dict (the final ones after close).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = match self.lock().as_ref() {
            Some(f) => f.stats(),
            None => self
                .stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .ok_or_else(|| PyValueError::new_err("no statistics"))?,
        };
        to_py(py, &stats)
    }

    /// The backend in use and why it was chosen.
    fn backend(&self, py: Python<'_>) -> PyResult<(String, String)> {
        self.with(py, |f| {
            let c = f.choice();
            Ok((c.backend.to_string(), c.reason.clone()))
        })
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

/// Copy `src` to `dst` with ubio's copy engine; {"bytes", "hole_bytes",
/// "method", "src", "dst"}.
#[pyfunction]
#[pyo3(signature = (src, dst, *, backend="auto", window=None))]
fn copy<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    backend: &str,
    window: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let o = options(backend, window, None, true)?;
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
    m.add_class::<RawFile>()?;
    m.add_function(wrap_pyfunction!(copy, m)?)?;
    m.add_function(wrap_pyfunction!(stat, m)?)?;
    m.add_function(wrap_pyfunction!(evict, m)?)?;
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    m.add("DEFAULT_WINDOW", ubio::DEFAULT_WINDOW)?;
    m.add("DEFAULT_READ_LAG", ubio::DEFAULT_READ_LAG)?;
    Ok(())
}
