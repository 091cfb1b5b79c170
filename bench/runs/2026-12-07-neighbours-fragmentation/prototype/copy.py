#!/usr/bin/env python3
"""A prototype of a stream that keeps ubio's contract on its input, outside
ubio, to try one question: does reading ahead in small folios keep a
neighbour's cache where the kernel's 2 MiB readahead folios cost it? Copies
SRC to DST with 1 MiB calls, dropping what it read 2 MiB-aligned behind
itself (POSIX_FADV_DONTNEED) and writing back and dropping what it wrote
behind a 16 MiB window (sync_file_range, then DONTNEED), as ubio's emulated
backend does; then fsync. HOW:

  kernel-readahead   the kernel reads ahead (its window, its folio sizes)
  willneed-steps     POSIX_FADV_WILLNEED 4 MiB at a time, kept 16 MiB ahead
                     of the reads (4 KiB folios: folios.py)

    copy.py HOW SRC DST
"""
import ctypes
import os
import sys

MIB = 1 << 20
CALL, STEP, AHEAD, WINDOW = MIB, 4 * MIB, 16 * MIB, 16 * MIB
SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, SYNC_FILE_RANGE_WAIT_AFTER = 1, 2, 4
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]


def sync_range(fd, off, n, flags):
    if libc.sync_file_range(fd, off, n, flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"sync_file_range: {os.strerror(e)}")


def main():
    how, src, dst = sys.argv[1:4]
    assert how in ("kernel-readahead", "willneed-steps"), how
    i = os.open(src, os.O_RDONLY)
    o = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    size = os.fstat(i).st_size
    if how == "willneed-steps":
        # No kernel readahead for this description: what is read was asked for.
        os.posix_fadvise(i, 0, 0, os.POSIX_FADV_RANDOM)
    ahead = dropped = started = written_back = 0
    pos = 0
    while pos < size:
        if how == "willneed-steps":
            while ahead < min(pos + AHEAD, size):
                os.posix_fadvise(i, ahead, STEP, os.POSIX_FADV_WILLNEED)
                ahead += STEP
        buf = os.pread(i, CALL, pos)
        if not buf:
            break
        os.pwrite(o, buf, pos)
        pos += len(buf)
        behind = (pos - 2 * MIB) // (2 * MIB) * (2 * MIB)
        if behind > dropped:
            os.posix_fadvise(i, dropped, behind - dropped, os.POSIX_FADV_DONTNEED)
            dropped = behind
        if pos - started >= WINDOW:
            sync_range(o, started, pos - started, SYNC_FILE_RANGE_WRITE)
            if started > written_back:
                sync_range(o, written_back, started - written_back,
                           SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)
                os.posix_fadvise(o, written_back, started - written_back, os.POSIX_FADV_DONTNEED)
                written_back = started
            started = pos
    os.fsync(o)
    for fd in (i, o):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


if __name__ == "__main__":
    main()
