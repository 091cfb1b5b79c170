#!/usr/bin/env python3
"""About 15 unmodified programs on a big file, with and without `ubio run`.

    bench/run-programs.sh [SIZE_GIB] [ROUNDS]      # prepares, runs, summarizes

    bench/run_programs.py prepare --dir D --size-gib N --ubio PATH
    bench/run_programs.py round   --dir D --ubio PATH --jsonl runs.jsonl
    bench/run_programs.py summary --jsonl runs.jsonl

Each round runs every (program, mode) pair once in a new random order; mode
`plain` is `sh -c CMD`, mode `ubio` is `ubio run -- sh -c CMD`. Before each
run the input and the outputs' pages are evicted (`ubio evict --sync`: the
data files only, not the whole machine's cache). A writer's command ends with
`sync OUTPUT` in both modes, so both pay for getting the data to the disk
(`ubio run` also waits for the writeback of what the program wrote).

Measured per run: wall time; user + sys CPU of the whole tree (wait4 on the
top process: it and every descendant it reaped); for `ubio run`, ubio's own
CPU (the engine: read from /proc/PID/stat while ubio is a zombie, before it
is reaped, so its children are not in it); the peak of the data files'
cached pages together (cachestat() every 10 ms from this process).
"""

import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

GiB = 1 << 30
MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                   "crates", "ubio-cli", "tests", "run_programs")

# name, command (run by sh in the data directory), output files
PY_READ = ("python3 -c 'import sys\nf=open(\"in\",\"rb\")\nb=bytearray(1<<20)\n"
           "n=0\nwhile (k:=f.readinto(b)): n+=k\nprint(n)'")
PROGRAMS = [
    ("cat", "cat in", []),
    ("cp", "cp in out", ["out"]),
    ("sha256sum", "sha256sum in", []),
    ("md5sum < in", "md5sum < in", []),
    ("zstd -T1 (write)", "zstd -q -1 -T1 -f in -o out.zst", ["out.zst"]),
    ("zstd -d (read .zst, write)", "zstd -q -d -c in.zst > out", ["out"]),
    ("base64 > out", "base64 in > out", ["out"]),
    ("gzip -1", "gzip -1 -c in > out.gz", ["out.gz"]),
    ("grep -c", "grep -c 9999 in", []),
    ("tar cf", "tar cf out.tar in", ["out.tar"]),
    ("python3 read loop", PY_READ, []),
    ("perl read loop", "perl -e 'open(I,\"<\",\"in\") or die; my $n=0; "
     "while (my $k=read(I,$b,1<<20)) { $n+=$k } print \"$n\\n\"'", []),
    ("static Go copy", "./gocopy -rw in out", ["out"]),
    ("static musl fread/fwrite", "./cstdio < in > out", ["out"]),
    ("pipeline cat | zstd", "cat in | zstd -q -1 -T1 > out.zst", ["out.zst"]),
]
DATA = ["in", "in.zst"]


