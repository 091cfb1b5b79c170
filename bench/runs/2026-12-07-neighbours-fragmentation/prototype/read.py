#!/usr/bin/env python3
"""Read FILE once, cold, as copy.py reads its input (contract.read_through),
with HOW (kernel-readahead or willneed-steps), and print one line: how,
seconds, MB/s, CPU seconds per GB (user + system, this process).

    read.py HOW FILE
"""
import os
import resource
import sys
import time

import contract


def main():
    how, path = sys.argv[1:3]
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    n = contract.read_through(fd, how)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    secs = t1 - t0
    print(f"{how}\t{secs:.3f}\t{n / 1e6 / secs:.0f}\t{cpu / (n / 1e9):.3f}")


if __name__ == "__main__":
    main()
