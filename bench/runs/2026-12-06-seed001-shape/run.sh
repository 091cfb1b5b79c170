#!/bin/bash
# Seed 001's shape (issue 37, item 4): the per-second throughput of reads over a dataset
# four times the memory left, buffered against ubio. A balloon of locked memory leaves
# 6 GiB to the whole machine (kswapd reclaims, as on the seed's machine); 24 GiB in two
# files on ext4 on a loop device over the disk (loop direct I/O), 2 threads (one per CPU)
# of 64 KiB reads, as the seed's reader; modes buffered, buffered+backed (the free memory
# the run starts with faulted in first: what bare metal would have) and ubio; 3 rounds,
# each in a new random order (seed 1001). Then plot.py draws every run's per-second series
# (seed001-shape.svg) and prints the table of README.md.
#
#   bench/runs/2026-12-06-seed001-shape/run.sh       (root; about 10 minutes here)
set -euo pipefail
# UBIO_BENCH_PREFIX="CMD ARGS": a command each measured step runs under (for
# example a lock that keeps a shared machine quiet); default none.
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
nice -n 10 cargo build --release -p ubio-bench -p ubio-cli
"${prefix[@]}" target/release/ubio-bench run \
    --workload seq-read --block 64K --threads 2 --dataset 24G \
    --fs ext4 --backing disk --pressure global --limit 6G \
    --modes buffered,buffered+backed,ubio --rounds 3 --no-victim --seed 1001 \
    --out "$here/run"
venv=$root/target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import matplotlib' 2>/dev/null || "$venv/bin/pip" install --quiet matplotlib
"$venv/bin/python" "$here/plot.py" "$here/run/report.json" "$here/seed001-shape.svg" > "$here/table.md"
