#!/usr/bin/env python3
"""`ubio policy` measured: the daemon off and on, each round in a new random order.

    bench/policy.py prepare --dir D --ubio PATH [--scale S]
    bench/policy.py round   --dir D --ubio PATH [--bench PATH] --jsonl runs.jsonl --exp EXP [--scale S]
    bench/policy.py summary --jsonl runs.jsonl

Experiments (EXP), each run in modes `off` (no daemon) and `on` (a daemon
whose scope is the workload's cgroup; the cost experiment has more modes):

container  a memory cgroup limited to 512 MiB copies 4 GiB with cp (then
           `sync` the copy: durability) and reads the copy with cat: the
           cgroup's peak memory (max_usage_in_bytes / memory.peak), its page
           cache sampled every 50 ms, the times it hit its limit and its OOM
           kills, the copy's speed to durability and the read's speed.
operator   a backup in scope (`tar cf` of an 8 GiB tree) beside a process out
           of scope re-reading a hot 256 MiB file (ubio's victim worker),
           under global pressure (the harness's balloon: locked memory that
           leaves 2 GiB available to the machine): the hot reader's median
           and worst second as % of its speed alone (measured each round
           under the same balloon), kswapd's CPU and pages scanned per
           second, the backup's speed (tar, then sync of the archive).
dd         seed 004's demo with no prefix: `dd if=/dev/zero bs=1M` of
           3.2 GiB in scope, then `sync`: the peak of Dirty in /proc/meminfo
           (every 50 ms) during dd, Dirty when dd ends, dd's time and sync's.
cost       a 4 KiB read loop (1 GiB, cold) and a 4 KiB write loop (1 GiB,
           then fsync), a static program (no shim can enter it) on the
           marked filesystem: with no daemon (`none`), with the daemon and
           the loop out of scope (`out`), in scope (`in`), and under
           `ubio run` (`run`: its engine); wall time, the loop's CPU, the
           daemon's (or ubio run's) own CPU, events.

Cgroups are made below this process's memory cgroup and removed after each
run; the daemon is started for each `on` run with a configuration naming
that cgroup and stopped (SIGTERM) after it, its CPU read from /proc first.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_programs import cached_pages, proc_cpu, machine_busy_s  # noqa: E402
import reclaim_probe  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
HERE = os.path.dirname(os.path.abspath(__file__))
EXPS = ("container", "operator", "dd", "cost")
MODES = {"container": ("off", "on"), "operator": ("off", "on"), "dd": ("off", "on"),
         "cost": ("none", "out", "in", "run")}
# The operator's modes that --operator-modes may add: the daemon at nice 0
# instead of its own -10 (does its writeback and page freeing, done at -10,
# slow the hot reader? issue 28).
OPERATOR_EXTRA = {"on-nice0": 0}


# ---------------------------------------------------------------- cgroups

def own_memory_cgroup():
    """(directory, path as /proc/PID/cgroup shows it, v1?) of our memory cgroup."""
    lines = open("/proc/self/cgroup").read().splitlines()
    for line in lines:
        _, ctl, path = line.split(":", 2)
        if "memory" in ctl.split(","):
            return os.path.join("/sys/fs/cgroup/memory", path.lstrip("/")), path, True
    for line in lines:
        if line.startswith("0::"):
            path = line[3:]
            return os.path.join("/sys/fs/cgroup", path.lstrip("/")), path, False
    raise SystemExit("no memory cgroup")


class Cgroup:
    """A memory cgroup below ours, removed by close() (processes in it are
    ours and have exited by then)."""

    def __init__(self, name, limit=None):
        base, path, self.v1 = own_memory_cgroup()
        leaf = f"{name}-{os.getpid()}-{time.monotonic_ns() % 1000000}"
        self.dir = os.path.join(base, leaf)
        self.path = path.rstrip("/") + "/" + leaf
        os.mkdir(self.dir)
        if limit:
            self.write("memory.limit_in_bytes" if self.v1 else "memory.max", str(limit))

    def pattern(self):
        return ("memory:" if self.v1 else "") + self.path

    def write(self, f, v):
        with open(os.path.join(self.dir, f), "w") as fh:
            fh.write(v)

    def read(self, f):
        with open(os.path.join(self.dir, f)) as fh:
            return fh.read()

    def usage(self):
        return int(self.read("memory.usage_in_bytes" if self.v1 else "memory.current"))

    def peak(self):
        return int(self.read("memory.max_usage_in_bytes" if self.v1 else "memory.peak"))

    def cache(self):
        key = "cache" if self.v1 else "file"
        for line in self.read("memory.stat").splitlines():
            k, v = line.split()
            if k == key:
                return int(v)
        return 0

    def limit_events(self):
        """(times the limit was hit, OOM kills)."""
        if self.v1:
            oom = dict(line.split() for line in self.read("memory.oom_control").splitlines())
            return int(self.read("memory.failcnt")), int(oom.get("oom_kill", 0))
        ev = dict(line.split() for line in self.read("memory.events").splitlines())
        return int(ev.get("max", 0)), int(ev.get("oom_kill", 0))

    def join(self):
        """For preexec_fn: move the calling (child) process in."""
        with open(os.path.join(self.dir, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))

    def close(self):
        for _ in range(100):
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                time.sleep(0.05)
        print(f"warning: could not remove cgroup {self.dir}", file=sys.stderr)


# ---------------------------------------------------------------- the daemon

class Daemon:
    """`ubio policy run` with one scope: `pattern`."""

    def __init__(self, a, pattern, nice=None, daemon_lines=""):
        os.makedirs(os.path.join(a.dir, "run"), exist_ok=True)
        os.chmod(a.dir, 0o755)
        self.sock = os.path.join(a.dir, "run", "policy.sock")
        self.cfg = os.path.join(a.dir, "policy.toml")
        with open(self.cfg, "w") as f:
            f.write(f'[daemon]\nsocket = "{self.sock}"\n{daemon_lines}\n[[scope]]\nname = "bench"\n'
                    f'cgroups = ["{pattern}"]\n')
        os.chmod(self.cfg, 0o644)
        self.ubio = a.ubio
        self.log = open(os.path.join(a.dir, "daemon.log"), "a")
        self.p = subprocess.Popen([a.ubio, "policy", "run", "--config", self.cfg],
                                  stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        t = time.monotonic()
        while self.status() is None:
            if self.p.poll() is not None or time.monotonic() - t > 20:
                raise SystemExit(f"the daemon did not start: see {self.log.name}")
            time.sleep(0.02)
        if nice is not None:
            # Every thread (setpriority is per thread); threads it starts
            # later inherit the looking thread's.
            for tid in os.listdir(f"/proc/{self.p.pid}/task"):
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        self.cpu0 = proc_cpu(self.p.pid)

    def status(self):
        r = subprocess.run([self.ubio, "policy", "status", "--json", "--socket", self.sock],
                           capture_output=True)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def wait_idle(self, timeout=120):
        """Until it manages no file (it finished what the run left)."""
        t = time.monotonic()
        while time.monotonic() - t < timeout:
            s = self.status()
            if s is not None and not s["files"]:
                return s
            time.sleep(0.05)
        raise SystemExit("the daemon still manages files after the run")

    def stop(self):
        """SIGTERM; its CPU during the run (seconds) and its last status."""
        s = self.wait_idle()
        cpu = proc_cpu(self.p.pid) - self.cpu0
        self.p.send_signal(signal.SIGTERM)
        self.p.wait()
        self.log.close()
        return cpu, s


def managed_bytes(st):
    return sum(o["finished"]["bytes_read"] + o["finished"]["bytes_written"] for o in st["owners"])


# ---------------------------------------------------------------- helpers

class Sampler:
    """Calls `f()` every `every` seconds in a thread; keeps the values."""

    def __init__(self, f, every):
        self.values, self._stop = [], threading.Event()
        self._t = threading.Thread(target=self._run, args=(f, every))
        self._t.start()

    def _run(self, f, every):
        while not self._stop.is_set():
            self.values.append((time.monotonic(), f()))
            self._stop.wait(every)

    def stop(self):
        self._stop.set()
        self._t.join()
        return self.values


def meminfo(key):
    for line in open("/proc/meminfo"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def vmstat():
    return {k: int(v) for k, v in (line.split() for line in open("/proc/vmstat"))}


def kswapd_cpu():
    total = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if open(f"/proc/{pid}/comm").read().startswith("kswapd"):
                    total += proc_cpu(pid)
            except OSError:
                pass
    return total


def run(argv, cwd, cg=None):
    """Run `argv` (in cgroup `cg`); (seconds, user+sys CPU of its tree)."""
    t = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL,
                         preexec_fn=cg.join if cg else None)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed ({status})")
    return time.monotonic() - t, ru.ru_utime + ru.ru_stime


def warm(path, tries=5):
    """Read `path` until it is all cached (at most `tries` times); the
    fraction cached then."""
    size = os.path.getsize(path)
    for _ in range(tries):
        with open(path, "rb") as f:
            while f.read(MiB):
                pass
        if cached_pages(path) * PAGE >= size:
            break
    return cached_pages(path) * PAGE / size


def evict(a, *paths):
    subprocess.run([a.ubio, "evict", "-r", "--sync", *paths], check=True, stdout=subprocess.DEVNULL)


def rm(*paths):
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def sized(a, n):
    return int(n * a.scale)


# ---------------------------------------------------------------- prepare

def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    with open(path, "wb") as f:
        block = os.urandom(MiB)
        for _ in range(size // MiB):
            f.write(block)
        os.fsync(f.fileno())


def prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    d = a.dir
    make_file(os.path.join(d, "src"), sized(a, 4 * GiB))
    make_file(os.path.join(d, "hot"), 256 * MiB)
    tree = os.path.join(d, "tree")
    os.makedirs(tree, exist_ok=True)
    # 8 GiB: 30 files of 256 MiB and 512 of 1 MiB.
    for i in range(30):
        make_file(os.path.join(tree, f"big{i:02}"), sized(a, 256 * MiB))
    small = os.path.join(tree, "small")
    os.makedirs(small, exist_ok=True)
    for i in range(512):
        make_file(os.path.join(small, f"f{i:03}"), max(MiB, sized(a, MiB)))
    make_file(os.path.join(d, "loopfile"), sized(a, GiB))
    subprocess.run(["musl-gcc", "-static", "-O2", "-o", os.path.join(d, "loop4k"),
                    os.path.join(HERE, "policy_loop4k.c")], check=True)
    subprocess.run(["sync"], check=True)


# ---------------------------------------------------------------- experiments

def container(a, mode):
    d = a.dir
    src, dst = os.path.join(d, "src"), os.path.join(d, "dst")
    rm(dst)
    evict(a, src)
    cg = Cgroup("ubio-policy-bench", limit=512 * MiB)
    try:
        dm = Daemon(a, cg.pattern()) if mode == "on" else None
        s = Sampler(lambda: (cg.usage(), cg.cache()), 0.05)
        t_copy, cpu_copy = run(["sh", "-c", "cp src dst && sync dst"], d, cg)
        t_read, cpu_read = run(["sh", "-c", "cat dst > /dev/null"], d, cg)
        samples = s.stop()
        hits, ooms = cg.limit_events()
        r = {"copy_s": t_copy, "copy_MBps": os.path.getsize(src) / 1e6 / t_copy,
             "read_s": t_read, "read_MBps": os.path.getsize(dst) / 1e6 / t_read,
             "cpu_s": cpu_copy + cpu_read,
             "peak_bytes": cg.peak(), "limit_bytes": 512 * MiB,
             "cache_peak_bytes": max(c for _, (u, c) in samples),
             "usage_sampled_peak_bytes": max(u for _, (u, c) in samples),
             "limit_hits": hits, "oom_kills": ooms}
        if dm:
            r["daemon_cpu_s"], st = dm.stop()
            r["managed_bytes"] = managed_bytes(st)
        r["cache_after_bytes"] = cg.cache()
        return r
    finally:
        cg.close()
        rm(dst)


def start_balloon(a, leave):
    avail = meminfo("MemAvailable")
    take = avail - leave
    if take < GiB:
        raise SystemExit(f"not enough memory for the balloon ({avail >> 20} MiB available)")
    p = subprocess.Popen([a.bench, "__worker", "balloon", str(take), str(GiB)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        p.kill()
        raise SystemExit(f"balloon: {line.strip()}")
    return p, take


class Victim:
    """ubio's victim worker re-reading the hot file: reads per second."""

    def __init__(self, a, hot):
        self.p = subprocess.Popen([a.bench, "__worker", "victim", "--tick-ms", "1000", hot],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ticks, self.ready = [], threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(60):
            raise SystemExit("the victim did not get ready")

    def _read(self):
        for line in self.p.stdout:
            ev = json.loads(line)
            if ev["event"] == "ready":
                self.ready.set()
            elif ev["event"] == "tick":
                self.ticks.append((ev["t0"], ev["t1"], ev["reads"]))

    def per_second(self, t0, t1):
        """Reads/s of the ticks wholly inside [t0, t1] (monotonic seconds)."""
        return [r / (b - e0) for e0, b, r in self.ticks if e0 >= t0 and b <= t1 and b > e0]

    def stop(self):
        self.p.stdin.close()
        self.p.wait()


def operator_round(a, modes):
    """Both modes under one balloon (inflating it takes long), each mode's
    run in the given order; the victim alone first, as the reference."""
    d = a.dir
    hot = os.path.join(d, "hot")
    balloon, took = start_balloon(a, 2 * GiB)
    out = []
    try:
        victim = Victim(a, hot)
        time.sleep(1)
        t0 = time.monotonic()
        time.sleep(6)
        alone = statistics.median(victim.per_second(t0, time.monotonic()))
        for mode in modes:
            rm(os.path.join(d, "backup.tar"))
            evict(a, os.path.join(d, "tree"))
            # The hot file whole in the cache again: a run that ended with
            # it evicted left the next mode's reader on the disk (0.2-1% of
            # its rate alone, in off and on runs alike, for two runs).
            hot_start = warm(hot)
            cg = Cgroup("ubio-policy-bench")
            try:
                dm = (Daemon(a, cg.pattern(), OPERATOR_EXTRA.get(mode))
                      if mode != "off" else None)
                probe = None
                if a.probe:
                    probe = reclaim_probe.Probe("ubio-policy-probe", hot)
                    probe.daemon_pid = dm.p.pid if dm else None
                vm0, k0, busy0 = vmstat(), kswapd_cpu(), machine_busy_s()
                t_start = time.monotonic()
                try:
                    t_tar, cpu = run(["sh", "-c", "tar cf backup.tar tree && sync backup.tar"], d, cg)
                finally:
                    t_end = time.monotonic()
                    if probe:
                        stamp = time.strftime("%H%M%S", time.gmtime())
                        found = probe.stop(os.path.join(a.probe, f"{stamp}-{mode}"))
                vm1, k1 = vmstat(), kswapd_cpu()
                rates = victim.per_second(t_start, t_end)
                hot_end = cached_pages(hot) * PAGE / os.path.getsize(hot)
                size = sum(os.path.getsize(os.path.join(r, f))
                           for r, _, fs in os.walk(os.path.join(d, "tree")) for f in fs)
                if dm:
                    dm.wait_idle()
                tree_files = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(d, "tree")) for f in fs]
                left = {"tree_left_bytes": sum(cached_pages(f) for f in tree_files) * PAGE,
                        "tree_small_left_bytes": sum(cached_pages(f) for f in tree_files if "/small/" in f) * PAGE,
                        "archive_left_bytes": cached_pages(os.path.join(d, "backup.tar")) * PAGE}
                r = {"mode": mode, "tar_s": t_tar, "tar_MBps": size / 1e6 / t_tar, "cpu_s": cpu,
                     "victim_alone_rps": alone,
                     "victim_median_pct": 100 * statistics.median(rates) / alone if rates else None,
                     "victim_worst_pct": 100 * min(rates) / alone if rates else None,
                     "hot_cached_start_pct": 100 * hot_start, "hot_cached_end_pct": 100 * hot_end,
                     "kswapd_cpu_pct": 100 * (k1 - k0) / t_tar,
                     "pgscan_kswapd_per_s": (vm1.get("pgscan_kswapd", 0) - vm0.get("pgscan_kswapd", 0)) / t_tar,
                     "pgsteal_kswapd_per_s": (vm1.get("pgsteal_kswapd", 0) - vm0.get("pgsteal_kswapd", 0)) / t_tar,
                     "pgscan_direct_per_s": (vm1.get("pgscan_direct", 0) - vm0.get("pgscan_direct", 0)) / t_tar,
                     "machine_cpu_s": machine_busy_s() - busy0,
                     "balloon_bytes": took, "dataset_bytes": size, **left}
                if probe:
                    r["probe"] = found
                    r["probe_files"] = f"{stamp}-{mode}"
                if dm:
                    r["daemon_cpu_s"], st = dm.stop()
                    r["managed_bytes"] = managed_bytes(st)
                out.append(r)
            finally:
                cg.close()
        victim.stop()
    finally:
        balloon.stdin.close()
        balloon.wait()
        rm(os.path.join(d, "backup.tar"))
    return out


