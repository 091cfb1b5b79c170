#!/usr/bin/env python3
"""ab.sh's turns side by side: per point, for each of ubio's data paths (the
directories beside this script; or, given DIR, each directory of DIR that holds
turns, as a later A/B of builds lays them out), ubio's MB/s and its ratio to O_DIRECT's and to
the best of buffered, dontcache and odirect of the same matrix (median over the
turns, then the range), and ubio's CPU per GB against that best mode's.

    python3 bench/runs/2026-12-07-race-cost/compare.py [DIR] > compare.md
"""
import collections
import csv
import glob
import os
import statistics
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
BASELINES = ("buffered", "dontcache", "odirect")
LABELS = [label for label in ("default", "direct", "cache")
          if glob.glob(os.path.join(here, label, "turn*"))]
LABELS += sorted(os.path.basename(os.path.dirname(d)) for d in glob.glob(os.path.join(here, "*", "turn1"))
                 if os.path.basename(os.path.dirname(d)) not in LABELS)
# (point, label) -> one dict per turn
turns = collections.defaultdict(list)
for label in LABELS:
    for path in sorted(glob.glob(os.path.join(here, label, "turn*", "points.csv"))):
        by_point = collections.defaultdict(dict)
        for row in csv.DictReader(open(path)):
            by_point[(row["target"], row["workload"], int(row["threads"]))][row["mode"]] = row
        for point, modes in by_point.items():
            if "ubio" not in modes or not all(b in modes for b in BASELINES):
                continue
            mb = {m: float(r["mb_per_s_median"]) for m, r in modes.items()}
            best = max(BASELINES, key=mb.get)
            turns[(point, label)].append({
                "ubio": mb["ubio"],
                "of_odirect": mb["ubio"] / mb["odirect"],
                "of_best": mb["ubio"] / mb[best],
                "best": best,
                "cpu": float(modes["ubio"]["cpu_secs_per_gb_median"])
                / max(float(modes[best]["cpu_secs_per_gb_median"]), 1e-9),
            })


def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


print("| target | workload | streams | ubio's path | ubio MB/s | ubio / odirect | ubio / best | "
      "best | ubio CPU / best's | turns |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
summary = collections.defaultdict(list)
for point in sorted({p for (p, _) in turns}):
    for label in LABELS:
        t = turns.get((point, label))
        if not t:
            continue
        summary[label].append(statistics.median(x["of_best"] for x in t))
        best = collections.Counter(x["best"] for x in t).most_common(1)[0][0]
        print(f"| {point[0]} | {point[1]} | {point[2]} | {label} | {spread([x['ubio'] for x in t], '{:.0f}')} | "
              f"{spread([x['of_odirect'] for x in t], '{:.2f}')} | **{spread([x['of_best'] for x in t], '{:.2f}')}** | "
              f"{best} | {statistics.median(x['cpu'] for x in t):.2f} | {len(t)} |")
print()
for label in LABELS:
    r = summary.get(label)
    if r:
        print(f"{label}: ubio / best, median over {len(r)} points {statistics.median(r):.2f} "
              f"({min(r):.2f}-{max(r):.2f}), at or above 0.95 at {sum(x >= 0.95 for x in r)}")
