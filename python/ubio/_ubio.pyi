"""Type stubs for the extension module behind ubio (see ubio/__init__.py)."""

import os
from typing import Any, Dict, Optional, Tuple, Union

_Path = Union[str, "os.PathLike[str]"]

DEFAULT_WINDOW: int
DEFAULT_READ_LAG: int

class RawFile:
    """A file opened for uncached buffered I/O (the raw layer under ubio.FileIO)."""

    def __init__(
        self,
        path: _Path,
        *,
        read: bool,
        write: bool,
        append: bool,
        create: bool,
        truncate: bool,
        exclusive: bool,
        mode: int = 0o666,
        backend: str = "auto",
        window: Optional[int] = None,
        read_lag: Optional[int] = None,
        preserve_cached: bool = True,
    ) -> None: ...
    def readinto(self, buffer: Any) -> int: ...
    def write(self, data: Any) -> int: ...
    def seek(self, offset: int, whence: int = 0) -> int: ...
    def tell(self) -> int: ...
    def truncate(self, size: int) -> int: ...
    def flush(self) -> None: ...
    def fileno(self) -> int: ...
    def readable(self) -> bool: ...
    def writable(self) -> bool: ...
    def seekable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def backend(self) -> Tuple[str, str]: ...

def copy(
    src: _Path, dst: _Path, *, backend: str = "auto", window: Optional[int] = None
) -> Dict[str, Any]:
    """Copy src to dst with ubio's copy engine: cloned where the filesystem
    can, otherwise read and written overlapped through two ubio streams, holes
    kept; neither file's new pages stay cached. Returns {"bytes": n,
    "hole_bytes": n, "method": "clone" or "stream", "src": stats, "dst": stats}.
    A source that changed while it was read raises OSError with errno EAGAIN
    (dst then holds what was read)."""

def stat(path: _Path) -> Dict[str, Any]:
    """A file's pages in the page cache: size_bytes, page_size, pages, cached,
    dirty, writeback, evicted, recently_evicted (None when mincore() had to be
    used), source ("cachestat" or "mincore") and note."""

def evict(path: _Path, *, sync: bool = False) -> Dict[str, Any]:
    """Drop a file's clean pages from the page cache (sync: write dirty pages
    back first and wait). Returns {"before": stat, "after": stat}."""

def probe(path: _Path) -> Dict[str, Any]:
    """What ubio would do with a file or directory: the filesystem's
    capabilities, cachestat support, and the backend "auto" picks and why."""
