#!/usr/bin/env python3
"""ab.sh's rounds side by side: per point and build, ubio's MB/s and its ratio to
the best of buffered, dontcache and odirect of the same round (median over the
rounds, then the range), and the CPU per GB of ubio and of that best mode.

    python3 bench/runs/2026-12-07-shared-race/compare.py [DIR] > compare.md
"""
import collections
import csv
import glob
import os
import statistics
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
OTHERS = ("buffered", "dontcache", "odirect")
# (label, point) -> list of (ubio MB/s, ratio, best mode, ubio CPU, best CPU)
seen = collections.defaultdict(list)
for label in ("new", "old"):
    for path in sorted(glob.glob(os.path.join(here, label, "round*", "points.csv"))):
        modes = collections.defaultdict(dict)
        for r in csv.DictReader(open(path)):
            modes[(r["target"], r["workload"], int(r["threads"]))][r["mode"]] = r
        for point, m in modes.items():
            if "ubio" not in m or not all(o in m for o in OTHERS):
                continue
            mb = {k: float(v["mb_per_s_median"]) for k, v in m.items()}
            best = max(OTHERS, key=mb.get)
            seen[(label, point)].append((mb["ubio"], mb["ubio"] / mb[best], best,
                                         float(m["ubio"]["cpu_secs_per_gb_median"]),
                                         float(m[best]["cpu_secs_per_gb_median"])))


def cell(runs):
    if not runs:
        return "-", "-", "-"
    mbs = [r[0] for r in runs]
    ratios = [r[1] for r in runs]
    bests = collections.Counter(r[2] for r in runs).most_common(1)[0][0]
    cpu = statistics.median(r[3] for r in runs) / max(statistics.median(r[4] for r in runs), 1e-9)
    return (f"{statistics.median(mbs):.0f} [{min(mbs):.0f}-{max(mbs):.0f}]",
            f"**{statistics.median(ratios):.2f}** [{min(ratios):.2f}-{max(ratios):.2f}] ({bests})",
            f"{cpu:.2f}")


points = sorted({p for (_, p) in seen})
print("| target | workload | streams | new MB/s | new / best | new CPU / best's | "
      "old MB/s | old / best | old CPU / best's | rounds |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
summary = collections.defaultdict(list)
for p in points:
    n, o = seen[("new", p)], seen[("old", p)]
    for label, runs in (("new", n), ("old", o)):
        if runs:
            summary[label].append(statistics.median(r[1] for r in runs))
    print(f"| {p[0]} | {p[1]} | {p[2]} | " + " | ".join(cell(n)) + " | " + " | ".join(cell(o))
          + f" | {len(n)}/{len(o)} |")
print()
for label, ratios in summary.items():
    print(f"{label}: ubio / best, median over points {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}), at or above 0.95 at "
          f"{sum(r >= 0.95 for r in ratios)} of {len(ratios)} points")
