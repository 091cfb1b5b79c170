#!/usr/bin/env python3
"""Per run of ab.sh with several streams: each mode's MB/s and what ubio's streams
chose (the paths of their last races, and the bytes they moved through O_DIRECT).

    python3 bench/runs/2026-12-07-shared-race/verdicts.py [DIR] > verdicts.txt
"""
import collections
import glob
import gzip
import json
import os
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = []
# ab.sh's rounds (here), or the turns of a later A/B that reuses this (2026-12-07-race-cost).
for f in (glob.glob(os.path.join(here, "*", "round*", "points", "*", "report.json.gz"))
          + glob.glob(os.path.join(here, "*", "turn*", "points", "*", "report.json.gz"))):
    label, rnd, _, point = f[len(here) + 1:].split(os.sep)[:4]
    if "_t1_" in point:
        continue
    mb, chose = {}, ""
    for run in json.load(gzip.open(f))["runs"]:
        mb[run["mode"]] = run["summary"].get("mb_per_s", 0)
        if run["mode"] == "ubio":
            st = run.get("ubio_stats") or []
            direct = sum(s["bytes_written_direct"] + s["bytes_read_direct"] for s in st) >> 20
            paths = collections.Counter(
                (s["write_race"] or s["read_race"] or {}).get("path") for s in st)
            chose = f"{direct:4d} MiB direct; last races: " + ", ".join(
                f"{n} {p}" for p, n in sorted(paths.items(), key=str))
    rows.append((point.replace("_bs1M", "").replace("_f1_x2", ""), rnd, label,
                 f"ubio {mb['ubio']:5.0f}  odirect {mb['odirect']:5.0f}  buffered {mb['buffered']:5.0f}  "
                 f"dontcache {mb['dontcache']:5.0f}  {chose}"))
for point, rnd, label, text in sorted(rows):
    print(f"{point:22s} {rnd:7s} {label:4s} {text}")
