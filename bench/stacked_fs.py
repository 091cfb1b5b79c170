#!/usr/bin/env python3
"""Page cache of the real file under overlayfs and FUSE: buffered vs ubio.

    bench/stacked-fs.sh [SIZE_GIB] [ROUNDS]    # builds ubio, then runs this

Under DIR (on the host's ext4) it makes a SIZE_GIB file `src` (cold) and
mounts an overlay (lowerdir holding `data`, a copy of it) and a bindfs FUSE
mount (`-o kernel_cache`, daemon not under ubio) of a directory holding
`data` too. Cases, each a shell command (printed):
  overlay read    cat OVL/data > /dev/null            vs  ubio cat OVL/data > /dev/null
  overlay write   cp src OVL/out && sync OVL/out      vs  ubio cp src OVL/out && sync OVL/out
  fuse read       cat FUSE/data > /dev/null           vs  ubio cat FUSE/data > /dev/null
  fuse write      cp src FUSE/out && sync FUSE/out    vs  ubio cp src FUSE/out && sync FUSE/out
Measured per run, with cachestat() every 10 ms from this process: the peak
and the final (right after the command) cached pages of the real file (the
overlay's lower `data` or upper `out`; for FUSE the mount's own file and the
daemon's backing file, both), wall time and the children's system time.
Before each run every file's pages are evicted and `out` removed. Every
round runs the cases in a random order; prints medians (min, max) and
writes every run to --json.
"""

import argparse
import ctypes
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import threading
import time

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
SYS_CACHESTAT = 451
libc = ctypes.CDLL(None, use_errno=True)


class CsRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class Cs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


