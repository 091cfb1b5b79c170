#!/usr/bin/env python3
"""The builtin open()/io.FileIO against ubio.open()/ubio.FileIO, per operation.

    bench/python-fileio.sh [OUT_DIR]     # builds the wheel, then runs this

    bench/python_fileio.py --dir D --sizes 100MB,4GiB --rounds 7,3 [--json F]

Operations (each run a child interpreter on a cold file; the time is the
operation's alone, from opening to closing, interpreter start-up excluded):
  readall     FileIO(path).readall()                   (the raw layer, one call)
  read-64k    open(path, "rb") then read(64 KiB) to the end
  read-1m     open(path, "rb") then read(1 MiB) to the end
  readinto    open(path, "rb") then readinto(1 MiB bytearray) to the end
  write       open(path, "wb"), write(1 MiB) x size, flush, fsync, close
              (to durability: the builtin's close leaves the data dirty)
Modes:
  builtin          io.FileIO / open()
  builtin+backed   the same, right after anonymous memory of the size of the
                   pages the run takes (the file's page cache, and readall's
                   result) was faulted in, in huge pages, and freed: on this
                   VM with free page reporting a buffered run otherwise pays a
                   host fault per page-cache page, which bare metal never does
                   (bench/run_programs.py's `backed`)
  ubio             ubio.FileIO / ubio.open() (backend auto)
Every round runs every (operation, mode) pair once in a new random order.
Before each read the file's pages are evicted (ubio.evict, this file only);
before each write the output is removed. Measured per run: wall time, the
child's user + system CPU, the file's cached pages: their peak (cachestat()
every 10 ms from this process) and what stays after the child exits, and the
free memory the VM handed back to its host while the child ran (free page
reporting's reported_kib; "-" where the kernel has no such counter).
"""

import argparse
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import threading

import ubio

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
OPS = ("readall", "read-64k", "read-1m", "readinto", "write")
MODES = ("builtin", "builtin+backed", "ubio")

CHILD = r"""
import io, json, os, resource, sys, time
op, mode, path, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if mode == "ubio":
    import ubio
    FileIO, opener = ubio.FileIO, ubio.open
else:
    FileIO, opener = io.FileIO, open
MiB = 1 << 20
got = 0
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
if op == "readall":
    with FileIO(path) as f:
        got = len(f.readall())
elif op in ("read-64k", "read-1m"):
    n = 64 << 10 if op == "read-64k" else MiB
    with opener(path, "rb") as f:
        while (b := f.read(n)):
            got += len(b)
elif op == "readinto":
    buf = bytearray(MiB)
    with opener(path, "rb") as f:
        while (k := f.readinto(buf)):
            got += k
elif op == "write":
    block = os.urandom(MiB)
    with opener(path, "wb") as f:
        for _ in range(size // MiB):
            got += f.write(block)
        got += f.write(block[: size % MiB])
        f.flush()
        os.fsync(f.fileno())
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"bytes": got, "wall_s": wall, "cpu_s": cpu}))
"""


def parse_size(s):
    units = {"MB": 10**6, "GB": 10**9, "MiB": MiB, "GiB": 1 << 30}
    for u, m in units.items():
        if s.endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def make_file(path, size):
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, MiB)
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())
    ubio.evict(path, sync=True)


def prefault_and_release(nbytes):
    """Fault in `nbytes` of anonymous memory (huge pages where the kernel
    gives them) and free it: the `+backed` baseline."""
    m = mmap.mmap(-1, nbytes)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except (AttributeError, OSError):
        pass
    chunk = b"\1" * (64 * MiB)
    while m.tell() < nbytes:
        m.write(chunk[: nbytes - m.tell()])
    m.close()


def reported_kib():
    """Free memory handed back to the host so far (free page reporting, this
    VM's kernel; see FACTS.md), or None where the counter does not exist."""
    try:
        with open("/sys/module/page_reporting/parameters/reported_kib") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def cached_pages(path):
    try:
        return ubio.stat(path)["cached"]
    except FileNotFoundError:
        return 0


