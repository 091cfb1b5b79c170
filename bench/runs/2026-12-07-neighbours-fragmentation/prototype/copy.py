#!/usr/bin/env python3
"""A prototype of a stream that keeps ubio's contract on its input, outside
ubio, to try one question: does reading ahead in small folios keep a
neighbour's cache where the kernel's 2 MiB readahead folios cost it? Copies
SRC to DST as ubio's emulated backend does (contract.py: what it read
dropped behind it, what it wrote written back and dropped behind a 16 MiB
window), then fsync. HOW: kernel-readahead or willneed-steps
(contract.read_through).

    copy.py HOW SRC DST
"""
import os
import sys

import contract


def main():
    how, src, dst = sys.argv[1:4]
    i = os.open(src, os.O_RDONLY)
    o = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    contract.read_through(i, how, contract.WriteBehind(o).write)
    os.fsync(o)
    for fd in (i, o):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


if __name__ == "__main__":
    main()
