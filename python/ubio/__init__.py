"""Uncached buffered I/O for Python.

``ubio.open()`` works like the builtin ``open()`` but streams the file
through the page cache without filling it: pages the stream brings in are
dropped soon after they are used, writes are written back early within a
small window, and pages that others had cached stay. Use it for files larger
than memory (data pipelines, backups, checksums), where the builtin open()
would push everything else out of the page cache.

    import ubio, hashlib
    with ubio.open("big.dat", "rb") as f:
        digest = hashlib.file_digest(f, "sha256")
        print(f.raw.stats()["pages_dropped"])

Errors are OSError (FileNotFoundError, PermissionError, ...) with ``errno``
and ``filename`` set, as from the builtin open(). Durability is unchanged:
only ``os.fsync(f.fileno())`` promises it.
"""

from __future__ import annotations

import errno
import io
import os
import stat as _stat
import threading
import warnings
from typing import IO, Any, Callable, Dict, Optional, Union

from . import _ubio
from ._ubio import DEFAULT_READ_LAG, DEFAULT_WINDOW, copy, evict, probe, stat

__all__ = [
    "open",
    "FileIO",
    "copy",
    "stat",
    "evict",
    "probe",
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_WINDOW",
    "DEFAULT_READ_LAG",
    "BACKENDS",
]

#: Buffer size of ubio.open() for the files ubio manages (the builtin open()
#: uses st_blksize, 4 KiB on ext4). CPython's buffered reader reads whole
#: multiples of its buffer size (readinto: a request larger than it) straight
#: into the caller's object and the rest through its buffer, a second copy.
#: 64 KiB keeps the common requests (64 KiB, 1 MiB) at one copy, as with the
#: builtin, and gathers small reads in 16 times fewer calls than 4 KiB would
#: (a raw call costs ubio about 0.6 us more than the builtin's: the Python
#: method, the lseek, the tracker). Cold 100 MB: 1 MiB made 64 KiB reads 0.88x the builtin, 64
#: KiB 1.01x; 4 KiB made readline 0.77x (bench/runs/2026-11-26-python-fileio-5).
DEFAULT_BUFFER_SIZE = 64 << 10

#: The backends ``backend=`` accepts.
BACKENDS = ("auto", "kernel", "emulated", "direct", "buffered")

#: The backend of a FileIO made without ``backend=`` (tests run the whole
#: suite once per backend by setting it).
_default_backend = "auto"

_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_repr_running = threading.local()

# The range of a descriptor (a C int).
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


