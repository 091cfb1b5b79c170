"""What copy.py and read.py share: reading a file through as ubio's emulated
backend does (1 MiB calls, what was read dropped 2 MiB-aligned behind), with
the kernel's readahead or with its own in small folios (HOWS), and writing
behind a window."""
import ctypes
import os

MIB = 1 << 20
CALL, STEP, AHEAD, WINDOW = MIB, 4 * MIB, 16 * MIB, 16 * MIB
HOWS = ("kernel-readahead", "willneed-steps")
SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, SYNC_FILE_RANGE_WAIT_AFTER = 1, 2, 4

libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]


def read_through(fd, how, each=lambda pos, buf: None):
    """Read `fd` from its start to its end, calling each(pos, buf) after
    every call; returns the bytes read. HOW:

      kernel-readahead   the kernel reads ahead (its window, its folio sizes)
      willneed-steps     POSIX_FADV_WILLNEED 4 MiB at a time, kept 16 MiB
                         ahead of the reads, with the kernel's readahead off
                         (POSIX_FADV_RANDOM): 4 KiB folios (folios.py)
    """
    assert how in HOWS, how
    size = os.fstat(fd).st_size
    if how == "willneed-steps":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    ahead = dropped = pos = 0
    while pos < size:
        if how == "willneed-steps":
            while ahead < min(pos + AHEAD, size):
                os.posix_fadvise(fd, ahead, STEP, os.POSIX_FADV_WILLNEED)
                ahead += STEP
        buf = os.pread(fd, CALL, pos)
        if not buf:
            break
        each(pos, buf)
        pos += len(buf)
        behind = (pos - 2 * MIB) // (2 * MIB) * (2 * MIB)
        if behind > dropped:
            os.posix_fadvise(fd, dropped, behind - dropped, os.POSIX_FADV_DONTNEED)
            dropped = behind
    return pos


def sync_range(fd, off, n, flags):
    if libc.sync_file_range(fd, off, n, flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"sync_file_range: {os.strerror(e)}")


class WriteBehind:
    """Writes at offsets; starts the writeback of each WINDOW written, and
    waits for and drops the window before it."""

    def __init__(self, fd):
        self.fd, self.started, self.written_back = fd, 0, 0

    def write(self, pos, buf):
        os.pwrite(self.fd, buf, pos)
        end = pos + len(buf)
        if end - self.started < WINDOW:
            return
        sync_range(self.fd, self.started, end - self.started, SYNC_FILE_RANGE_WRITE)
        if self.started > self.written_back:
            sync_range(self.fd, self.written_back, self.started - self.written_back,
                       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)
            os.posix_fadvise(self.fd, self.written_back, self.started - self.written_back,
                             os.POSIX_FADV_DONTNEED)
            self.written_back = self.started
        self.started = end
