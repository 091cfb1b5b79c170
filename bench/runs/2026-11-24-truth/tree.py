#!/usr/bin/env python3
"""Tree copies to durability: cp -r, rsync -a, xcp -r and ubio cp -r of one
tree (20k small files and a few large ones), side by side, every round in a
new random order (seeded), medians [min-max], CPU and system s/GB, and the
memory the VM handed back to its host during each run.

The harness (`ubio bench run`) runs one command per file of equal-sized
files and cannot express a tree; this script does the same steps for a tree:
before each run the copy is removed (and synced) and the source's pages are
dropped (`ubio evict -r`); a NAME+backed run first lets a free page
reporting pass go by (at most 2.5 s), then faults in and releases anonymous
huge pages of the size the run's page cache will take (source + copy), as the
harness's backed modes do. A run is timed from the start of the command to
the return of `sync -f` on the copy's filesystem (durability); its CPU is
that of the command and of sync (their rusage).

    tree.py UBIO DIR OUT [--rounds N] [--seed S] [--small N] [--large N] [--large-size MiB]
            [--modes M,...] [--fresh]

--fresh: each run copies into a destination of its own and none is removed
until all are done, so no run creates files right after 20,000 were deleted
(ext4 skips inodes deleted in the last 30 s when it allocates one); without
it, the previous copy is removed just before each run (a backup rotation).

A mode is cp, rsync, xcp, ubio-cp (UBIO), or ubio-cp@PATH (the ubio binary
at PATH: a before/after comparison), each optionally +backed.
"""
import argparse
import json
import mmap
import os
import random
import shutil
import statistics
import subprocess
import time

REPORTED = "/sys/module/page_reporting/parameters/reported_kib"


def reported_kib():
    try:
        with open(REPORTED) as f:
            return int(f.read())
    except OSError:
        return None


def make_tree(src, small, large, large_mib, seed):
    rng = random.Random(seed)
    block = rng.randbytes(1 << 20)
    total = 0
    for i in range(small):
        d = os.path.join(src, f"d{i // 100:03d}")
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        n = rng.randrange(1, 64) * 1024
        off = rng.randrange(0, (1 << 20) - n)
        with open(os.path.join(d, f"f{i:05d}"), "wb") as f:
            f.write(i.to_bytes(8, "little") + block[off + 8 : off + n])
        total += n
    os.makedirs(os.path.join(src, "large"), exist_ok=True)
    for j in range(large):
        with open(os.path.join(src, "large", f"big{j}"), "wb") as f:
            for k in range(large_mib):
                f.write(k.to_bytes(8, "little") + j.to_bytes(8, "little") + block[16:])
        total += large_mib << 20
    subprocess.run(["sync", "-f", src], check=True)
    return total


def tree_size(root):
    files = size = 0
    for d, _, names in os.walk(root):
        for n in names:
            st = os.lstat(os.path.join(d, n))
            files += 1
            size += st.st_size
    return files, size


def back_pages(nbytes):
    """Let a reporting pass go by, then fault in and release huge pages."""
    start, since = reported_kib(), time.monotonic()
    while start is not None and reported_kib() == start and time.monotonic() - since < 2.5:
        time.sleep(0.02)
    for _ in range(3):
        before = reported_kib()
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except (AttributeError, OSError):
            pass
        for i in range(0, nbytes, 4096):
            m[i] = 1
        m.close()
        if before is None or reported_kib() == before:
            break


def argv(tool, ubio, src, dst):
    # ubio-cp@PATH: another build of ubio (a before/after comparison).
    if tool.startswith("ubio-cp@"):
        return [tool.removeprefix("ubio-cp@"), "cp", "-r", src, dst]
    return {
        "cp": ["cp", "-r", src, dst],
        "rsync": ["rsync", "-a", "--whole-file", src + "/", dst],
        "xcp": ["xcp", "-r", src, dst],
        "ubio-cp": [ubio, "cp", "-r", src, dst],
    }[tool]


