"""Type stubs for the extension module behind ubio (see ubio/__init__.py)."""

import os
from typing import Any, Dict, Optional, Tuple, Union

_Path = Union[str, "os.PathLike[str]"]

DEFAULT_WINDOW: int
DEFAULT_READ_LAG: int

class Stream:
    """The uncached-I/O state of a descriptor that ubio.FileIO holds: reads
    and writes at the descriptor's offset through ubio (plain read(2) and
    write(2) for what ubio does not manage). Never closes the descriptor."""

    def __init__(
        self,
        fd: int,
        *,
        backend: str = "auto",
        window: Optional[int] = None,
        read_lag: Optional[int] = None,
        preserve_cached: bool = True,
        path: Optional[str] = None,
        direct_reads: Optional[str] = None,
        direct_writes: Optional[str] = None,
        small_readahead: Optional[str] = None,
    ) -> None: ...
    def readinto(self, buffer: Any) -> int: ...
    def read(self, size: int) -> bytes: ...
    def readall(self) -> Optional[bytes]: ...
    def write(self, data: Any) -> int: ...
    def flush(self) -> None: ...
    def finish(self) -> None: ...
    @property
    def managed(self) -> bool: ...
    def stats(self) -> Dict[str, Any]: ...
    def backend(self) -> Tuple[str, str]: ...

def check_names(
    backend: str,
    *,
    direct_reads: Optional[str] = None,
    direct_writes: Optional[str] = None,
    small_readahead: Optional[str] = None,
) -> None:
    """ValueError if a name is not one its keyword takes."""

def copy(
    src: _Path,
    dst: _Path,
    *,
    backend: str = "auto",
    window: Optional[int] = None,
    direct_reads: Optional[str] = None,
    direct_writes: Optional[str] = None,
    small_readahead: Optional[str] = None,
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
