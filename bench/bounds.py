#!/usr/bin/env python3
"""The engine's bounds for every program at every load (issue 38).

    bench/bounds.py prepare --dir D --ubio PATH
    bench/bounds.py round   --dir D --ubio PATH --jsonl runs.jsonl --load LOAD [--mode M] [--only TEXT]
    bench/bounds.py summary --jsonl runs.jsonl

The programs of the policy test (crates/ubio-cli/tests/policy.rs) and seed
004's dd, each on a cold 256 MiB input (dd writes 1 GiB from /dev/zero),
followed by the engine from outside:

  policy  the daemon (`ubio policy run`), its scope the program's cgroup (a
          memory cgroup below this process's; the daemon is started once
          per round, each program runs in a cgroup of its own);
  policy-limited  the same with `device_dirty_limit = "64M"` (or
          --device-limit's size): the kernel holds every writer of the
          device there (ubio_engine::bdi);
  policy-nice  the daemon as before issue 38: its thread that looks at nice
          -10 (`realtime = false`), not SCHED_FIFO;
  run     `ubio run -- PROGRAM`, the static programs only (the Go copier,
          busybox's dd: the shim cannot enter them): the engine alone;
  run-limited  the same with `--device-dirty-limit 64M` (or --device-limit's).

Loads: `none`; `busy4` and `busy8` (that many busy loops at nice 0 beside
it); `writer` (a second writer, dd to another filesystem: an xfs image on a
loop device, made by `prepare`, writing 4 GiB again and again).

Measured per run with cachestat() every 2 ms (a thread of this process):
the input's cache peak, the outputs' dirty + writeback peak and cache peak,
what stays cached after the engine finished the files; against the bounds
the tests check (common::engine): 64 MiB of cache, 64 MiB of dirty +
writeback; and for `policy` the daemon's looks' lateness (its status).
Every round runs the programs in a new random order.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_programs import cachestat  # noqa: E402
from policy import Cgroup, Daemon, make_file, rm  # noqa: E402

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
SIZE = 256 * MiB
BOUND = 64 * MiB
HERE = os.path.dirname(os.path.abspath(__file__))
GOCOPY_SRC = os.path.join(HERE, "..", "crates", "ubio-cli", "tests", "run_programs", "gocopy.go")
PY_COPY = ("python3 -c 'import shutil; shutil.copyfileobj(open(\"in\",\"rb\"), "
           "open(\"out\",\"wb\"), 1<<20)'")
PY_READ = ("python3 -c 'import sys\nf=open(\"in\",\"rb\")\nb=bytearray(1<<20)\n"
           "n=0\nwhile (k:=f.readinto(b)): n+=k\nprint(n)'")
# name, command (by sh in the data directory), outputs, static (the engine
# follows it under `ubio run`; the shim takes the dynamic ones there)
PROGRAMS = [
    ("cp", "cp in out", ["out"], False),
    ("tar", "tar cf out.tar in", ["out.tar"], False),
    ("sha256sum", "sha256sum in", [], False),
    ("python3 copy", PY_COPY, ["out"], False),
    ("python3 read loop", PY_READ, [], False),
    ("static Go io.Copy", "./gocopy in out", ["out"], True),
    ("static Go read/write loop", "./gocopy -rw in out", ["out"], True),
    ("dd bs=1M count=1024", "DD if=/dev/zero of=out bs=1M count=1024", ["out"], True),
]
# Seed 004's demo (`dd if=/dev/zero of=dummy bs=1M count=3277`), run only
# when asked (--only "seed 004").
SEED_DD = ("seed 004 dd (3.2 GiB)", "DD if=/dev/zero of=out bs=1M count=3277", ["out"], True)
LOADS = ("none", "busy4", "busy8", "writer")
MODES = ("policy", "policy-limited", "policy-nice", "run", "run-limited")


def prepare(a):
    d = a.dir
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    make_file(os.path.join(d, "in"), SIZE)
    subprocess.run(["go", "build", "-o", os.path.join(d, "gocopy"), GOCOPY_SRC],
                   check=True, env={**os.environ, "CGO_ENABLED": "0"})
    # A static dd for `ubio run` (the shim cannot enter it): busybox's.
    bb = shutil.which("busybox")
    if not bb:
        raise SystemExit("no busybox (Debian's busybox-static): the static dd")
    shutil.copy(bb, os.path.join(d, "busybox"))
    # The second writer's filesystem: xfs in an image on a loop device.
    img = os.path.join(d, "other.img")
    if not os.path.exists(img):
        with open(img, "wb") as f:
            f.truncate(6 << 30)
        subprocess.run(["mkfs.xfs", "-q", "-f", img], check=True)


class Load:
    """What runs beside the programs during a round."""

    def __init__(self, a, load):
        self.procs, self.loop, self.mnt = [], None, None
        if load.startswith("busy"):
            for _ in range(int(load[4:])):
                self.procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"],
                                                   start_new_session=True))
        elif load == "writer":
            self.mnt = os.path.join(a.dir, "other")
            os.makedirs(self.mnt, exist_ok=True)
            self.loop = subprocess.run(["losetup", "--find", "--show", "--direct-io=on",
                                        os.path.join(a.dir, "other.img")],
                                       check=True, capture_output=True, text=True).stdout.strip()
            subprocess.run(["mount", self.loop, self.mnt], check=True)
            self.procs.append(subprocess.Popen(
                ["sh", "-c", f"while :; do dd if=/dev/zero of={self.mnt}/w bs=1M count=4096 "
                             f"status=none; rm -f {self.mnt}/w; done"], start_new_session=True))

    def close(self):
        # Each load is a process group of its own: kill all of it. The
        # writer's dd, killed in the middle of a write, can take a while to
        # exit and keeps the mount busy until then: unmount again until it
        # goes (a mount left behind made the next writer round fail).
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        if self.mnt:
            t = time.monotonic()
            while subprocess.run(["umount", self.mnt], stderr=subprocess.DEVNULL).returncode:
                if time.monotonic() - t > 60:
                    subprocess.run(["umount", self.mnt])  # says why
                    break
                time.sleep(0.1)
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop])


class Peaks:
    """cachestat() of the input and the outputs every 2 ms, in a thread."""

    def __init__(self, inp, outs):
        self.inp, self.outs = inp, outs
        self.input_cache = self.out_cache = self.out_dirty_wb = 0
        # At the outputs' cache peak: how much of it was dirty + writeback
        # (the rest was clean: written back, not dropped yet).
        self.out_dirty_wb_at_peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            c = cachestat(self.inp)
            if c:
                self.input_cache = max(self.input_cache, c.cache)
            cache = dwb = 0
            for o in self.outs:
                c = cachestat(o)
                if c:
                    cache += c.cache
                    dwb += c.dirty + c.writeback
            if cache > self.out_cache:
                self.out_cache, self.out_dirty_wb_at_peak = cache, dwb
            self.out_dirty_wb = max(self.out_dirty_wb, dwb)
            self._stop.wait(0.002)

    def stop(self):
        self._stop.set()
        self._t.join()


def run_one(a, name, cmd, outs, mode, daemon):
    d = a.dir
    inp = os.path.join(d, "in")
    outs = [os.path.join(d, o) for o in outs]
    rm(*outs)
    subprocess.run([a.ubio, "evict", "--sync", inp], check=True, stdout=subprocess.DEVNULL)
    dd = "./busybox dd" if mode.startswith("run") else "dd"
    cmd = cmd.replace("DD ", dd + " ")
    policy = mode.startswith("policy")
    cg = Cgroup("ubio-bounds") if policy else None
    limit = ["--device-dirty-limit", a.device_limit] if mode == "run-limited" else []
    argv = ["sh", "-c", cmd] if policy else [a.ubio, "run", *limit, "--", "sh", "-c", cmd]
    try:
        peaks = Peaks(inp, outs)
        t = time.monotonic()
        p = subprocess.Popen(argv, cwd=d, stdout=subprocess.DEVNULL,
                             preexec_fn=cg.join if cg else None)
        rc = p.wait()
        secs = time.monotonic() - t
        if daemon:
            st = daemon.wait_idle()
        peaks.stop()
        left = [(cachestat(f).cache if cachestat(f) else 0) * PAGE for f in [inp] + outs]
    finally:
        if cg:
            cg.close()
    r = {"program": name, "mode": mode, "rc": rc, "secs": secs,
         "input_peak": peaks.input_cache * PAGE, "outputs_peak": peaks.out_cache * PAGE,
         "outputs_dirty_wb_at_peak": peaks.out_dirty_wb_at_peak * PAGE,
         "outputs_dirty_wb_peak": peaks.out_dirty_wb * PAGE, "left": left}
    r["within"] = (rc == 0 and r["input_peak"] <= BOUND and r["outputs_peak"] <= BOUND
                   and r["outputs_dirty_wb_peak"] <= BOUND and sum(left) == 0)
    if daemon:
        r["lateness"] = st["lateness"]
    rm(*outs)
    return r


def round_(a):
    progs = [p for p in PROGRAMS + [SEED_DD] if (a.only or p is not SEED_DD) and (not a.only or a.only in p[0])]
    if a.mode.startswith("run"):
        progs = [p for p in progs if p[3]]
    random.shuffle(progs)
    load = Load(a, a.load)
    daemon = None
    try:
        if a.mode.startswith("policy"):
            base = Cgroup("ubio-bounds-scope")
            # The scope takes every cgroup of the runs: siblings named so.
            pattern = base.pattern().rsplit("/", 1)[0] + "/ubio-bounds-*"
            base.close()
            lines = {"policy-limited": f'device_dirty_limit = "{a.device_limit}"',
                     "policy-nice": "realtime = false"}.get(a.mode, "")
            daemon = Daemon(a, pattern, daemon_lines=lines)
        out = open(a.jsonl, "a")
        for name, cmd, outs, _ in progs:
            r = run_one(a, name, cmd, outs, a.mode, daemon)
            r["load"] = a.load
            if a.mode.endswith("-limited"):
                r["device_limit"] = a.device_limit
            out.write(json.dumps(r) + "\n")
            out.flush()
            print(f"{a.load:6} {a.mode:6} {name:28} {r['secs']:5.1f} s  input {r['input_peak'] / MiB:5.1f}  "
                  f"outputs {r['outputs_peak'] / MiB:5.1f} (dirty+wb there {r['outputs_dirty_wb_at_peak'] / MiB:5.1f})  "
                  f"dirty+wb {r['outputs_dirty_wb_peak'] / MiB:5.1f} MiB"
                  f"  left {sum(r['left'])}  {'ok' if r['within'] else 'BEYOND'}", flush=True)
        if daemon:
            cpu, st = daemon.stop()
            out.write(json.dumps({"daemon": True, "load": a.load, "mode": a.mode, "cpu_s": cpu,
                                  "lateness": st["lateness"],
                                  "managed_bytes": sum(o["finished"]["bytes_read"] + o["finished"]["bytes_written"]
                                                       for o in st["owners"])}) + "\n")
    finally:
        load.close()


def summary(a):
    runs = [json.loads(line) for line in open(a.jsonl)]
    progs = [r for r in runs if "program" in r]
    limits = sorted({r["device_limit"] for r in progs if "device_limit" in r})
    if limits:
        print(f"Device dirty limit of the -limited modes: {', '.join(limits)}.")
        print()
    print("| load | mode | program | runs | within the bounds | input peak MiB (median / max) | "
          "outputs' dirty+wb MiB (median / max) | left B (max) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    keys = sorted({(r["load"], r["mode"], r["program"]) for r in progs},
                  key=lambda k: (LOADS.index(k[0]), k[1], k[2]))
    for load, mode, prog in keys:
        rs = [r for r in progs if (r["load"], r["mode"], r["program"]) == (load, mode, prog)]
        ip = [r["input_peak"] / MiB for r in rs]
        dw = [r["outputs_dirty_wb_peak"] / MiB for r in rs]
        print(f"| {load} | {mode} | {prog} | {len(rs)} | {sum(r['within'] for r in rs)} | "
              f"{statistics.median(ip):.1f} / {max(ip):.1f} | {statistics.median(dw):.1f} / {max(dw):.1f} | "
              f"{max(sum(r['left']) for r in rs)} |")
    # Per (load, mode), the policy test's programs together (seed 004's dd
    # apart: it runs only at no load, and its own table follows).
    print()
    print("| load | mode | program runs | within the bounds | worst input cache MiB | "
          "worst outputs' cache MiB | worst outputs' dirty+wb MiB | left B (max) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    test = [r for r in progs if r["program"] != SEED_DD[0]]
    for load, mode in [(l, m) for l in LOADS for m in MODES]:
        rs = [r for r in test if r["load"] == load and r["mode"] == mode]
        if not rs:
            continue
        print(f"| {load} | {mode} | {len(rs)} | {sum(r['within'] for r in rs)} | "
              f"{max(r['input_peak'] for r in rs) / MiB:.1f} | {max(r['outputs_peak'] for r in rs) / MiB:.1f} | "
              f"{max(r['outputs_dirty_wb_peak'] for r in rs) / MiB:.1f} | {max(sum(r['left']) for r in rs)} |")
    seed = [r for r in progs if r["program"] == SEED_DD[0]]
    if seed:
        print()
        print("| seed 004's dd, mode | runs | within the bounds | dirty+wb peak per run MiB (in run order) | "
              "outputs' cache peak per run MiB |")
        print("| --- | --- | --- | --- | --- |")
        for mode in MODES:
            rs = [r for r in seed if r["mode"] == mode]
            if rs:
                dwb = ", ".join(f"{r['outputs_dirty_wb_peak'] / MiB:.0f}" for r in rs)
                cache = ", ".join(f"{r['outputs_peak'] / MiB:.0f}" for r in rs)
                print(f"| {mode} | {len(rs)} | {sum(r['within'] for r in rs)} | {dwb} | {cache} |")
    failed = [r for r in runs if r.get("round_failed")]
    if failed:
        print()
        print(f"Rounds that failed (the run went on): {len(failed)}")
        for r in failed:
            print(f"- {r['load']} {r['mode']} {r.get('args', '')}: exit {r['rc']}")
    for r in runs:
        if r.get("rounds_skipped"):
            print()
            print(f"Rounds not started (STOP_AT {r['stop_at']}): {r['rounds_skipped']}")
    daemons = [r for r in runs if r.get("daemon")]
    if daemons:
        print()
        print("| load | mode | daemon runs | looks due | late p50 / p99 / worst ms | daemon CPU s per GiB managed |")
        print("| --- | --- | --- | --- | --- | --- |")
        for load, mode in [(l, m) for l in LOADS for m in MODES]:
            ds = [r for r in daemons if r["load"] == load and r.get("mode", "policy") == mode]
            if not ds:
                continue
            count = sum(r["lateness"]["count"] for r in ds)
            # A round whose looks all came before their due time has no buckets.
            width = max(len(r["lateness"]["buckets"]) for r in ds)
            buckets = [sum(r["lateness"]["buckets"][i] for r in ds if i < len(r["lateness"]["buckets"])) for i in range(width)]
            bounds = [0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]

            def q(f):
                want = f * count
                return next((b * 1e3 for b, n in zip(bounds, buckets) if n >= want), float("inf"))
            worst = max(r["lateness"]["max_s"] for r in ds) * 1e3
            gib = sum(r["managed_bytes"] for r in ds) / (1 << 30)
            cpu = sum(r["cpu_s"] for r in ds)
            print(f"| {load} | {mode} | {len(ds)} | {count} | {min(q(0.5), worst):.1f} / {min(q(0.99), worst):.1f} / {worst:.1f} | "
                  f"{cpu / gib if gib else 0:.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "round"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True)
        p.add_argument("--ubio", required=True)
        if name == "round":
            p.add_argument("--jsonl", required=True)
            p.add_argument("--load", choices=LOADS, default="none")
            p.add_argument("--mode", choices=MODES, default="policy")
            p.add_argument("--only", default="")
            p.add_argument("--device-limit", default="64M",
                           help="the device dirty limit of the -limited modes")
    s = sub.add_parser("summary")
    s.add_argument("--jsonl", required=True)
    a = ap.parse_args()
    {"prepare": prepare, "round": round_, "summary": summary}[a.cmd](a)


if __name__ == "__main__":
    main()
