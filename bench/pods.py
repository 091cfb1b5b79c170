#!/usr/bin/env python3
"""Two "pods" on cgroup v2, as the kubelet sees them (issue 36): pod A (a
cgroup with memory.max 1 GiB) whose own process re-reads a 256 MiB hot file
copies 4 GiB with GNU cp; pod B, its neighbour (memory.max 1 GiB), re-reads
its own hot file. Without the policy daemon, with it (its scope pod A), and
with a page-cache budget of 512 MiB on pod A; with MGLRU on and off where
the kernel has it (/sys/kernel/mm/lru_gen/enabled). Each configuration once
per round, the rounds' orders random.

Per second, for both pods: memory.current, memory.stat file and
inactive_file, the working set as cAdvisor computes it (memory.current -
inactive_file, what the kubelet evicts by), memory.events (high, max,
oom_kill); both hot readers' rates (their read bytes, /proc/PID/io rchar);
the copy's progress. One JSON line per sample and per run's summary on
stdout (`sample` and `run` records).

    pods.py --dir /work --rounds 2 [--size-gib 4] [--ubio /usr/bin/ubio] [--cp /opt/gnu/bin/cp]

Runs as root on a cgroup v2 machine whose root cgroup enables the memory
controller for children (scripts/guest/init.sh does): the QEMU guest of
bench/runs/2026-12-06-pods/run.sh, where it is the only file of bench/ (so it
imports nothing from policy.py, whose Cgroup is v1's and below this
process's own).
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

MiB = 1 << 20
GiB = 1 << 30
CG = "/sys/fs/cgroup"
LRU_GEN = "/sys/kernel/mm/lru_gen/enabled"
HOT_READER = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
while True:
    off = 0
    while off < size:
        off += len(os.pread(fd, 1 << 20, off))
"""


def emit(kind, **rec):
    print(json.dumps({"kind": kind, **rec}), flush=True)


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def read_pairs(path):
    with open(path) as f:
        return {k: int(v) for k, v in (line.split() for line in f if len(line.split()) == 2)}


class Pod:
    """A cgroup of the root's, removed by close()."""

    def __init__(self, name, max_bytes):
        self.name = name
        self.dir = os.path.join(CG, name)
        os.makedirs(self.dir, exist_ok=True)
        write(os.path.join(self.dir, "memory.max"), str(max_bytes))

    def join(self):
        write(os.path.join(self.dir, "cgroup.procs"), str(os.getpid()))

    def figures(self):
        st = read_pairs(os.path.join(self.dir, "memory.stat"))
        ev = read_pairs(os.path.join(self.dir, "memory.events"))
        cur = int(open(os.path.join(self.dir, "memory.current")).read())
        return {"current": cur, "file": st.get("file", 0), "inactive_file": st.get("inactive_file", 0),
                "working_set": cur - st.get("inactive_file", 0), "events_high": ev.get("high", 0),
                "events_max": ev.get("max", 0), "oom_kill": ev.get("oom_kill", 0)}

    def close(self):
        for _ in range(100):
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                time.sleep(0.05)


def rchar(pid):
    try:
        for line in open(f"/proc/{pid}/io"):
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    block = os.urandom(MiB)
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(block)
        os.fsync(f.fileno())


def drop_caches():
    subprocess.run(["sync"])
    write("/proc/sys/vm/drop_caches", "3")


