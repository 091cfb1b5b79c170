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

import io
import os
from typing import IO, Any, Dict, Optional, Union

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

#: Buffer size of ubio.open() (the builtin open() uses st_blksize, 4 KiB on
#: ext4): large reads keep the per-call cost small.
DEFAULT_BUFFER_SIZE = 1 << 20

#: The backends ``backend=`` accepts.
BACKENDS = ("auto", "kernel", "emulated", "direct", "buffered")

_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def _parse_mode(mode: str) -> Dict[str, bool]:
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwxa+bt") or "b" in chars and "t" in chars:
        raise ValueError(f"invalid mode: {mode!r}")
    kinds = chars & set("rwxa")
    if len(kinds) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    kind = kinds.pop()
    plus = "+" in chars
    return {
        "read": kind == "r" or plus,
        "write": kind in "wx" or plus,
        "append": kind == "a",
        "create": kind in "wax",
        "truncate": kind == "w",
        "exclusive": kind == "x",
    }


class FileIO(io.RawIOBase):
    """A raw binary file whose I/O goes through ubio (io.RawIOBase semantics).

    ``ubio.open(..., buffering=0)`` returns one; otherwise it sits under an
    io.BufferedReader/Writer/Random as ``f.raw``. ``stats()`` gives the
    per-handle statistics (pages dropped and kept, bytes, backend).
    """

    def __init__(
        self,
        file: _Path,
        mode: str = "r",
        *,
        backend: str = "auto",
        window: Optional[int] = None,
        read_lag: Optional[int] = None,
        preserve_cached: bool = True,
    ) -> None:
        super().__init__()
        flags = _parse_mode(mode)
        path = os.fsdecode(os.fspath(file))
        self._raw = _ubio.RawFile(
            path,
            mode=0o666,
            backend=backend,
            window=window,
            read_lag=read_lag,
            preserve_cached=preserve_cached,
            **flags,
        )
        self.name = file
        # As io.FileIO reports it.
        kind = next(c for c in mode if c in "rwxa")
        self.mode = {"r": "rb", "w": "wb", "x": "xb", "a": "ab"}[kind]
        if "+" in mode:
            self.mode = self.mode[0] + "b+"

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.backend()[0]
        return f"<ubio.FileIO name={self.name!r} mode={self.mode!r} {state}>"

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return self._raw.closed

    def readinto(self, buffer: Any) -> int:
        """Read into a writable bytes-like object; 0 at end of file."""
        return self._raw.readinto(buffer)

    def readall(self) -> bytes:
        """Read to the end of the file in large steps."""
        self._check_open()
        try:
            size = os.fstat(self.fileno()).st_size - self.tell()
        except OSError:
            size = 0
        buf = bytearray(max(size, 0) + 1)
        view = memoryview(buf)
        got = 0
        while True:
            if got == len(buf):
                buf.extend(bytes(DEFAULT_BUFFER_SIZE))
                view.release()
                view = memoryview(buf)
            n = self._raw.readinto(view[got:])
            if n == 0:
                break
            got += n
        view.release()
        del buf[got:]
        return bytes(buf)

    def write(self, data: Any) -> int:
        """Write a bytes-like object; the number of bytes written."""
        return self._raw.write(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def truncate(self, size: Optional[int] = None) -> int:
        return self._raw.truncate(self.tell() if size is None else size)

    def readable(self) -> bool:
        self._check_open()
        return self._raw.readable()

    def writable(self) -> bool:
        self._check_open()
        return self._raw.writable()

    def seekable(self) -> bool:
        return self._raw.seekable()

    def fileno(self) -> int:
        return self._raw.fileno()

    def isatty(self) -> bool:
        return os.isatty(self.fileno())

    def flush(self) -> None:
        """Write back what was written so far and drop those pages (no
        durability promise: os.fsync(f.fileno()) gives that)."""
        if not self.closed and self._raw.writable():
            self._raw.flush()

    def close(self) -> None:
        """Flush the write-behind, drop what this file cached, report any
        deferred writeback error (as OSError), and close."""
        if self.closed:
            return
        try:
            self._raw.close()
        finally:
            super().close()

    def stats(self) -> Dict[str, Any]:
        """The per-handle statistics (the final ones after close)."""
        return self._raw.stats()

    def backend(self) -> "tuple[str, str]":
        """The backend in use and why it was chosen."""
        return self._raw.backend()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")


def open(  # noqa: A001 (shadows the builtin on purpose, as io.open does)
    file: _Path,
    mode: str = "r",
    buffering: int = -1,
    encoding: Optional[str] = None,
    errors: Optional[str] = None,
    newline: Optional[str] = None,
    *,
    backend: str = "auto",
    window: Optional[int] = None,
    read_lag: Optional[int] = None,
    preserve_cached: bool = True,
) -> IO[Any]:
    """Open a file as the builtin open() does, with ubio underneath.

    Returns io.TextIOWrapper (text modes), io.BufferedReader, BufferedWriter
    or BufferedRandom (binary modes), or the raw ubio.FileIO (buffering=0).
    ``backend``: one of BACKENDS ("auto" picks per file); ``window``: dirty +
    writeback bytes a writer may have (default 16 MiB); ``read_lag``: how far
    behind the read position read pages may stay (default 4 MiB);
    ``preserve_cached``: keep pages that were cached before (default True).
    """
    text = "b" not in mode
    if text and buffering == 0:
        raise ValueError("can't have unbuffered text I/O")
    if not text and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode doesn't take an encoding, errors or newline argument")
    raw = FileIO(
        file,
        mode,
        backend=backend,
        window=window,
        read_lag=read_lag,
        preserve_cached=preserve_cached,
    )
    try:
        if buffering == 0:
            return raw
        line_buffering = text and buffering == 1
        size = DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
        buffer: Union[io.BufferedRandom, io.BufferedWriter, io.BufferedReader]
        if "+" in mode:
            buffer = io.BufferedRandom(raw, size)
        elif raw.writable():
            buffer = io.BufferedWriter(raw, size)
        else:
            buffer = io.BufferedReader(raw, size)
        if not text:
            return buffer
        if hasattr(io, "text_encoding"):
            encoding = io.text_encoding(encoding)
        wrapper = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
        wrapper.mode = mode  # type: ignore[misc]
        return wrapper
    except BaseException:
        raw.close()
        raise