def dd(a, mode):
    d = a.dir
    out = os.path.join(d, "dummy")
    rm(out)
    subprocess.run(["sync"], check=True)
    cg = Cgroup("ubio-policy-bench")
    try:
        dm = Daemon(a, cg.pattern()) if mode == "on" else None
        s = Sampler(lambda: meminfo("Dirty"), 0.05)
        count = sized(a, 3277 * MiB) // MiB
        t_dd, cpu = run(["dd", "if=/dev/zero", "of=dummy", "bs=1M", f"count={count}", "status=none"], d, cg)
        dirty_end = meminfo("Dirty")
        samples = s.stop()
        t_sync, _ = run(["sync"], d)
        r = {"dd_s": t_dd, "dd_MBps": count * MiB / 1e6 / t_dd, "sync_s": t_sync,
             "total_s": t_dd + t_sync, "dirty_peak_bytes": max(v for _, v in samples),
             "dirty_end_bytes": dirty_end, "cpu_s": cpu}
        if dm:
            r["daemon_cpu_s"], st = dm.stop()
            r["managed_bytes"] = managed_bytes(st)
        return r
    finally:
        cg.close()
        rm(out)


def cost(a, mode, op):
    d = a.dir
    f = os.path.join(d, "loopfile" if op == "read" else "loopout")
    if op == "read":
        evict(a, f)
    else:
        rm(f)
    size = sized(a, GiB)
    argv = [os.path.join(d, "loop4k"), op, f] + ([str(size)] if op == "write" else [])
    cg = Cgroup("ubio-policy-bench")
    try:
        dm = Daemon(a, cg.pattern()) if mode in ("in", "out") else None
        ev0 = dm.status()["events"] if dm else 0
        if mode == "run":
            # ubio run's own CPU (its engine) from the zombie, before reaping.
            t = time.monotonic()
            p = subprocess.Popen([a.ubio, "run", "--", *argv], cwd=d, stdout=subprocess.DEVNULL)
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
            wall = time.monotonic() - t
            engine = proc_cpu(p.pid)
            _, status, ru = os.wait4(p.pid, 0)
            cpu = ru.ru_utime + ru.ru_stime - engine
        else:
            wall, cpu = run(argv, d, cg if mode == "in" else None)
            engine = None
        r = {"op": op, "wall_s": wall, "MBps": size / 1e6 / wall, "loop_cpu_s": cpu,
             "engine_cpu_s": engine, "bytes": size}
        if dm:
            r["daemon_cpu_s"], st = dm.stop()
            r["events"] = st["events"] - ev0
            r["managed_bytes"] = managed_bytes(st)
        r["left_bytes"] = cached_pages(f) * PAGE
        return r
    finally:
        cg.close()
        rm(os.path.join(d, "loopout"))


