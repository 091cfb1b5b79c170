#!/usr/bin/env python3
"""The many-streams tables from a matrix's matrix.json (stdlib only).

    report.py MATRIX_DIR > tables.md

Per workload, one row per point (streams, threads or processes, own files or a shared
file): each mode's median MB/s [min-max] over its rounds and median CPU s/GB, ubio over
the fastest of buffered, dontcache and odirect (named), ubio's CPU per GB over that mode's,
ubio's dataset cache peak, and what the VM handed to its host during buffered's runs."""
import gzip
import json
import os
import sys

MODES = ["buffered", "dontcache", "odirect", "ubio"]


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def main(d):
    path = f"{d}/matrix.json"
    # The committed run keeps it gzip-compressed (bench/runs/README.md).
    rec = json.load(open(path) if os.path.exists(path) else gzip.open(path + ".gz", "rt"))
    rows = {}
    for p in rec["points"]:
        if p["state"]["state"] != "done":
            continue
        w = p["point"]["workload"]
        key = (w["kind"], w.get("shared_file", False), w.get("processes", 1) > 1, w["threads"])
        rows[key] = {m["mode"]: m for m in p["modes"] if m["runs_ok"] > 0}
    out = []
    for kind in ["seq-read", "seq-write"]:
        out.append(f"\n### {kind}\n")
        head = ["streams", "as", "files"]
        head += [f"{m} MB/s" for m in MODES] + [f"{m} CPU s/GB" for m in MODES]
        head += ["ubio / best", "ubio CPU / best's", "ubio cache peak", "buffered: to host"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for (k, shared, procs, t), ms in sorted(rows.items()):
            if k != kind:
                continue
            cells = [str(t), "processes" if procs else "threads", "shared" if shared else "own"]
            for m in MODES:
                s = ms.get(m, {}).get("mb_per_s")
                cells.append(f"{s['median']:.0f} [{s['min']:.0f}–{s['max']:.0f}]" if s else "–")
            for m in MODES:
                s = ms.get(m, {}).get("cpu_secs_per_gb")
                cells.append(f"{s['median']:.2f}" if s else "–")
            others = [(ms[m]["mb_per_s"]["median"], m) for m in MODES[:3] if m in ms and ms[m].get("mb_per_s")]
            u = ms.get("ubio")
            if u and others:
                best, bm = max(others)
                cells.append(f"{u['mb_per_s']['median'] / best:.2f} ({bm})")
                uc, bc = u.get("cpu_secs_per_gb"), ms[bm].get("cpu_secs_per_gb")
                cells.append(f"{uc['median'] / bc['median']:.2f}" if uc and bc and bc["median"] > 0 else "–")
                cells.append(mib(u["peak_dataset_cached_bytes"]))
            else:
                cells += ["–", "–", "–"]
            b = ms.get("buffered", {}).get("reported_to_host_bytes")
            cells.append(mib(b["median"]) if b else "–")
            out.append("| " + " | ".join(cells) + " |")
    print("\n".join(out).lstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1])
