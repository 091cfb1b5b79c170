#!/usr/bin/env python3
"""Where four concurrent readers' time goes (issue 37: several readers on
/dev/shm lag O_DIRECT while each stream's race finds the page cache faster
inside its calls). Four `ubio cat` of 256 MiB files at once on ext4 over a
loop device on /dev/shm, with --direct-reads never, always and when-faster,
ROUNDS rounds (default 3), the modes in a new random order each round. For
each process, from /proc/PID/schedstat (read every 5 ms until it exits):
its time on a CPU and its time waiting on a runqueue; with the wall time,
what is left is time asleep (waiting for I/O). Root; cleans up its loop
device, mount and files.

    bench/runs/2026-12-07-race-runqueue/run.py [ROUNDS] > results.txt
"""
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
UBIO = os.path.join(HERE, "../../../target/release/ubio")
MIB = 1 << 20
FILES, SIZE = 4, 256 * MIB


def sh(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


def schedstat(pid):
    """(ns on a CPU, ns waiting on a runqueue) of every thread of pid."""
    cpu = wait = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/schedstat") as f:
            c, w, _ = f.read().split()
        cpu, wait = cpu + int(c), wait + int(w)
    return cpu, wait


def one(mode, files):
    for f in files:
        sh(UBIO, "evict", f)
    t0 = time.monotonic()
    env = dict(os.environ, UBIO_LOG="debug")
    logs = [tempfile.TemporaryFile(mode="w+") for _ in files]
    procs = [subprocess.Popen([UBIO, "cat", "--direct-reads", mode, f], stdout=subprocess.DEVNULL,
                              stderr=log, env=env)
             for f, log in zip(files, logs)]
    last = {p.pid: (0, 0) for p in procs}
    while any(p.poll() is None for p in procs):
        for p in procs:
            try:
                last[p.pid] = schedstat(p.pid)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
        time.sleep(0.005)
    wall = time.monotonic() - t0
    assert all(p.returncode == 0 for p in procs)
    # Each stream's races: the MB/s inside its calls on each path.
    races = []
    for log in logs:
        log.seek(0)
        races += [line.split("] ", 1)[-1].strip() for line in log
                  if "race " in line and "inside the calls" in line]
        log.close()
    cpu = sum(c for c, _ in last.values()) / 1e9
    wait = sum(w for _, w in last.values()) / 1e9
    return wall, cpu, wait, races


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    shm = tempfile.mkdtemp(dir="/dev/shm", prefix="ubio-race-")
    mnt = tempfile.mkdtemp(prefix="ubio-race-mnt-")
    backing, loop = os.path.join(shm, "backing"), None
    try:
        with open(backing, "wb") as f:
            f.truncate(2 << 30)
        loop = sh("losetup", "--find", "--show", backing)
        sh("mkfs.ext4", "-q", "-F", loop)
        sh("mount", loop, mnt)
        files = []
        for i in range(FILES):
            p = os.path.join(mnt, f"f{i}")
            with open(p, "wb") as f:
                f.write(os.urandom(MIB) * (SIZE // MIB))
            files.append(p)
        os.sync()
        ra = open(f"/sys/class/block/{os.path.basename(loop)}/queue/read_ahead_kb").read().strip()
        print(f"# {FILES} x ubio cat of {SIZE >> 20} MiB at once, ext4 on {loop} over /dev/shm "
              f"(read_ahead_kb {ra}); per run: wall, MiB/s in all, CPU s and runqueue wait s "
              f"summed over the processes, and their shares of processes x wall")
        for r in range(1, rounds + 1):
            modes = ["never", "always", "when-faster"]
            random.shuffle(modes)
            for mode in modes:
                wall, cpu, wait, races = one(mode, files)
                total = FILES * wall
                print(f"round {r} {mode:11s} wall {wall:.3f} s, {FILES * SIZE / MIB / wall:6.0f} MiB/s, "
                      f"cpu {cpu:.3f} s ({cpu / total:4.0%}), runqueue {wait:.3f} s ({wait / total:4.0%}), "
                      f"asleep {max(total - cpu - wait, 0):.3f} s", flush=True)
                for line in races:
                    print(f"    {line}")
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        if loop:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        os.rmdir(mnt)
        if os.path.exists(backing):
            os.unlink(backing)
        os.rmdir(shm)


if __name__ == "__main__":
    main()
