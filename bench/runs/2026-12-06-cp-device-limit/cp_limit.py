#!/usr/bin/env python3
"""`ubio cp` at the device's limit (issue 37, item 5): is a copy as fast as the
slower of reading and writing the data, each by its fastest path?

On a filesystem mounted at DIR, with a source of SIZE written once: per round, in
a new random order, the source evicted (ubio evict) and the destination removed
before each command, the time to durable data of

- reads:  cat SRC >/dev/null (buffered), dd iflag=direct, ubio cat;
- writes: dd conv=fsync (buffered), dd oflag=direct conv=fsync, of SIZE from
  /dev/zero;
- copies: GNU cp then sync DST, dd iflag=direct oflag=direct conv=fsync (the
  fastest copy by hand), ubio cp --sync, ubio cp --sync --direct-writes never
  (copy_file_range in pieces, no O_DIRECT) and ubio cp --sync --reflink=never
  (the reader / writer pipeline, whatever the size).

Medians of the rounds, the CPU (user + system of the command) per GB, and each
copy against max(fastest read, fastest write): the time of a copy that overlaps
reading and writing perfectly. The command lines are printed as run.

    cp_limit.py UBIO DIR OUT.json [--size-mib N] [--rounds N] [--seed N]
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

BS = 4 << 20


def commands(ubio, src, dst, size):
    count = size // BS
    return {
        "read: cat (buffered)": f"cat {src} > /dev/null",
        "read: dd iflag=direct": f"dd if={src} of=/dev/null bs=4M iflag=direct status=none",
        "read: ubio cat": f"{ubio} cat {src} > /dev/null",
        "write: dd conv=fsync (buffered)":
            f"dd if=/dev/zero of={dst} bs=4M count={count} conv=fsync status=none",
        "write: dd oflag=direct":
            f"dd if=/dev/zero of={dst} bs=4M count={count} oflag=direct conv=fsync status=none",
        "copy: cp && sync": f"cp {src} {dst} && sync {dst}",
        "copy: dd iflag=direct oflag=direct":
            f"dd if={src} of={dst} bs=4M iflag=direct oflag=direct conv=fsync status=none",
        "copy: ubio cp --sync": f"{ubio} cp --sync {src} {dst}",
        # copy_file_range, as `ubio cp` copied large files before 74d9f0c.
        "copy: ubio cp --sync --direct-writes never":
            f"{ubio} cp --sync --direct-writes never {src} {dst}",
        "copy: ubio cp --sync --reflink=never": f"{ubio} cp --sync --reflink=never {src} {dst}",
    }


def run_one(ubio, cmd, src, dst):
    subprocess.run([ubio, "evict", src], check=True, stdout=subprocess.DEVNULL)
    if os.path.exists(dst):
        os.remove(dst)
    subprocess.run(["sync"], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run(["bash", "-c", cmd], check=True)
    secs = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return secs, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ubio")
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=37)
    a = ap.parse_args()
    size = a.size_mib << 20
    src, dst = os.path.join(a.dir, "src"), os.path.join(a.dir, "dst")
    with open(src, "wb") as f:
        for _ in range(size // BS):
            f.write(os.urandom(BS))
        os.fsync(f.fileno())
    cmds = commands(a.ubio, src, dst, size)
    for name, cmd in cmds.items():
        print(f"{name}: {cmd}", flush=True)
    rng = random.Random(a.seed)
    samples = {name: [] for name in cmds}
    for r in range(a.rounds):
        order = list(cmds)
        rng.shuffle(order)
        for name in order:
            secs, cpu = run_one(a.ubio, cmds[name], src, dst)
            samples[name].append({"secs": secs, "cpu_secs": cpu})
            print(f"round {r + 1}/{a.rounds}: {name}: {size / secs / 1e6:.0f} MB/s "
                  f"({secs:.2f} s, cpu {cpu:.2f} s)", flush=True)
    for p in (src, dst):
        if os.path.exists(p):
            os.remove(p)
    gb = size / 1e9
    summary = {}
    for name, s in samples.items():
        secs = statistics.median(x["secs"] for x in s)
        summary[name] = {
            "mb_per_s_median": size / secs / 1e6,
            "mb_per_s_min": size / max(x["secs"] for x in s) / 1e6,
            "mb_per_s_max": size / min(x["secs"] for x in s) / 1e6,
            "secs_median": secs,
            "cpu_secs_per_gb_median": statistics.median(x["cpu_secs"] for x in s) / gb,
        }
    fastest = {kind: min((v["secs_median"], n) for n, v in summary.items() if n.startswith(kind))
               for kind in ("read", "write")}
    bound = max(fastest["read"][0], fastest["write"][0])
    for name, v in summary.items():
        if name.startswith("copy"):
            v["against_bound"] = bound / v["secs_median"]
    doc = {"size_bytes": size, "rounds": a.rounds, "seed": a.seed, "commands": cmds,
           "fastest_read": fastest["read"][1], "fastest_write": fastest["write"][1],
           "bound_secs": bound, "summary": summary, "samples": samples}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\nfastest read: {fastest['read'][1]}; fastest write: {fastest['write'][1]}; "
          f"a perfect copy: {size / bound / 1e6:.0f} MB/s")
    print("| command | MB/s median [min-max] | CPU s/GB | copy / perfect copy |")
    print("| --- | --- | --- | --- |")
    for name, v in summary.items():
        ratio = f"{v['against_bound']:.2f}" if "against_bound" in v else ""
        print(f"| {name} | {v['mb_per_s_median']:.0f} [{v['mb_per_s_min']:.0f}-"
              f"{v['mb_per_s_max']:.0f}] | {v['cpu_secs_per_gb_median']:.2f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
