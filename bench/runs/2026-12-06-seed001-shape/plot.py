#!/usr/bin/env python3
"""Seed 001's shape from one `ubio-bench run` report: per-second read throughput of every
run, one colour per mode, with kswapd's CPU and the machine's free memory per second below.

    plot.py REPORT_JSON OUT_SVG > table.md

Prints per mode (median over its rounds [min-max]): MB/s over the whole run, over its first
3 seconds and over the rest, CPU s/GB, kswapd CPU seconds, pages reclaimed per GB, and what
the VM handed to its host. Needs matplotlib (run.sh installs it into target/bench-venv)."""
import json
import statistics
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"buffered": "tab:red", "buffered+backed": "tab:orange", "ubio": "tab:blue",
           "dontcache": "tab:green", "odirect": "tab:purple"}


def span(xs, fmt="{:.0f}"):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return "–"
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(xs[0])}–{fmt.format(xs[-1])}]"


def rate(samples):
    b = sum(s["bytes"] for s in samples)
    t = sum(s["interval_secs"] for s in samples)
    return b / t / 1e6 if t > 0 else None


def main(path, svg):
    r = json.load(open(path))
    runs = [x for x in r["runs"] if not x.get("error")]
    modes = []
    for x in runs:
        if x["mode"] not in modes:
            modes.append(x["mode"])
    fig, (top, mid, low) = plt.subplots(3, 1, figsize=(10, 9), sharex=True,
                                        gridspec_kw={"height_ratios": [3, 1, 1]})
    for x in runs:
        c = COLOURS.get(x["mode"], None)
        t = [s["t_secs"] for s in x["samples"]]
        label = x["mode"] if x["round"] == 1 else None
        top.plot(t, [s["mb_per_s"] for s in x["samples"]], color=c, label=label, alpha=0.8)
        mid.plot(t, [100 * s["kswapd_cpu_secs"] / s["interval_secs"] for s in x["samples"]],
                 color=c, alpha=0.8)
        low.plot(t, [(s.get("free_bytes") or 0) / 2**30 for s in x["samples"]], color=c, alpha=0.8)
    w = r["config"]["workload"]
    p = r.get("pressure") or {}
    top.set_title(
        f"Reads of {w['dataset_bytes'] / 2**30:.0f} GiB ({w['threads']} threads, "
        f"{w['block_bytes'] // 1024} KiB requests) with {p.get('leave_bytes', 0) / 2**30:.0f} GiB "
        f"of memory left; every run of {r['config']['rounds']} rounds")
    top.set_ylabel("MB/s (per second)")
    top.set_ylim(bottom=0)
    top.legend()
    mid.set_ylabel("kswapd % CPU")
    mid.set_ylim(bottom=0)
    low.set_ylabel("free memory GiB")
    low.set_xlabel("seconds since the run started")
    low.set_ylim(bottom=0)
    for a in (top, mid, low):
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(svg)
    print("| mode | runs | MB/s whole run | MB/s first 3 s | MB/s after 3 s | CPU s/GB | "
          "kswapd CPU s | pages reclaimed per GB | handed to the host |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m in modes:
        xs = [x for x in runs if x["mode"] == m]
        whole = [x["bytes"] / x["secs"] / 1e6 for x in xs]
        first = [rate(x["samples"][:3]) for x in xs]
        rest = [rate(x["samples"][3:]) for x in xs]
        ms = next(s for s in r["modes"] if s["mode"] == m)
        cpu = ms.get("cpu_secs_per_gb") or {}
        ks = ms.get("kswapd_cpu_secs") or {}
        rec = ms.get("reclaimed_pages_per_gb") or {}
        host = ms.get("reported_to_host_bytes") or {}
        print(f"| {m} | {len(xs)} | {span(whole)} | {span(first)} | {span(rest)} | "
              f"{cpu.get('median', 0):.2f} | {ks.get('median', 0):.1f} | "
              f"{rec.get('median', 0):,.0f} | {host.get('median', 0) / 2**20:.0f} MiB |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
