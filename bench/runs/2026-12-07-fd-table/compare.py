#!/usr/bin/env python3
"""ubio / O_DIRECT and ubio / the best of buffered, dontcache and O_DIRECT
per point and build, from ab.sh's runs: the median of each mode's rounds in
a run, then the median over turns of the run's ratios [their range]."""
import csv
import statistics
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
ratios = {}  # (point, build) -> [(ubio/odirect, ubio/best, ubio MB/s, best mode)]
for runs in sorted(here.glob("*/turn*/*/runs.csv")):
    point, build = runs.parent.name, runs.parents[2].name
    by_mode = {}
    for row in csv.DictReader(runs.open()):
        if not row["error"]:
            by_mode.setdefault(row["mode"], []).append(float(row["mb_per_s"]))
    med = {m: statistics.median(v) for m, v in by_mode.items()}
    if "ubio" not in med or "odirect" not in med:
        continue
    best = max((m for m in med if m != "ubio"), key=med.get)
    ratios.setdefault((point, build), []).append(
        (med["ubio"] / med["odirect"], med["ubio"] / med[best], med["ubio"], best))


def cell(values):
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


print("| point | build | turns | ubio MB/s | ubio / O_DIRECT | ubio / best | best |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for (point, build), rs in sorted(ratios.items(), key=lambda kv: (kv[0][0], kv[0][1] != "old")):
    bests = sorted({r[3] for r in rs})
    print(f"| {point} | {build} | {len(rs)} | {statistics.median(r[2] for r in rs):.0f} "
          f"| {cell([r[0] for r in rs])} | {cell([r[1] for r in rs])} | {', '.join(bests)} |")
