#!/usr/bin/env python3
"""Read FILE once, cold, as copy.py reads its input (1 MiB calls, dropped
2 MiB-aligned behind), with HOW (kernel-readahead or willneed-steps), and
print one line: how, seconds, MB/s, CPU seconds per GB (user + system, this
process), folios' 4 KiB pages left cached (none expected).

    read.py HOW FILE
"""
import os
import resource
import sys
import time

MIB = 1 << 20
CALL, STEP, AHEAD = MIB, 4 * MIB, 16 * MIB


def main():
    how, path = sys.argv[1:3]
    assert how in ("kernel-readahead", "willneed-steps"), how
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    if how == "willneed-steps":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    ahead = dropped = pos = 0
    while pos < size:
        if how == "willneed-steps":
            while ahead < min(pos + AHEAD, size):
                os.posix_fadvise(fd, ahead, STEP, os.POSIX_FADV_WILLNEED)
                ahead += STEP
        n = len(os.pread(fd, CALL, pos))
        if n == 0:
            break
        pos += n
        behind = (pos - 2 * MIB) // (2 * MIB) * (2 * MIB)
        if behind > dropped:
            os.posix_fadvise(fd, dropped, behind - dropped, os.POSIX_FADV_DONTNEED)
            dropped = behind
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    secs = t1 - t0
    print(f"{how}\t{secs:.3f}\t{pos / 1e6 / secs:.0f}\t{cpu / (pos / 1e9):.3f}")


if __name__ == "__main__":
    main()