class Cachestat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def cached_pages(path):
    """Pages of `path` in the page cache (cachestat, syscall 451), 0 if gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        cs, rng = Cachestat(), Range(0, 0)
        if libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(cs), 0) != 0:
            raise OSError(ctypes.get_errno(), "cachestat " + path)
        return cs.cache
    finally:
        os.close(fd)


def prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    inp = os.path.join(a.dir, "in")
    size = int(a.size_gib * GiB)
    if not os.path.exists(inp) or os.path.getsize(inp) != size:
        # Text (numbers, one a line): compressors and grep behave as on logs.
        subprocess.run(f"seq 1 2000000000 | head -c {size} > in", shell=True,
                       check=True, cwd=a.dir)
    subprocess.run("zstd -q -1 -T0 -f in -o in.zst", shell=True, check=True, cwd=a.dir)
    subprocess.run(["go", "build", "-o", os.path.join(a.dir, "gocopy"),
                    os.path.join(SRC, "gocopy.go")], check=True,
                   env=dict(os.environ, CGO_ENABLED="0"))
    subprocess.run(["musl-gcc", "-static", "-O2", "-o", os.path.join(a.dir, "cstdio"),
                    os.path.join(SRC, "cstdio.c")], check=True)
    subprocess.run(["sync"], check=True)


def proc_cpu(pid):
    """utime + stime of `pid` alone, in seconds (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_one(a, name, cmd, outputs, mode):
    files = [os.path.join(a.dir, f) for f in DATA + outputs]
    for o in outputs:
        try:
            os.unlink(os.path.join(a.dir, o))
        except FileNotFoundError:
            pass
    subprocess.run([a.ubio, "evict", "--sync"] + [os.path.join(a.dir, f) for f in DATA],
                   check=True, stdout=subprocess.DEVNULL)
    if outputs:
        cmd = f"{cmd} && sync {' '.join(outputs)}"
    argv = ["sh", "-c", cmd]
    if mode == "ubio":
        argv = [a.ubio, "run", "--"] + argv
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.wait(0.01):
            peak = max(peak, sum(cached_pages(f) for f in files))

    t = threading.Thread(target=sample)
    t.start()
    start = time.monotonic()
    # Stdout into a pipe this process drains, not /dev/null: GNU grep stops
    # at the first match when its output is /dev/null.
    p = subprocess.Popen(argv, cwd=a.dir, stdout=subprocess.PIPE)
    drain = threading.Thread(target=lambda: [None for _ in iter(lambda: p.stdout.read(1 << 20), b"")])
    drain.start()
    # Wait without reaping: the zombie's own CPU is ubio's engine alone.
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    wall = time.monotonic() - start
    own = proc_cpu(p.pid)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    t.join()
    drain.join()
    p.stdout.close()
    left = sum(cached_pages(f) for f in files)
    if p.returncode != 0:
        raise SystemExit(f"{name} ({mode}) exited {p.returncode}")
    return {
        "program": name, "mode": mode, "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
        "engine_cpu_s": own if mode == "ubio" else None,
        "peak_cache_mib": peak * PAGE / MiB, "left_mib": left * PAGE / MiB,
        "input_bytes": os.path.getsize(os.path.join(a.dir, "in")),
    }


def round_(a):
    pairs = [(p, m) for p in PROGRAMS for m in ("plain", "ubio")
             if not a.only or a.only in p[0]]
    random.shuffle(pairs)
    with open(a.jsonl, "a") as out:
        for (name, cmd, outputs), mode in pairs:
            r = run_one(a, name, cmd, outputs, mode)
            r["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            print(f"{name:<28} {mode:<5} {r['wall_s']:7.2f} s  cpu {r['cpu_s']:6.2f} s"
                  f"  engine {r['engine_cpu_s'] or 0:5.2f} s  peak {r['peak_cache_mib']:7.1f} MiB"
                  f"  left {r['left_mib']:5.1f} MiB", flush=True)
            out.write(json.dumps(r) + "\n")
            out.flush()


def med(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def summary(a):
    runs = [json.loads(line) for line in open(a.jsonl)]
    names = [p[0] for p in PROGRAMS if any(r["program"] == p[0] for r in runs)]
    print(f"{'program':<28} {'n':>2}  {'wall plain s':<20} {'wall ubio s':<20} {'speed':>6}  "
          f"{'CPU plain s':<20} {'CPU ubio s':<20} {'CPU +%':>6}  {'engine s/GB':>11}  "
          f"{'peak plain MiB':>14} {'peak ubio MiB':>13}")
    for n in names:
        pl = [r for r in runs if r["program"] == n and r["mode"] == "plain"]
        ub = [r for r in runs if r["program"] == n and r["mode"] == "ubio"]
        if not pl or not ub:
            continue
        wp, wu = [r["wall_s"] for r in pl], [r["wall_s"] for r in ub]
        cp, cu = [r["cpu_s"] for r in pl], [r["cpu_s"] for r in ub]
        # Engine CPU per GB of `in` (4 GiB for every program; copies move
        # as much again through their output).
        eng = [r["engine_cpu_s"] / (r["input_bytes"] / 1e9) for r in ub]
        speed = statistics.median(wp) / statistics.median(wu)
        cpu = (statistics.median(cu) / statistics.median(cp) - 1) * 100
        print(f"{n:<28} {len(ub):>2}  {med(wp):<20} {med(wu):<20} {speed:5.2f}x  "
              f"{med(cp):<20} {med(cu):<20} {cpu:+5.1f}%  {statistics.median(eng):11.3f}  "
              f"{max(r['peak_cache_mib'] for r in pl):14.0f} {max(r['peak_cache_mib'] for r in ub):13.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["prepare", "round", "summary"])
    ap.add_argument("--dir")
    ap.add_argument("--size-gib", type=float, default=4)
    ap.add_argument("--ubio")
    ap.add_argument("--jsonl")
    ap.add_argument("--only", help="run only programs whose name holds this text")
    a = ap.parse_args()
    if a.ubio:
        a.ubio = os.path.abspath(a.ubio)
    {"prepare": prepare, "round": round_, "summary": summary}[a.step](a)


if __name__ == "__main__":
    main()
