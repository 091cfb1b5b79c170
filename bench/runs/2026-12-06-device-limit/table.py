#!/usr/bin/env python3
"""The README's table from a matrix's points.csv: per point the four modes' median
MB/s, ubio's min-max, ubio over the best of the other three, and the CPU per GB.

    python3 bench/runs/2026-12-06-device-limit/table.py [MATRIX_DIR] > table.md

MATRIX_DIR defaults to this run's matrix/ (2026-12-06-device-limit-2 passes its own).
"""
import collections
import csv
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
matrix = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "matrix")
points = collections.defaultdict(dict)
for r in csv.DictReader(open(os.path.join(matrix, "points.csv"))):
    points[(r["target"], r["workload"], int(r["threads"]))][r["mode"]] = r


def mb(row):
    return float(row["mb_per_s_median"])


print("| target | workload | threads | buffered | dontcache | odirect | ubio | ubio / best "
      "| CPU s/GB ubio / odirect / buffered |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
ratios = []
for key in sorted(points):
    m = points[key]
    best = max(("buffered", "dontcache", "odirect"), key=lambda mode: mb(m[mode]))
    ratio = mb(m["ubio"]) / mb(m[best])
    ratios.append(ratio)
    cpu = [float(m[mode]["cpu_secs_per_gb_median"]) for mode in ("ubio", "odirect", "buffered")]
    u = m["ubio"]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {mb(m['buffered']):.0f} | {mb(m['dontcache']):.0f} "
          f"| {mb(m['odirect']):.0f} | {mb(u):.0f} [{float(u['mb_per_s_min']):.0f}-"
          f"{float(u['mb_per_s_max']):.0f}] | **{ratio:.2f}** ({best}) "
          f"| {cpu[0]:.2f} / {cpu[1]:.2f} / {cpu[2]:.2f} |")
print()
print(f"ubio / best: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}; "
      f"at or above 0.95 in {sum(r >= 0.95 for r in ratios)} of {len(ratios)} points")
