#!/usr/bin/env python3
"""Reading a big file from Python and C, with and without ubio.

    bench/python-c.sh [SIZE_GIB] [ROUNDS]     # builds what it needs, then runs this

Modes (each a child process reading the whole file, cold, 1 MiB at a time):
  py-open   builtin open(path, "rb") + readinto
  py-ubio   ubio.open(path, "rb") + readinto (a BufferedReader over ubio.FileIO)
  c-read    ubio-sum --plain: read(2)
  c-ubio    ubio-sum: ubio_read()
Every round runs the modes in a random order; before each run the file's
pages are evicted. Measured per run: wall time, the child's CPU time (user +
sys, from wait4), and the peak of the file's cached pages (cachestat() every
20 ms from this process). Prints the medians over the rounds and writes
every run to --json.
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time

import ubio

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")

PY_READ = """
import sys
path, use_ubio = sys.argv[1], sys.argv[2] == "1"
if use_ubio:
    import ubio
    f = ubio.open(path, "rb")
else:
    f = open(path, "rb")
buf = bytearray(1 << 20)
n = total = 0
with f:
    while (n := f.readinto(buf)):
        total += n
print(total)
"""


def commands(path, summer):
    py = sys.executable
    return {
        "py-open": [py, "-c", PY_READ, path, "0"],
        "py-ubio": [py, "-c", PY_READ, path, "1"],
        "c-read": [summer, "--plain", path],
        "c-ubio": [summer, path],
    }


def run_one(cmd, path):
    ubio.evict(path, sync=True)
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.wait(0.02):
            peak = max(peak, ubio.stat(path)["cached"])

    t = threading.Thread(target=sample)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t.start()
    start = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.monotonic() - start
    stop.set()
    t.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    left = ubio.stat(path)["cached"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_secs": wall,
        "cpu_secs": cpu,
        "peak_cached_mib": peak * PAGE / MiB,
        "cached_after_mib": left * PAGE / MiB,
        "stdout": out.stdout.strip(),
    }


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    block = os.urandom(MiB)
    with ubio.open(path, "wb") as f:  # written without filling the cache
        for i in range(size // MiB):
            f.write(i.to_bytes(8, "little") + block[8:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", required=True)
    ap.add_argument("--size-gib", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--summer", required=True, help="the ubio-sum example program")
    ap.add_argument("--json", help="write every run here")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data file")
    args = ap.parse_args()

    size = args.size_gib << 30
    make_file(args.file, size)
    cmds = commands(args.file, args.summer)
    rng = random.Random(args.seed)
    runs = {m: [] for m in cmds}
    # Warm-up (not counted): one run of each, so the first measured run does
    # not pay for fresh guest memory alone.
    for m in cmds:
        run_one(cmds[m], args.file)
    for r in range(args.rounds):
        order = list(cmds)
        rng.shuffle(order)
        for m in order:
            res = run_one(cmds[m], args.file)
            res["round"] = r
            runs[m].append(res)
            print(f"round {r} {m:8} {size / MiB / res['wall_secs']:7.0f} MiB/s  cpu {res['cpu_secs']:5.2f} s  "
                  f"peak {res['peak_cached_mib']:6.0f} MiB  after {res['cached_after_mib']:5.0f} MiB", flush=True)
    print(f"\nmedians of {args.rounds} rounds, {args.size_gib} GiB cold read, 1 MiB reads:")
    print(f"{'mode':8} {'MiB/s':>7} {'min':>6} {'max':>6} {'cpu s':>6} {'peak MiB':>9} {'after MiB':>9}")
    summary = {}
    for m, rs in runs.items():
        speeds = [size / MiB / x["wall_secs"] for x in rs]
        summary[m] = {
            "mib_per_sec": statistics.median(speeds),
            "cpu_secs": statistics.median(x["cpu_secs"] for x in rs),
            "peak_cached_mib": statistics.median(x["peak_cached_mib"] for x in rs),
            "cached_after_mib": statistics.median(x["cached_after_mib"] for x in rs),
        }
        s = summary[m]
        print(f"{m:8} {s['mib_per_sec']:7.0f} {min(speeds):6.0f} {max(speeds):6.0f} {s['cpu_secs']:6.2f} "
              f"{s['peak_cached_mib']:9.0f} {s['cached_after_mib']:9.0f}")
    outs = {rs[0]["stdout"].split(",")[0] for rs in runs.values()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size_bytes": size, "rounds": args.rounds, "runs": runs, "medians": summary}, f, indent=1)
    ubio.evict(args.file)
    if not args.keep:
        os.unlink(args.file)
    print("(buffered figures depend on what ran before: this VM hands free memory back to its host, "
          "so a run that fills the page cache pays for fresh memory; ubio's runs reuse a few MiB)")
    assert all(o.startswith(str(size)) for o in outs), outs


if __name__ == "__main__":
    main()
