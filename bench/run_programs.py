#!/usr/bin/env python3
"""About 19 unmodified programs on a big file, with and without `ubio run`.

    bench/run-programs.sh [SIZE_GIB] [ROUNDS]      # prepares, runs, summarizes

    bench/run_programs.py prepare --dir D --size-gib N --ubio PATH
    bench/run_programs.py round   --dir D --ubio PATH --jsonl runs.jsonl [--only TEXT] [--modes M,...]
    bench/run_programs.py summary --jsonl runs.jsonl

Each round runs every (program, mode) pair once in a new random order; mode
`plain` is `sh -c CMD`, mode `ubio` is `ubio run -- sh -c CMD`, and mode
`backed` is `plain` right after anonymous memory of the size of the pages
the run will cache (the input and as much for each output) was faulted in,
in huge pages, and freed: on this VM with free page reporting a plain run
otherwise pays a host fault for every page-cache page it takes, which bare
metal never does, so `backed` is the baseline a bare-metal machine would see
(as the benchmark harness's `+backed` modes; ubio-bench's backing.rs). Before each
run the input and the outputs' pages are evicted (`ubio evict --sync`: the
data files only, not the whole machine's cache). A writer's command ends with
`sync OUTPUT` in both modes, so both pay for getting the data to the disk
(`ubio run` also waits for the writeback of what the program wrote).

Measured per run: wall time; user + sys CPU of the whole tree (wait4 on the
top process: it and every descendant it reaped); for `ubio run`, ubio's own
CPU (the engine: read from /proc/PID/stat while ubio is a zombie, before it
is reaped, so its children are not in it); the whole machine's busy CPU
(/proc/stat: all but idle and iowait), which also holds the kernel's
flusher threads: in plain runs they write the dirty pages back, outside
the tree, while under `ubio run` the engine starts that writeback itself;
the peak of the data files' cached pages together (cachestat() every 10 ms
from this process).
"""

import argparse
import ctypes
import json
import mmap
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
    # Copies the kernel makes in calls that move no position while they run
    # (`--only "kernel copy"` runs these alone).
    ("kernel copy: Go io.Copy", "./gocopy in out", ["out"]),
    ("kernel copy: musl copy_file_range", "./kcopy cfr in out", ["out"]),
    ("kernel copy: musl sendfile", "./kcopy sendfile in out", ["out"]),
    ("kernel copy: musl splice", "./kcopy splice in out", ["out"]),
]
DATA = ["in", "in.zst"]
MODES = ("plain", "backed", "ubio")