def run_one(op, mode, data, out, size):
    path = out if op == "write" else data
    if op == "write":
        if os.path.exists(out):
            os.unlink(out)
    else:
        ubio.evict(data, sync=True)
    if mode == "builtin+backed":
        # The file's pages, and readall's result as large again.
        prefault_and_release(size * (2 if op == "readall" else 1))
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.wait(0.01):
            peak = max(peak, cached_pages(path))

    t = threading.Thread(target=sample)
    t.start()
    rep0 = reported_kib()
    res = subprocess.run(
        [sys.executable, "-c", CHILD, op, "ubio" if mode == "ubio" else "builtin", path, str(size)],
        check=True,
        capture_output=True,
        text=True,
    )
    rep1 = reported_kib()
    stop.set()
    t.join()
    run = json.loads(res.stdout)
    # Pages handed to the host while the child ran: each costs a host fault
    # when it is taken again (a bare-metal machine has none).
    run["reported_mib"] = None if rep0 is None or rep1 is None else (rep1 - rep0) / 1024
    assert run["bytes"] == size, (op, mode, run)
    run.update(op=op, mode=mode, size_bytes=size, cache_peak_mib=peak * PAGE / MiB)
    run["cache_after_mib"] = cached_pages(path) * PAGE / MiB
    return run


def fmt(values, f="{:.0f}"):
    return f"{f.format(statistics.median(values))} [{f.format(min(values))}-{f.format(max(values))}]"


def summary(runs, size):
    print(f"\n## {size / 1e6:.0f} MB ({size} bytes), {len({r['round'] for r in runs})} rounds\n")
    print("| operation | mode | MB/s median [min-max] | vs builtin | vs builtin+backed | CPU s/GB "
          "| cache peak / after MiB | reported MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    med = {}
    for op in OPS:
        for mode in MODES:
            rs = [r for r in runs if r["op"] == op and r["mode"] == mode]
            if rs:
                med[op, mode] = statistics.median(r["bytes"] / r["wall_s"] / 1e6 for r in rs)
    for op in OPS:
        for mode in MODES:
            rs = [r for r in runs if r["op"] == op and r["mode"] == mode]
            if not rs:
                continue
            speed = [r["bytes"] / r["wall_s"] / 1e6 for r in rs]
            cpu = [r["cpu_s"] / (r["bytes"] / 1e9) for r in rs]
            vs = lambda base: f"{med[op, mode] / med[op, base]:.2f}x" if (op, base) in med else ""  # noqa: E731
            peak = statistics.median(r["cache_peak_mib"] for r in rs)
            after = statistics.median(r["cache_after_mib"] for r in rs)
            rep = [r["reported_mib"] for r in rs if r.get("reported_mib") is not None]
            rep = fmt(rep) if rep else "-"
            print(f"| {op} | {mode} | {fmt(speed)} | {vs('builtin')} | {vs('builtin+backed')} "
                  f"| {statistics.median(cpu):.2f} | {peak:.0f} / {after:.0f} | {rep} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--sizes", default="100MB,4GiB")
    ap.add_argument("--rounds", default="7,3", help="rounds per size, in the same order")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--json")
    ap.add_argument("--seed", type=int, default=25)
    a = ap.parse_args()
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    rounds = [int(r) for r in a.rounds.split(",")]
    ops = a.ops.split(",")
    rng = random.Random(a.seed)
    all_runs = []
    for size, n in zip(sizes, rounds):
        data, out = os.path.join(a.dir, f"data-{size}"), os.path.join(a.dir, f"out-{size}")
        make_file(data, size)
        runs = []
        for rnd in range(n):
            pairs = [(op, mode) for op in ops for mode in MODES]
            rng.shuffle(pairs)
            for op, mode in pairs:
                r = run_one(op, mode, data, out, size)
                r["round"] = rnd
                runs.append(r)
                print(f"round {rnd} {op:<9} {mode:<15} {r['bytes'] / r['wall_s'] / 1e6:8.0f} MB/s "
                      f"cpu {r['cpu_s']:.2f} s, cache peak {r['cache_peak_mib']:.0f} MiB, "
                      f"reported {r['reported_mib'] if r['reported_mib'] is None else round(r['reported_mib'])} MiB",
                      flush=True)
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(all_runs + runs, f, indent=1)
        for p in (data, out):
            if os.path.exists(p):
                os.unlink(p)
        all_runs += runs
        summary(runs, size)


if __name__ == "__main__":
    main()