def round_(a):
    runs = []
    if a.exp == "operator":
        modes = (list(MODES["operator"]) + a.operator_modes) * a.repeat
        random.shuffle(modes)
        runs = operator_round(a, modes)
    else:
        pairs = [(m, op) for m in MODES[a.exp] for op in (("read", "write") if a.exp == "cost" else (None,))]
        random.shuffle(pairs)
        for mode, op in pairs:
            r = {"container": lambda: container(a, mode), "dd": lambda: dd(a, mode),
                 "cost": lambda: cost(a, mode, op)}[a.exp]()
            r["mode"] = mode
            runs.append(r)
    version = subprocess.run([a.ubio, "--version"], capture_output=True, text=True).stdout.strip()
    with open(a.jsonl, "a") as out:
        for r in runs:
            r["exp"] = a.exp
            r["ubio"] = version
            r["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            print(json.dumps(r), flush=True)
            out.write(json.dumps(r) + "\n")


# ---------------------------------------------------------------- summary

def med(xs, fmt="{:.0f}"):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return (fmt + " [" + fmt + "–" + fmt + "]").format(statistics.median(xs), min(xs), max(xs))


def summary(a):
    runs = [json.loads(line) for line in open(a.jsonl)]
    by = lambda exp, mode, **kw: [r for r in runs if r["exp"] == exp and r["mode"] == mode
                                  and all(r.get(k) == v for k, v in kw.items())]
    M = lambda b: b / MiB
    # Which binary made the runs (records from before this field: unknown).
    binaries = {}
    for r in runs:
        key = (r["exp"], r.get("ubio", "unknown"))
        binaries[key] = binaries.get(key, 0) + 1
    print("Runs per experiment and binary: " + "; ".join(
        f"{exp} {n} ({v})" for (exp, v), n in sorted(binaries.items())) + "\n")
    print("## container: 512 MiB memory cgroup, cp of 4 GiB (+ sync), then cat of the copy\n")
    print("| policy | runs | cgroup peak MiB | page cache peak MiB | limit hits | OOM kills "
          "| copy MB/s (to durability) | read MB/s | daemon CPU s/GB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in MODES["container"]:
        rs = by("container", m)
        if rs:
            print(f"| {m} | {len(rs)} | {med([M(r['peak_bytes']) for r in rs])} "
                  f"| {med([M(r['cache_peak_bytes']) for r in rs])} "
                  f"| {med([r['limit_hits'] for r in rs])} | {max(r['oom_kills'] for r in rs)} "
                  f"| {med([r['copy_MBps'] for r in rs])} | {med([r['read_MBps'] for r in rs])} "
                  f"| {med([r['daemon_cpu_s'] / (r['managed_bytes'] / 1e9) for r in rs if r.get('managed_bytes')], '{:.3f}')} |")
    print("\n## operator: tar of an 8 GiB tree in scope, a hot 256 MiB reader out of scope, "
          "2 GiB left to the machine\n")
    print("| policy | runs | hot reader median % of alone | worst second % | kswapd CPU % "
          "| kswapd pages scanned/s | direct scanned/s | tar MB/s (to durability) | daemon CPU s/GB "
          "| left cached: tree (of it small files) / archive MiB | hot file cached at start / end % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in list(MODES["operator"]) + list(OPERATOR_EXTRA):
        rs = by("operator", m)
        if rs:
            print(f"| {m} | {len(rs)} | {med([r['victim_median_pct'] for r in rs])} "
                  f"| {med([r['victim_worst_pct'] for r in rs])} "
                  f"| {med([r['kswapd_cpu_pct'] for r in rs], '{:.1f}')} "
                  f"| {med([r['pgscan_kswapd_per_s'] for r in rs])} "
                  f"| {med([r['pgscan_direct_per_s'] for r in rs])} "
                  f"| {med([r['tar_MBps'] for r in rs])} "
                  f"| {med([r['daemon_cpu_s'] / (r['managed_bytes'] / 1e9) for r in rs if r.get('managed_bytes')], '{:.3f}')} "
                  f"| {med([M(r['tree_left_bytes']) for r in rs])} ({med([M(r['tree_small_left_bytes']) for r in rs])}) "
                  f"/ {med([M(r['archive_left_bytes']) for r in rs])} "
                  f"| {med([r.get('hot_cached_start_pct') for r in rs])} / {med([r.get('hot_cached_end_pct') for r in rs])} |")
    probed = [r for r in runs if r["exp"] == "operator" and r.get("probe")]
    if probed:
        print("\n## operator, probed runs (--probe): the kernel's reclaim in each run\n")
        print("| run | policy | hot cached at end % | reader median % | kswapd wakes by order "
              "| kswapd reclaimed pages (deepest priority) | active pages deactivated "
              "| hot file pages removed, by | Normal zone: least free MiB, median free blocks of order >= 9 |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in probed:
            p = r["probe"]
            wakes = ", ".join(f"{o}: {n}" for o, n in sorted(p["kswapd_wake"].items(), key=lambda x: int(x[0]))) or "none"
            ks = {k: v for k, v in p["inactive_by_priority"].items() if k.startswith("kswapd")}
            deepest = min((int(k.split("=")[1]) for k in ks), default=None)
            removed = ", ".join(f"{c}: {n}" for c, n in sorted(p["hot_removed"].items(), key=lambda x: -x[1])) or "none"
            z = p["zones"].get("Normal", {})
            print(f"| {r['probe_files']} | {r['mode']} | {r['hot_cached_end_pct']:.0f} | {r['victim_median_pct']:.0f} "
                  f"| {wakes} | {sum(ks.values())} ({deepest if deepest is not None else '-'}) "
                  f"| {sum(p['deactivated_by_priority'].values())} | {removed} "
                  f"| {z.get('free_min', 0) * PAGE / MiB:.0f}, {z.get('order9_free_median', '-')} |")
    print("\n## dd: seed 004's demo, dd if=/dev/zero bs=1M of 3.2 GiB in scope, then sync\n")
    print("| policy | runs | Dirty peak MiB | Dirty at dd's end MiB | dd s | sync s | dd + sync s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for m in MODES["dd"]:
        rs = by("dd", m)
        if rs:
            print(f"| {m} | {len(rs)} | {med([M(r['dirty_peak_bytes']) for r in rs])} "
                  f"| {med([M(r['dirty_end_bytes']) for r in rs])} "
                  f"| {med([r['dd_s'] for r in rs], '{:.2f}')} | {med([r['sync_s'] for r in rs], '{:.2f}')} "
                  f"| {med([r['total_s'] for r in rs], '{:.2f}')} |")
    print("\n## cost: 4 KiB loops over 1 GiB (reads cold; writes then fsync), a static program\n")
    print("| loop | where | runs | MB/s | vs no daemon | loop CPU s | daemon / engine CPU s "
          "| that CPU per GB managed | events | left MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    names = {"none": "no daemon", "out": "daemon, loop out of scope", "in": "daemon, loop in scope",
             "run": "ubio run (its engine)"}
    for op in ("read", "write"):
        base = [r["MBps"] for r in by("cost", "none", op=op)]
        for m in MODES["cost"]:
            rs = by("cost", m, op=op)
            if not rs or not base:
                continue
            own = [r.get("daemon_cpu_s") if r.get("daemon_cpu_s") is not None else r.get("engine_cpu_s")
                   for r in rs]
            per_gb = [o / (r["bytes"] / 1e9) for o, r in zip(own, rs) if o is not None and m in ("in", "run")]
            print(f"| {op} | {names[m]} | {len(rs)} | {med([r['MBps'] for r in rs])} "
                  f"| {statistics.median(r['MBps'] for r in rs) / statistics.median(base):.2f}x "
                  f"| {med([r['loop_cpu_s'] for r in rs], '{:.2f}')} | {med(own, '{:.3f}')} "
                  f"| {med(per_gb, '{:.3f}') if per_gb else '-'} "
                  f"| {med([r.get('events') for r in rs])} | {med([M(r['left_bytes']) for r in rs], '{:.1f}')} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["prepare", "round", "summary"])
    ap.add_argument("--dir")
    ap.add_argument("--ubio")
    ap.add_argument("--bench", help="ubio-bench (its balloon and victim workers); "
                    "default: beside --ubio")
    ap.add_argument("--jsonl")
    ap.add_argument("--exp", choices=EXPS)
    ap.add_argument("--operator-modes", default="", type=lambda s: [m for m in s.split(",") if m],
                    help="modes added to the operator's off and on: " + ", ".join(OPERATOR_EXTRA))
    ap.add_argument("--repeat", type=int, default=1,
                    help="operator: run each mode this many times under the round's one balloon")
    ap.add_argument("--probe", metavar="DIR",
                    help="operator: trace and sample the kernel's reclaim during each run "
                    "(bench/reclaim_probe.py); its files go to DIR, its sums into the record")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the data sizes (a smoke run: 0.05)")
    a = ap.parse_args()
    if a.ubio:
        a.ubio = os.path.abspath(a.ubio)
        a.bench = os.path.abspath(a.bench or os.path.join(os.path.dirname(a.ubio), "ubio-bench"))
    if a.dir:
        a.dir = os.path.abspath(a.dir)
    if a.probe:
        os.makedirs(a.probe, exist_ok=True)
    {"prepare": prepare, "round": round_, "summary": summary}[a.step](a)


if __name__ == "__main__":
    main()
