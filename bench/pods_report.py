#!/usr/bin/env python3
"""Tables and plots of bench/pods.py's records (issue 36's pod run).

    pods_report.py pods.jsonl[.gz] OUTDIR

Writes OUTDIR/summary.md (per configuration and MGLRU setting, the median
over rounds [min-max] of: the copy's speed, pod A's page cache, working set
and memory.current peaks during the copy, memory.max events and OOM kills,
both hot readers' median and worst second) and OUTDIR/pod-a-*.svg (per
configuration, one round: pod A's page cache and working set, and both hot
readers' rates, per second). Plots need matplotlib (run.sh installs it into
a venv of its own).
"""

import gzip
import json
import os
import statistics
import sys

MiB = 1 << 20


def span(xs, fmt="{:.0f}"):
    xs = sorted(xs)
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(xs[0])}-{fmt.format(xs[-1])}]"


def main():
    path, out = sys.argv[1], sys.argv[2]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        recs = [json.loads(line) for line in f if line.startswith("{")]
    machine = next((r for r in recs if r["kind"] == "machine"), {})
    runs = [r for r in recs if r["kind"] == "run"]
    samples = [r for r in recs if r["kind"] == "sample"]
    os.makedirs(out, exist_ok=True)
    keys = []
    for r in runs:
        k = (r["config"], r["mglru"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: (["off", "daemon", "budget"].index(k[0]), str(k[1])))
    lines = [
        f"Kernel {machine.get('kernel', '?')}, {machine.get('mem_total_kib', 0) // 1024} MiB; "
        f"{len(runs)} runs; median over rounds [min-max].",
        "",
        "| pod A | MGLRU | runs | copy MB/s | A page cache peak MiB | A working set peak MiB | "
        "A memory.current peak MiB | A memory.max events | A OOM kills | A hot reader median / worst MB/s | "
        "B hot reader median / worst MB/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {"off": "no daemon", "daemon": "the daemon", "budget": "the daemon, budget 512M"}
    for k in keys:
        rs = [r for r in runs if (r["config"], r["mglru"]) == k]
        mglru = {True: "on", False: "off", None: "n/a"}[k[1]]
        lines.append(
            f"| {names[k[0]]} | {mglru} | {len(rs)} | {span([r['copy_MBps'] for r in rs])} | "
            f"{span([r['peak_a_file'] / MiB for r in rs])} | {span([r['peak_a_working_set'] / MiB for r in rs])} | "
            f"{span([r['peak_a_current'] / MiB for r in rs])} | {span([r['a_events_max'] for r in rs])} | "
            f"{span([r['a_oom_kill'] for r in rs])} | "
            f"{span([r['hot_a_median_MBps'] for r in rs])} / {span([r['hot_a_min_MBps'] for r in rs])} | "
            f"{span([r['hot_b_median_MBps'] for r in rs])} / {span([r['hot_b_min_MBps'] for r in rs])} |")
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plots", file=sys.stderr)
        return
    for k in keys:
        ss = [s for s in samples if (s["config"], s["mglru"]) == k and s["round"] == 0]
        if not ss:
            continue
        t = [s["t"] for s in ss]
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
        top.plot(t, [s["a"]["file"] / MiB for s in ss], label="pod A page cache (file)")
        top.plot(t, [s["a"]["working_set"] / MiB for s in ss], label="pod A working set")
        top.plot(t, [s["a"]["current"] / MiB for s in ss], label="pod A memory.current", linestyle=":")
        top.axhline(1024, color="grey", linewidth=0.5)
        top.set_ylabel("MiB")
        top.legend(fontsize=8)
        bottom.plot(t, [s["hot_a_MBps"] for s in ss], label="pod A's hot reader")
        bottom.plot(t, [s["hot_b_MBps"] for s in ss], label="pod B's hot reader")
        bottom.set_ylabel("MB/s")
        bottom.set_xlabel("seconds since the copy began")
        bottom.legend(fontsize=8)
        mglru = {True: "MGLRU on", False: "MGLRU off", None: ""}[k[1]]
        fig.suptitle(f"{names[k[0]]}, {mglru}")
        name = f"pod-a-{k[0]}-{ {True: 'mglru', False: 'classic', None: 'lru'}[k[1]] }.svg".replace(" ", "")
        fig.savefig(os.path.join(out, name))
        plt.close(fig)


if __name__ == "__main__":
    main()