def cached(path):
    """Cached pages of the file at path (0 if it does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        r, cs = CsRange(0, 0), Cs()
        if libc.syscall(SYS_CACHESTAT, fd, ctypes.byref(r), ctypes.byref(cs), 0) != 0:
            raise OSError(ctypes.get_errno(), f"cachestat {path}")
        return cs.cache
    finally:
        os.close(fd)


def evict(path):
    if os.path.exists(path):
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def run(cmd, watch, clean):
    """Run the shell command `cmd`; watch: {name: path} sampled every 10 ms."""
    for p in clean:
        if os.path.exists(p):
            os.unlink(p)
    for p in watch.values():
        evict(p)
    peak = {n: 0 for n in watch}
    stop = threading.Event()

    def sample():
        while True:
            for n, p in watch.items():
                peak[n] = max(peak[n], cached(p))
            if stop.wait(0.01):
                return

    t = threading.Thread(target=sample)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t.start()
    start = time.monotonic()
    subprocess.run(["sh", "-c", cmd], check=True)
    wall = time.monotonic() - start
    stop.set()
    t.join()
    final = {n: cached(p) for n, p in watch.items()}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for n in watch:
        peak[n] = max(peak[n], final[n])
    return {
        "wall_secs": wall,
        "sys_secs": after.ru_stime - before.ru_stime,
        "peak_mib": {n: v * PAGE / MiB for n, v in peak.items()},
        "final_mib": {n: v * PAGE / MiB for n, v in final.items()},
    }


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        for i in range(size // MiB):
            f.write(i.to_bytes(8, "little") + block[8:])
            if i % 256 == 255:
                f.flush()
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    evict(path)


def sh(*args):
    subprocess.run(args, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ubio", required=True)
    ap.add_argument("--size-gib", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--seed", type=int)
    args = ap.parse_args()

    d = os.path.abspath(args.dir)
    size = args.size_gib << 30
    for sub in ("lower", "upper", "work", "ovl", "backing", "fuse"):
        os.makedirs(f"{d}/{sub}", exist_ok=True)
    src = f"{d}/src"
    make_file(src, size)
    for copy in (f"{d}/lower/data", f"{d}/backing/data"):
        if not (os.path.exists(copy) and os.path.getsize(copy) == size):
            sh(args.ubio, "cp", src, copy)
    mounted = []
    bindfs = None
    try:
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir={d}/lower,upperdir={d}/upper,workdir={d}/work", f"{d}/ovl")
        mounted.append(f"{d}/ovl")
        bindfs = subprocess.Popen(["bindfs", "-f", "-o", "kernel_cache", f"{d}/backing", f"{d}/fuse"])
        mounted.append(f"{d}/fuse")
        for _ in range(500):
            if os.path.ismount(f"{d}/fuse"):
                break
            time.sleep(0.02)
        else:
            raise SystemExit("bindfs did not mount")
        u = args.ubio
        cases = {}
        for mode, cat, cp in (("buffered", "cat", "cp"), ("ubio", f"{u} cat", f"{u} cp")):
            cases[f"overlay read {mode}"] = (
                f"{cat} {d}/ovl/data > /dev/null", {"lower data": f"{d}/lower/data"}, [])
            cases[f"overlay write {mode}"] = (
                f"{cp} {src} {d}/ovl/out && sync {d}/ovl/out", {"upper out": f"{d}/upper/out"},
                [f"{d}/ovl/out"])
            cases[f"fuse read {mode}"] = (
                f"{cat} {d}/fuse/data > /dev/null",
                {"mount data": f"{d}/fuse/data", "backing data": f"{d}/backing/data"}, [])
            cases[f"fuse write {mode}"] = (
                f"{cp} {src} {d}/fuse/out && sync {d}/fuse/out",
                {"mount out": f"{d}/fuse/out", "backing out": f"{d}/backing/out"}, [f"{d}/fuse/out"])
        for name, (cmd, _, _) in cases.items():
            print(f"{name:22} $ {cmd}")
        rng = random.Random(args.seed)
        runs = {n: [] for n in cases}
        for r in range(args.rounds):
            order = list(cases)
            rng.shuffle(order)
            for n in order:
                cmd, watch, clean = cases[n]
                res = run(cmd, watch, clean)
                res["round"] = r
                runs[n].append(res)
                evict(src)
                print(f"round {r} {n:22} {size / MiB / res['wall_secs']:6.0f} MiB/s sys {res['sys_secs']:5.2f} s  "
                      + "  ".join(f"{w}: peak {res['peak_mib'][w]:5.0f} final {res['final_mib'][w]:5.0f} MiB"
                                  for w in watch), flush=True)
        for p in (f"{d}/ovl/out", f"{d}/fuse/out"):
            if os.path.exists(p):
                os.unlink(p)
    finally:
        for m in reversed(mounted):
            subprocess.run(["umount", m])
        if bindfs:
            try:
                bindfs.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bindfs.kill()

    med = statistics.median
    print(f"\n{args.size_gib} GiB, medians (min-max) of {args.rounds} rounds in random order; "
          f"cache of the real file in MiB (cachestat every 10 ms)")
    summary = {}
    for n, rs in runs.items():
        speeds = [size / MiB / x["wall_secs"] for x in rs]
        s = {"mib_per_sec": med(speeds), "min": min(speeds), "max": max(speeds),
             "sys_secs": med(x["sys_secs"] for x in rs), "cache": {}}
        for w in rs[0]["peak_mib"]:
            s["cache"][w] = {k: med(x[k][w] for x in rs) for k in ("peak_mib", "final_mib")}
        summary[n] = s
        print(f"{n:22} {s['mib_per_sec']:6.0f} MiB/s ({s['min']:.0f}-{s['max']:.0f}), sys {s['sys_secs']:5.2f} s; "
              + "; ".join(f"{w}: peak {c['peak_mib']:.0f}, final {c['final_mib']:.0f}" for w, c in s["cache"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size_gib": args.size_gib, "rounds": args.rounds,
                       "commands": {n: c[0] for n, c in cases.items()}, "runs": runs, "summary": summary},
                      f, indent=1)


if __name__ == "__main__":
    main()
