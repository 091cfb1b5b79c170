#!/usr/bin/env python3
"""The README's tables, from this run's reports: per part, one row per mode
with its median MB/s [min-max], the ratio to the baseline and to the
baseline's backed twin, CPU and system s/GB, the memory reported to the host
and the dataset's page-cache peak.

    tables.py [DIR]   (DIR defaults to this directory)
"""
import gzip
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = sys.argv[1] if len(sys.argv) > 1 else here

NAMES = {
    "ubio-cat": "ubio cat",
    "ubio-run-cat": "ubio run -- cat",
    "dd": "dd bs=1M",
    "dd+backed": "dd bs=1M +backed",
    "ubio-cp": "ubio cp",
    "ubio-run-cp": "ubio run -- cp",
    "dd-nocache": "dd iflag=nocache oflag=nocache",
}


def mib(b):
    if b is None:
        return "-"
    if b >= 1 << 30:
        return f"{b / (1 << 30):.1f} GiB"
    return f"{b / (1 << 20):.0f} MiB"


def harness_table(part):
    path = os.path.join(root, part, "report.json")
    if os.path.exists(path):
        r = json.load(open(path))
    elif os.path.exists(path + ".gz"):  # as committed (gzip-compressed on 2026-12-06)
        r = json.load(gzip.open(path + ".gz", "rt"))
    else:
        return None
    modes = r["modes"]
    base = next((m for m in modes if m["speed_vs_baseline"] == 1.0), None)
    twin = next((m for m in modes if m.get("speed_vs_backed_baseline") == 1.0), None)
    out = [
        f"| command | MB/s median [min-max] | vs {base['mode'] if base else '-'} "
        f"| vs {twin['mode'] if twin else '-'} (bare metal) | CPU s/GB | sys s/GB "
        f"| reported to host per run | dataset cache peak |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in modes:
        s = m["mb_per_s"]
        if not s:
            out.append(f"| {NAMES.get(m['mode'], m['mode'])} | failed | | | | | | |")
            continue
        ratio = lambda x: "-" if x is None else f"{x:.2f}x"
        rep = m.get("reported_to_host_bytes")
        name = NAMES.get(m["mode"], m["mode"])
        if m["mode"].startswith("ubio"):
            name = f"**{name}**"
        out.append(
            f"| {name} | {s['median']:.0f} [{s['min']:.0f}-{s['max']:.0f}] "
            f"| {ratio(m['speed_vs_baseline'])} | {ratio(m.get('speed_vs_backed_baseline'))} "
            f"| {m['cpu_secs_per_gb']['median']:.2f} | {m['cpu_sys_secs_per_gb']['median']:.2f} "
            f"| {mib(rep['median'] if rep else None)} | {mib(m['peak_dataset_cached_bytes'])} |"
        )
    sched = r.get("schedule") or {}
    return "\n".join(out) + f"\n\n{len(r['runs'])} runs, order seed {sched.get('seed')}.\n"


def main():
    for part, title in [
        ("reads-cgroup", "Cold reads of 4 GiB in a 1 GiB memory cgroup"),
        ("reads-free", "Cold reads of 4 GiB without a memory limit"),
        ("copies", "Single-file copies of 4 GiB to durability"),
    ]:
        t = harness_table(part)
        if t:
            print(f"### {title} ([{part}]({part}/report.md))\n\n{t}")
    tree = os.path.join(root, "tree", "tree.md")
    if os.path.exists(tree):
        print("### Tree copies to durability ([tree](tree/tree.md))\n")
        print(open(tree).read())


if __name__ == "__main__":
    main()