def run_one(mode, ubio, src, dst, data_bytes):
    tool, backed = mode.removesuffix("+backed"), mode.endswith("+backed")
    if os.path.exists(dst):
        shutil.rmtree(dst)
    subprocess.run(["sync", "-f", os.path.dirname(dst)], check=True)
    subprocess.run([ubio, "evict", "-r", src], check=True, stdout=subprocess.DEVNULL)
    if backed:
        back_pages(2 * data_bytes)
    r0, c0 = reported_kib(), os.times()
    t0 = time.monotonic()
    p = subprocess.run(argv(tool, ubio, src, dst), capture_output=True, text=True)
    subprocess.run(["sync", "-f", dst], check=True)
    secs = time.monotonic() - t0
    c1, r1 = os.times(), reported_kib()
    if p.returncode != 0:
        return {"mode": mode, "error": f"exit {p.returncode}: {p.stderr.strip()[:500]}"}
    files, size = tree_size(dst)
    user = c1.children_user - c0.children_user
    sys_ = c1.children_system - c0.children_system
    gb = data_bytes / 1e9
    return {
        "mode": mode,
        "command": " ".join(argv(tool, "ubio", "SRC", "DST")) + "; sync -f DST",
        "secs": secs,
        "mb_per_s": data_bytes / 1e6 / secs,
        "cpu_secs_per_gb": (user + sys_) / gb,
        "cpu_sys_secs_per_gb": sys_ / gb,
        "reported_to_host_bytes": None if r0 is None else (r1 - r0) * 1024,
        "files": files,
        "bytes": size,
    }


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ubio")
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--small", type=int, default=20000)
    ap.add_argument("--large", type=int, default=4)
    ap.add_argument("--large-size", type=int, default=512, help="MiB")
    ap.add_argument("--modes", default="cp,cp+backed,rsync,rsync+backed,xcp,xcp+backed,ubio-cp")
    ap.add_argument("--fresh", action="store_true", help="a new destination per run, none removed until the end")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    modes = a.modes.split(",")
    for m in modes:
        tool = m.removesuffix("+backed")
        prog = a.ubio if tool == "ubio-cp" else tool.removeprefix("ubio-cp@")
        if shutil.which(prog) is None:
            raise SystemExit(f"tree.py: {m}: `{prog}` is not installed (scripts/install-deps.sh)")
    work = os.path.join(a.dir, f"ubio-tree-{os.getpid()}")
    src, dst = os.path.join(work, "src"), os.path.join(work, "dst")
    os.makedirs(src)
    try:
        data = make_tree(src, a.small, a.large, a.large_size, seed)
        want = tree_size(src)
        print(f"seed {seed}; tree of {want[0]} files, {data / 1e9:.2f} GB", flush=True)
        rng = random.Random(seed)
        orders, runs = [], []
        for rnd in range(1, a.rounds + 1):
            order = modes[:]
            rng.shuffle(order)
            orders.append(order)
            for m in order:
                to = f"{dst}-{len(runs)}" if a.fresh else dst
                r = run_one(m, a.ubio, src, to, data)
                r["round"] = rnd
                if "error" not in r and (r["files"], r["bytes"]) != want:
                    r["error"] = f"copied {r['files']} files, {r['bytes']} bytes; the source has {want}"
                runs.append(r)
                line = r.get("error") or (
                    f"{r['mb_per_s']:.0f} MB/s in {r['secs']:.1f} s, cpu {r['cpu_secs_per_gb']:.2f} s/GB "
                    f"(sys {r['cpu_sys_secs_per_gb']:.2f}), "
                    f"{(r['reported_to_host_bytes'] or 0) >> 20} MiB reported to the host"
                )
                print(f"round {rnd}/{a.rounds}: {m}: {line}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = {}
    for m in modes:
        ok = [r for r in runs if r["mode"] == m and "error" not in r]
        if not ok:
            continue
        rep = [r["reported_to_host_bytes"] for r in ok if r["reported_to_host_bytes"] is not None]
        table[m] = {
            "mb_per_s": summary([r["mb_per_s"] for r in ok]),
            "cpu_secs_per_gb": summary([r["cpu_secs_per_gb"] for r in ok]),
            "cpu_sys_secs_per_gb": summary([r["cpu_sys_secs_per_gb"] for r in ok]),
            "reported_to_host_bytes": summary(rep) if rep else None,
            "failed": sum(1 for r in runs if r["mode"] == m and "error" in r),
        }
    os.makedirs(a.out, exist_ok=True)
    report = {
        "seed": seed,
        "orders": orders,
        "tree": {"files": want[0], "bytes": data, "small": a.small, "large": a.large,
                 "large_mib": a.large_size},
        "fresh": a.fresh,
        "runs": runs,
        "modes": table,
    }
    with open(os.path.join(a.out, "tree.json"), "w") as f:
        json.dump(report, f, indent=1)
    base = {k: table[k]["mb_per_s"]["median"] for k in ("cp", "cp+backed") if k in table}
    lines = [
        f"| mode | MB/s median [min-max] | vs cp | vs cp+backed (bare metal) | CPU s/GB | sys s/GB | reported to host |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, s in table.items():
        mb = s["mb_per_s"]
        vs = lambda k: f"{mb['median'] / base[k]:.2f}x" if k in base else "-"
        rep = s["reported_to_host_bytes"]
        lines.append(
            f"| {m} | {mb['median']:.0f} [{mb['min']:.0f}-{mb['max']:.0f}] | {vs('cp')} | {vs('cp+backed')} "
            f"| {s['cpu_secs_per_gb']['median']:.2f} | {s['cpu_sys_secs_per_gb']['median']:.2f} "
            f"| {'-' if rep is None else str(int(rep['median']) >> 20) + ' MiB'} |"
        )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "tree.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
