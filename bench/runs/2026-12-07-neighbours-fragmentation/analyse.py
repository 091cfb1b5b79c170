#!/usr/bin/env python3
"""Line up sample.sh's records with the runs of the harness's log: for each
run (its stream's start to its result line), the service's set (from the log),
the most free memory and the fewest free 2 MiB-or-larger blocks, the highest
watermark boost, and what kswapd, direct reclaim and compaction did.

    analyse.py DIR    (DIR holds run.log.gz, samples.tsv.gz and started)
"""
import gzip
import re
import sys
from pathlib import Path

PAGE_MIB = 4096 / 2**20
LINE = re.compile(r"^\[\s*([\d.]+)s\] (\w+ \d+/\d+): (\S+) \+ (\S+) \((\S+)\): (.*)$")


def runs(log):
    """(label, mode, start, end, result) for each run with a stream."""
    start = {}
    for line in log:
        m = LINE.match(line)
        if not m:
            continue
        t, block, load, stream, mode, what = m.groups()
        key = (block, load, stream, mode)
        if what == "the stream":
            start[key] = float(t)
        elif key in start and "set cached" in what:
            yield f"{block} {mode}", mode, start.pop(key), float(t), what


def main(d):
    d = Path(d)
    log = gzip.open(d / "run.log.gz", "rt").read().splitlines()
    # `started` is when the log's first line appeared: its clock then.
    first = float(re.match(r"^\[\s*([\d.]+)s\]", log[0]).group(1))
    started = float((d / "started").read_text()) - first
    rows = gzip.open(d / "samples.tsv.gz", "rt").read().splitlines()
    head = rows[0].split("\t")
    samples = [dict(zip(head, map(float, r.split("\t")))) for r in rows[1:] if r.count("\t") == len(head) - 1]
    print("run | set cached | free max MiB | free >= 2 MiB blocks, fewest | boost max pages |"
          " kswapd stole MiB | direct stole MiB | compact stalls (failed) | kcompactd wakes")
    for label, mode, t0, t1, result in runs(log):
        during = [s for s in samples if t0 <= s["t"] - started <= t1]
        if len(during) < 2:
            continue
        first, last = during[0], during[-1]
        delta = lambda k: last[k] - first[k]
        big = min(s["order9"] + s["order10"] * 2 for s in during)
        setc = re.search(r"set cached (\S+ -> min \S+)", result).group(1)
        print(f"{label} | {setc} | {max(s['nr_free_pages'] for s in during) * PAGE_MIB:.0f} | {big:.0f} |"
              f" {max(s['boost'] for s in during):.0f} | {delta('pgsteal_kswapd') * PAGE_MIB:.0f} |"
              f" {delta('pgsteal_direct') * PAGE_MIB:.0f} | {delta('compact_stall'):.0f} ({delta('compact_fail'):.0f}) |"
              f" {delta('compact_daemon_wake'):.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