def run(a, config, mglru):
    d = a.dir
    if mglru is not None:
        write(LRU_GEN, "y" if mglru else "n")
    for f in ("dst",):
        try:
            os.unlink(os.path.join(d, f))
        except FileNotFoundError:
            pass
    drop_caches()
    pod_a, pod_b = Pod("pod-a", GiB), Pod("pod-b", GiB)
    procs, daemon = [], None
    try:
        if config != "off":
            budget = 'budget = "512M"\n' if config == "budget" else ""
            cfg = os.path.join(d, "policy.toml")
            write(cfg, f'[daemon]\nsocket = "{d}/run/policy.sock"\n[[scope]]\nname = "pod-a"\n'
                       f'cgroups = ["/pod-a"]\n{budget}')
            os.chmod(cfg, 0o644)
            os.makedirs(os.path.join(d, "run"), exist_ok=True)
            daemon = subprocess.Popen([a.ubio, "policy", "run", "--config", cfg],
                                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "daemon.log"), "w"))
            time.sleep(1)
        # The hot readers: warm, then measured.
        readers = {}
        for pod, hot in ((pod_a, "hot-a"), (pod_b, "hot-b")):
            p = subprocess.Popen([sys.executable, "-c", HOT_READER, os.path.join(d, hot)],
                                 preexec_fn=pod.join)
            procs.append(p)
            readers[pod.name] = p
        time.sleep(a.warm)
        cp = subprocess.Popen([a.cp, os.path.join(d, "src"), os.path.join(d, "dst")], preexec_fn=pod_a.join)
        procs.append(cp)
        t0 = time.monotonic()
        last = {n: rchar(p.pid) for n, p in readers.items()}
        tlast = t0
        series = []
        copy_s = None
        while True:
            time.sleep(1)
            now = time.monotonic()
            rates = {}
            for n, p in readers.items():
                r = rchar(p.pid)
                rates[n] = (r - last[n]) / MiB / (now - tlast)
                last[n] = r
            tlast = now
            copied = os.path.getsize(os.path.join(d, "dst")) if os.path.exists(os.path.join(d, "dst")) else 0
            s = {"config": config, "mglru": mglru, "round": a.round_no, "t": round(now - t0, 2),
                 "copied": copied, "a": pod_a.figures(), "b": pod_b.figures(),
                 "hot_a_MBps": round(rates["pod-a"], 1), "hot_b_MBps": round(rates["pod-b"], 1)}
            series.append(s)
            emit("sample", **s)
            if copy_s is None and cp.poll() is not None:
                copy_s = now - t0
                # A few seconds after the copy: how the pods settle.
                end = now + a.after
            if copy_s is not None and now >= end:
                break
        during = [s for s in series if s["t"] <= copy_s]
        emit("run", config=config, mglru=mglru, round=a.round_no, copy_s=round(copy_s, 1),
             copy_MBps=round(a.size_gib * GiB / MiB / copy_s, 1),
             peak_a_file=max(s["a"]["file"] for s in during),
             peak_a_working_set=max(s["a"]["working_set"] for s in during),
             peak_a_current=max(s["a"]["current"] for s in during),
             a_events_max=series[-1]["a"]["events_max"], a_oom_kill=series[-1]["a"]["oom_kill"],
             hot_a_min_MBps=min(s["hot_a_MBps"] for s in during),
             hot_a_median_MBps=sorted(s["hot_a_MBps"] for s in during)[len(during) // 2],
             hot_b_min_MBps=min(s["hot_b_MBps"] for s in during),
             hot_b_median_MBps=sorted(s["hot_b_MBps"] for s in during)[len(during) // 2])
    finally:
        for p in procs:
            p.kill()
            p.wait()
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait()
        pod_a.close()
        pod_b.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size-gib", type=int, default=4)
    ap.add_argument("--ubio", default="/usr/bin/ubio")
    ap.add_argument("--cp", default="/opt/gnu/bin/cp")
    ap.add_argument("--warm", type=float, default=5.0, help="seconds the hot readers run before the copy")
    ap.add_argument("--after", type=float, default=5.0, help="seconds measured after the copy")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    make_file(os.path.join(a.dir, "src"), a.size_gib * GiB)
    for hot in ("hot-a", "hot-b"):
        make_file(os.path.join(a.dir, hot), 256 * MiB)
    mglrus = [True, False] if os.path.exists(LRU_GEN) else [None]
    mem = dict(line.split(":", 1) for line in open("/proc/meminfo"))
    emit("machine", kernel=os.uname().release, mglru_knob=os.path.exists(LRU_GEN),
         mem_total_kib=int(mem["MemTotal"].split()[0]))
    for r in range(a.rounds):
        a.round_no = r
        plan = [(c, m) for c in ("off", "daemon", "budget") for m in mglrus]
        random.shuffle(plan)
        for config, mglru in plan:
            run(a, config, mglru)


if __name__ == "__main__":
    main()