class FileIO(io.RawIOBase):
    """A raw binary file whose data goes through ubio; otherwise io.FileIO.

    Takes what io.FileIO takes (a path or an integer descriptor, the modes
    "r", "w", "x", "a" with "b" and "+", ``closefd``, ``opener``) and raises
    what it raises. The descriptor's offset is the file position, shared with
    other descriptors of the same open file (a child's, the caller's own
    os.read/os.lseek). Descriptors ubio does not manage (pipes, sockets,
    terminals, /proc files) are read and written as io.FileIO does.

    ``ubio.open(..., buffering=0)`` returns one; otherwise it sits under an
    io.BufferedReader/Writer/Random as ``f.raw``. ``stats()`` gives the
    per-handle statistics (pages dropped and kept, bytes, backend).
    """

    _fd = -1
    _created = False
    _readable = False
    _writable = False
    _appending = False
    _seekable: Optional[bool] = None
    _closefd = True
    _stream: Optional[_ubio.Stream] = None

    def __init__(
        self,
        file: Union[_Path, int],
        mode: str = "r",
        closefd: bool = True,
        opener: Optional[Callable[[Any, int], int]] = None,
        *,
        backend: Optional[str] = None,
        window: Optional[int] = None,
        read_lag: Optional[int] = None,
        preserve_cached: bool = True,
        direct_reads: Optional[str] = None,
        direct_writes: Optional[str] = None,
        small_readahead: Optional[str] = None,
    ) -> None:
        if self._fd >= 0:
            # __init__ again: the earlier file goes first, as with io.FileIO.
            try:
                self._end_stream()
            finally:
                fd, self._fd = self._fd, -1
                if self._closefd:
                    os.close(fd)
        if isinstance(file, float):
            raise TypeError("integer argument expected, got float")
        backend = _default_backend if backend is None else backend
        # Before the file is opened ("w" truncates it).
        _ubio.check_names(
            backend,
            direct_reads=direct_reads,
            direct_writes=direct_writes,
            small_readahead=small_readahead,
        )
        if isinstance(file, int) and _INT_MIN <= file <= _INT_MAX:
            if file < 0:
                raise ValueError("negative file descriptor")
            fd = file
        else:
            fd = -1  # a name (an int beyond a C int is refused by os.open, as by io.FileIO)
        if not isinstance(mode, str):
            raise TypeError(f"invalid mode: {mode}")
        if not set(mode) <= set("xrwab+") or len(set(mode)) != len(mode):
            raise ValueError(f"invalid mode: {mode}")
        if sum(c in "rwax" for c in mode) != 1:
            raise ValueError("Must have exactly one of create/read/write/append mode and at most one plus")
        self._created = "x" in mode
        self._readable = "r" in mode or "+" in mode
        self._writable = "r" not in mode or "+" in mode
        self._appending = "a" in mode
        flags = os.O_CLOEXEC
        if self._created:
            flags |= os.O_EXCL | os.O_CREAT
        elif "w" in mode:
            flags |= os.O_CREAT | os.O_TRUNC
        elif self._appending:
            flags |= os.O_APPEND | os.O_CREAT
        if self._readable and self._writable:
            flags |= os.O_RDWR
        elif self._readable:
            flags |= os.O_RDONLY
        else:
            flags |= os.O_WRONLY

        owned = None
        try:
            if fd < 0:
                if not closefd:
                    raise ValueError("Cannot use closefd=False with file name")
                if opener is None:
                    fd = os.open(file, flags, 0o666)
                else:
                    fd = opener(file, flags)
                    if not isinstance(fd, int):
                        raise TypeError("expected integer from opener")
                    if fd < 0:
                        raise ValueError(f"opener returned {fd}")
                owned = fd
            self._closefd = closefd
            st = os.fstat(fd)
            if _stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), file)
            self._blksize = st.st_blksize if st.st_blksize > 1 else io.DEFAULT_BUFFER_SIZE
            self.name = file
            if self._appending:
                # The position is the end from the start, as io.FileIO makes
                # it (tell() says so; a BOM is not written again).
                try:
                    os.lseek(fd, 0, os.SEEK_END)
                except OSError as e:
                    if e.errno != errno.ESPIPE:
                        raise
            path = None if isinstance(file, int) else os.fsdecode(file)
            self._stream = _ubio.Stream(
                fd,
                backend=backend,
                window=window,
                read_lag=read_lag,
                preserve_cached=preserve_cached,
                path=path,
                direct_reads=direct_reads,
                direct_writes=direct_writes,
                small_readahead=small_readahead,
            )
        except BaseException:
            if owned is not None:
                os.close(owned)
            raise
        self._fd = fd

    def __del__(self) -> None:
        if self._fd >= 0 and self._closefd and not self.closed:
            warnings.warn(f"unclosed file {self!r}", ResourceWarning, stacklevel=2, source=self)
            self.close()

    def _dealloc_warn(self, source: Any) -> None:
        # Called by a buffered wrapper that is collected unclosed.
        if self._fd >= 0 and self._closefd and not self.closed:
            warnings.warn(f"unclosed file {source!r}", ResourceWarning, stacklevel=2, source=source)

    def __getstate__(self) -> None:
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")

    def __repr__(self) -> str:
        cls = f"{type(self).__module__}.{type(self).__qualname__}"
        if self.closed:
            return f"<{cls} [closed]>"
        active = getattr(_repr_running, "ids", None)
        if active is None:
            active = _repr_running.ids = set()
        if id(self) in active:
            raise RuntimeError(f"reentrant call inside {cls}.__repr__")
        active.add(id(self))
        try:
            try:
                name = self.name
            except AttributeError:
                return f"<{cls} fd={self._fd} mode={self.mode!r} closefd={self._closefd!r}>"
            return f"<{cls} name={name!r} mode={self.mode!r} closefd={self._closefd!r}>"
        finally:
            active.discard(id(self))

    def _check_closed(self) -> None:
        if self._fd < 0:
            raise ValueError("I/O operation on closed file")

    def _check_readable(self) -> None:
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")

    def _check_writable(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")

    def _live(self) -> _ubio.Stream:
        self._check_closed()
        assert self._stream is not None
        return self._stream

    def read(self, size: Optional[int] = -1) -> Optional[bytes]:
        """Read at most size bytes (one read); all to the end of file if
        size is None or negative; None when a non-blocking descriptor has
        nothing."""
        # The checks' common case in one test, inline (here, in readinto
        # and in write): a buffered file calls these once per block, and
        # the calls to the checks cost 0.1 us of a 1.2 us small read.
        if self._fd < 0 or not self._readable:
            self._check_closed()
            self._check_readable()
        if size is None or size < 0:
            return self.readall()
        try:
            return self._stream.read(size)  # type: ignore[union-attr]
        except BlockingIOError:
            return None

    def readall(self) -> Optional[bytes]:
        """Read to the end of file (the file may be longer than fstat()
        says: /proc files, FIFOs, a file being appended to)."""
        stream = self._live()
        self._check_readable()
        return stream.readall()

    def readinto(self, buffer: Any) -> Optional[int]:
        """Read into a writable bytes-like object; 0 at end of file."""
        if self._fd < 0 or not self._readable:
            self._check_closed()
            self._check_readable()
        try:
            return self._stream.readinto(buffer)  # type: ignore[union-attr]
        except BlockingIOError:
            return None

    def write(self, data: Any) -> Optional[int]:
        """Write a bytes-like object (one write); the number of bytes written."""
        if self._fd < 0 or not self._writable:
            self._check_closed()
            self._check_writable()
        try:
            return self._stream.write(data)  # type: ignore[union-attr]
        except BlockingIOError:
            return None

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        """lseek(2) on the descriptor: the new position."""
        if isinstance(pos, float):
            raise TypeError("an integer is required")
        self._check_closed()
        return os.lseek(self._fd, pos, whence)

    def tell(self) -> int:
        self._check_closed()
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def truncate(self, size: Optional[int] = None) -> int:
        """Resize the file to size bytes (default: the position, which does
        not move)."""
        self._check_closed()
        self._check_writable()
        if size is None:
            size = self.tell()
        os.ftruncate(self._fd, size)
        return size

    def seekable(self) -> bool:
        self._check_closed()
        if self._seekable is None:
            try:
                self.tell()
            except OSError:
                self._seekable = False
            else:
                self._seekable = True
        return self._seekable

    def readable(self) -> bool:
        self._check_closed()
        return self._readable

    def writable(self) -> bool:
        self._check_closed()
        return self._writable

    def fileno(self) -> int:
        self._check_closed()
        return self._fd

    def isatty(self) -> bool:
        self._check_closed()
        return os.isatty(self._fd)

    @property
    def closefd(self) -> bool:
        """Whether close() closes the descriptor."""
        return self._closefd

    @property
    def mode(self) -> str:
        """The mode as io.FileIO reports it ("rb", "wb", "xb", "ab", "rb+", ...)."""
        if self._created:
            return "xb+" if self._readable else "xb"
        if self._appending:
            return "ab+" if self._readable else "ab"
        if self._readable:
            return "rb+" if self._writable else "rb"
        return "wb"

    def flush(self) -> None:
        """Nothing to write out (as io.FileIO); raises ValueError once closed.
        ``flush_writeback()`` waits for the written data's writeback."""
        self._checkClosed()  # type: ignore[attr-defined]

    def flush_writeback(self) -> None:
        """Write back what was written so far, wait, and drop those pages (no
        durability promise: os.fsync(f.fileno()) gives that)."""
        self._live().flush()

    def close(self) -> None:
        """Flush, end the stream (the write-behind written back, what this
        file cached dropped, a deferred writeback error raised) while the
        descriptor is open, then close it (closefd) and raise close(2)'s
        error, as io.FileIO does."""
        if self.closed:
            return
        first: Optional[BaseException] = None
        try:
            super().close()
        except BaseException as e:
            first = e
        try:
            self._end_stream()
        except BaseException as e:
            first = first or e
        fd, self._fd = self._fd, -1
        if self._closefd and fd >= 0:
            try:
                os.close(fd)
            except BaseException as e:
                first = first or e
        if first is not None:
            raise first

    def _end_stream(self) -> None:
        if self._stream is not None:
            self._stream.finish()

    def stats(self) -> Dict[str, Any]:
        """The per-handle statistics (the final ones after close)."""
        if self._stream is None:
            raise ValueError("no statistics")
        return self._stream.stats()

    def backend(self) -> "tuple[str, str]":
        """The backend in use and why it was chosen."""
        return self._live().backend()


def open(  # noqa: A001 (shadows the builtin on purpose, as io.open does)
    file: Union[_Path, int],
    mode: str = "r",
    buffering: int = -1,
    encoding: Optional[str] = None,
    errors: Optional[str] = None,
    newline: Optional[str] = None,
    closefd: bool = True,
    opener: Optional[Callable[[Any, int], int]] = None,
    *,
    backend: Optional[str] = None,
    window: Optional[int] = None,
    read_lag: Optional[int] = None,
    preserve_cached: bool = True,
    direct_reads: Optional[str] = None,
    direct_writes: Optional[str] = None,
    small_readahead: Optional[str] = None,
) -> IO[Any]:
    """Open a file as the builtin open() does, with ubio underneath.

    Takes what open() takes and returns what it returns: io.TextIOWrapper
    (text modes), io.BufferedReader, BufferedWriter or BufferedRandom
    (binary modes), or the raw ubio.FileIO (buffering=0); the buffer of a
    file ubio manages is DEFAULT_BUFFER_SIZE (64 KiB). ``backend``: one of
    BACKENDS ("auto" picks per file); ``window``: dirty + writeback bytes a
    writer may have (default 16 MiB); ``read_lag``: how far behind the read
    position read pages may stay (default 4 MiB); ``preserve_cached``: keep
    pages that were cached before (default True). ``direct_reads``,
    ``direct_writes`` and ``small_readahead`` name when the emulated backend
    reads or writes through O_DIRECT and reads ahead in small folios itself,
    as ``ubio cat``'s ``--direct-reads`` and the others do (None: the
    library's default, "when-faster" and "when-fragmented").
    """
    if not isinstance(file, int):
        file = os.fspath(file)
    if not isinstance(file, (str, bytes, int)):
        raise TypeError(f"invalid file: {file!r}")
    if not isinstance(mode, str):
        raise TypeError(f"invalid mode: {mode!r}")
    if not isinstance(buffering, int):
        raise TypeError(f"invalid buffering: {buffering!r}")
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"invalid encoding: {encoding!r}")
    if errors is not None and not isinstance(errors, str):
        raise TypeError(f"invalid errors: {errors!r}")
    modes = set(mode)
    if modes - set("axrwb+t") or len(mode) > len(modes):
        raise ValueError(f"invalid mode: {mode!r}")
    creating, reading, writing, appending = ("x" in modes, "r" in modes, "w" in modes, "a" in modes)
    updating, text, binary = "+" in modes, "t" in modes, "b" in modes
    if text and binary:
        raise ValueError("can't have text and binary mode at once")
    if creating + reading + writing + appending != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    if binary and encoding is not None:
        raise ValueError("binary mode doesn't take an encoding argument")
    if binary and errors is not None:
        raise ValueError("binary mode doesn't take an errors argument")
    if binary and newline is not None:
        raise ValueError("binary mode doesn't take a newline argument")
    if binary and buffering == 1:
        warnings.warn(
            "line buffering (buffering=1) isn't supported in binary mode, "
            "the default buffer size will be used",
            RuntimeWarning,
            2,
        )
    raw = FileIO(
        file,
        "".join(c for c in "xrwa+" if c in modes),
        closefd,
        opener,
        backend=backend,
        window=window,
        read_lag=read_lag,
        preserve_cached=preserve_cached,
        direct_reads=direct_reads,
        direct_writes=direct_writes,
        small_readahead=small_readahead,
    )
    result: Any = raw
    try:
        line_buffering = False
        if buffering == 1 or buffering < 0 and raw.isatty():
            buffering = -1
            line_buffering = True
        if buffering < 0:
            buffering = DEFAULT_BUFFER_SIZE if raw._stream.managed else raw._blksize  # type: ignore[union-attr]
        if buffering == 0:
            if binary:
                return result
            raise ValueError("can't have unbuffered text I/O")
        buffer: Union[io.BufferedRandom, io.BufferedWriter, io.BufferedReader]
        if updating:
            buffer = io.BufferedRandom(raw, buffering)
        elif creating or writing or appending:
            buffer = io.BufferedWriter(raw, buffering)
        else:
            buffer = io.BufferedReader(raw, buffering)
        result = buffer
        if binary:
            return result
        if hasattr(io, "text_encoding"):
            encoding = io.text_encoding(encoding)
        wrapper = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
        result = wrapper
        wrapper.mode = mode  # type: ignore[misc]
        return wrapper
    except BaseException:
        result.close()
        raise