class Cachestat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def cachestat(path):
    """cachestat() (syscall 451) of the whole of `path`; None if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        cs, rng = Cachestat(), Range(0, 0)
        if libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(cs), 0) != 0:
            raise OSError(ctypes.get_errno(), "cachestat " + path)
        return cs
    finally:
        os.close(fd)


def cached_pages(path):
    """Pages of `path` in the page cache, 0 if gone."""
    cs = cachestat(path)
    return cs.cache if cs else 0


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
    for prog in ("cstdio", "kcopy"):
        subprocess.run(["musl-gcc", "-static", "-O2", "-o", os.path.join(a.dir, prog),
                        os.path.join(SRC, prog + ".c")], check=True)
    subprocess.run(["sync"], check=True)


def proc_cpu(pid):
    """utime + stime of `pid` alone, in seconds (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy_s():
    """CPU seconds the whole machine spent busy (every field of /proc/stat's
    cpu line but idle and iowait; guest time is inside user)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return (user + nice + system + irq + softirq + steal) / TICK


def prefault_and_release(nbytes):
    """Fault in `nbytes` of anonymous memory, huge pages where the kernel
    gives them, and free it (see the module doc: `backed`)."""
    m = mmap.mmap(-1, nbytes)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except (AttributeError, OSError):
        pass  # without THP the pages are still faulted in, 4 KiB at a time
    chunk = b"\1" * (64 * MiB)
    for _ in range(nbytes // len(chunk)):
        m.write(chunk)
    m.close()


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
    if mode == "backed":
        prefault_and_release(os.path.getsize(os.path.join(a.dir, "in")) * (1 + len(outputs)))
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.wait(0.01):
            peak = max(peak, sum(cached_pages(f) for f in files))

    t = threading.Thread(target=sample)
    t.start()
    busy = machine_busy_s()
    start = time.monotonic()
    # Stdout into a pipe this process drains, not /dev/null: GNU grep stops
    # at the first match when its output is /dev/null.
    p = subprocess.Popen(argv, cwd=a.dir, stdout=subprocess.PIPE)
    drain = threading.Thread(target=lambda: [None for _ in iter(lambda: p.stdout.read(1 << 20), b"")])
    drain.start()
    # Wait without reaping: the zombie's own CPU is ubio's engine alone.
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    wall = time.monotonic() - start
    busy = machine_busy_s() - busy
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
        "engine_cpu_s": own if mode == "ubio" else None, "machine_cpu_s": busy,
        "peak_cache_mib": peak * PAGE / MiB, "left_mib": left * PAGE / MiB,
        "input_bytes": os.path.getsize(os.path.join(a.dir, "in")),
    }


def round_(a):
    modes = a.modes.split(",")
    if not set(modes) <= set(MODES):
        raise SystemExit(f"--modes: {a.modes}: expected some of {','.join(MODES)}")
    pairs = [(p, m) for p in PROGRAMS for m in modes
             if not a.only or a.only in p[0]]
    random.shuffle(pairs)
    with open(a.jsonl, "a") as out:
        for (name, cmd, outputs), mode in pairs:
            r = run_one(a, name, cmd, outputs, mode)
            r["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            print(f"{name:<34} {mode:<6} {r['wall_s']:7.2f} s  cpu {r['cpu_s']:6.2f} s"
                  f"  machine {r['machine_cpu_s']:6.2f} s"
                  f"  engine {r['engine_cpu_s'] or 0:5.2f} s  peak {r['peak_cache_mib']:7.1f} MiB"
                  f"  left {r['left_mib']:5.1f} MiB", flush=True)
            out.write(json.dumps(r) + "\n")
            out.flush()


def med(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def summary(a):
    """Per program: wall time and speed against plain and backed; the CPU of
    the tree and of the whole machine; the engine's CPU per GB; peaks."""
    runs = [json.loads(line) for line in open(a.jsonl)]
    names = [p[0] for p in PROGRAMS if any(r["program"] == p[0] for r in runs)]
    m = statistics.median
    print(f"{'program':<34} {'n':>2}  {'wall plain s':<20} {'wall backed s':<20} "
          f"{'wall ubio s':<20} {'vs plain':>8} {'vs backed':>9}  "
          f"{'tree CPU +%':>11} {'machine CPU backed s':<20} {'machine CPU ubio s':<20} "
          f"{'+%':>6}  {'engine s/GB':>11}  {'peak plain MiB':>14} {'peak ubio MiB':>13} {'left':>4}")
    for n in names:
        by = {md: [r for r in runs if r["program"] == n and r["mode"] == md] for md in MODES}
        if not by["ubio"]:
            continue
        if not by["plain"]:
            # `--modes ubio` alone (an older ubio): its own figures.
            wall = [r["wall_s"] for r in by["ubio"]]
            print(f"{n:<34} {len(wall):>2}  {'-':<20} {'-':<20} {med(wall):<20}  ubio only: "
                  f"peak {max(r['peak_cache_mib'] for r in by['ubio']):.0f} MiB, "
                  f"left {med([r['left_mib'] for r in by['ubio']])} MiB")
            continue
        wall = {md: [r["wall_s"] for r in rs] for md, rs in by.items()}
        tree = {md: [r["cpu_s"] for r in rs] for md, rs in by.items()}
        mach = {md: [r.get("machine_cpu_s") for r in rs if r.get("machine_cpu_s") is not None]
                for md, rs in by.items()}
        base = "backed" if wall["backed"] else "plain"
        # Engine CPU per GB of `in` (4 GiB for every program; copies move
        # as much again through their output).
        eng = [r["engine_cpu_s"] / (r["input_bytes"] / 1e9) for r in by["ubio"]]
        vs = {md: (m(wall[md]) / m(wall["ubio"]) if wall[md] else float("nan"))
              for md in ("plain", "backed")}
        tree_pct = (m(tree["ubio"]) / m(tree[base]) - 1) * 100
        mach_pct = ((m(mach["ubio"]) / m(mach[base]) - 1) * 100
                    if mach["ubio"] and mach[base] else float("nan"))
        dash = "-"
        print(f"{n:<34} {len(by['ubio']):>2}  {med(wall['plain']):<20} "
              f"{med(wall['backed']) if wall['backed'] else dash:<20} {med(wall['ubio']):<20} "
              f"{vs['plain']:7.2f}x {vs['backed']:8.2f}x  {tree_pct:+10.1f}% "
              f"{med(mach[base]) if mach[base] else dash:<20} "
              f"{med(mach['ubio']) if mach['ubio'] else dash:<20} {mach_pct:+5.1f}%  "
              f"{m(eng):11.3f}  {max(r['peak_cache_mib'] for r in by['plain']):14.0f} "
              f"{max(r['peak_cache_mib'] for r in by['ubio']):13.0f} "
              f"{max(r['left_mib'] for r in by['ubio']):4.0f}")
    print("\nvs plain/backed: the plain (backed) run's median wall time over ubio run's (above 1: "
          "ubio is faster); tree CPU +%: user+sys of the program's process tree under ubio run "
          "(the engine included) against the backed baseline (plain where none ran); machine "
          "CPU: the whole machine's busy time during the run, flusher threads included; +%: "
          "ubio against the baseline; left: MiB of the data files cached after ubio run exited.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["prepare", "round", "summary"])
    ap.add_argument("--dir")
    ap.add_argument("--size-gib", type=float, default=4)
    ap.add_argument("--ubio")
    ap.add_argument("--jsonl")
    ap.add_argument("--only", help="run only programs whose name holds this text")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="the modes a round runs (default: all), e.g. `ubio` with another "
                         "--ubio to measure an older ubio")
    a = ap.parse_args()
    if a.ubio:
        a.ubio = os.path.abspath(a.ubio)
    {"prepare": prepare, "round": round_, "summary": summary}[a.step](a)


if __name__ == "__main__":
    main()
