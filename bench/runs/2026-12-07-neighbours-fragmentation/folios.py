#!/usr/bin/env python3
"""The sizes of the page cache's folios a read leaves, by how the file was
read: the kernel's readahead grows them to 2 MiB; POSIX_FADV_WILLNEED asked
in steps, or reads with readahead off, do not. What a stream could read ahead
with instead of the kernel's readahead (README, "What it shows").

Writes a file of SIZE MiB (default 256) under DIR, then for each way drops
its pages, reads it that way, maps it and counts the folios behind the mapped
pages (/proc/self/pagemap, /proc/kpageflags: needs root). Removes the file.

    folios.py DIR [SIZE_MIB]
"""
import mmap
import os
import struct
import sys
import time

MIB = 1 << 20
PAGE = 4096
KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL = 15, 16


def read_sequentially(fd, size):
    for off in range(0, size, MIB):
        os.pread(fd, MIB, off)


def willneed_whole(fd, size):
    os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)


def willneed_in_steps(fd, size, step=8 * MIB):
    for off in range(0, size, step):
        os.posix_fadvise(fd, off, step, os.POSIX_FADV_WILLNEED)


def read_without_readahead(fd, size):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    read_sequentially(fd, size)


WAYS = {
    "read, 1 MiB calls (the kernel's readahead)": read_sequentially,
    "one POSIX_FADV_WILLNEED of the whole file": willneed_whole,
    "POSIX_FADV_WILLNEED in 8 MiB steps": willneed_in_steps,
    "read with POSIX_FADV_RANDOM (no readahead)": read_without_readahead,
}


def folio_sizes(fd, size):
    """{folio size in bytes: count} over the file's first `size` bytes."""
    m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    for off in range(0, size, PAGE):
        m[off]  # maps the cached page (the read above brought them all)
    ino = os.fstat(fd).st_ino
    start = next(
        int(f[0].split("-")[0], 16)
        for f in (line.split() for line in open("/proc/self/maps"))
        if len(f) >= 6 and int(f[4]) == ino
    )
    kinds = []
    with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
        for i in range(size // PAGE):
            pm.seek((start // PAGE + i) * 8)
            entry = struct.unpack("Q", pm.read(8))[0]
            if not entry >> 63 & 1:
                kinds.append("absent")
                continue
            kf.seek((entry & ((1 << 55) - 1)) * 8)
            flags = struct.unpack("Q", kf.read(8))[0]
            kinds.append("head" if flags >> KPF_COMPOUND_HEAD & 1 else
                         "tail" if flags >> KPF_COMPOUND_TAIL & 1 else "single")
    m.close()
    sizes, run = {}, 0
    for k in kinds + ["single"]:
        if k == "tail":
            run += 1
            continue
        if run:
            sizes[run * PAGE] = sizes.get(run * PAGE, 0) + 1
        run = 1 if k == "head" else 0
        if k == "single":
            sizes[PAGE] = sizes.get(PAGE, 0) + 1
    sizes[PAGE] -= 1  # the sentinel
    return sizes


def main():
    d, size = sys.argv[1], int(sys.argv[2] if len(sys.argv) > 2 else 256) * MIB
    path = os.path.join(d, f"folios-{os.getpid()}")
    try:
        with open(path, "wb") as f:
            for _ in range(size // MIB):
                f.write(os.urandom(MIB))
            os.fsync(f.fileno())
        print(f"{size // MIB} MiB on {path}; folios by size (count), largest last")
        for name, way in WAYS.items():
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            way(fd, size)
            time.sleep(1)  # WILLNEED's reads complete
            sizes = folio_sizes(fd, size)
            os.close(fd)
            shown = ", ".join(
                f"{s // 1024} KiB: {n}" for s, n in sorted(sizes.items()) if n
            )
            print(f"- {name}: {shown}")
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()
