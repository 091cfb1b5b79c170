#!/usr/bin/env bash
# About 19 unmodified programs (coreutils, compressors, interpreters, a static
# Go copy, a static musl stdio copy, a pipeline, and copies the kernel makes
# in calls that move no position: Go's io.Copy, copy_file_range, sendfile,
# splice) on a big file, with and without `ubio run`: wall time, CPU of the
# whole tree, ubio's own (engine) CPU, peak page cache of the data files;
# ROUNDS rounds in random order, medians [min-max]. See bench/run_programs.py.
#
#   bench/run-programs.sh [SIZE_GIB=4] [ROUNDS=3]
#
# Needs target/release/ubio and libubio_preload.so (cargo build --release
# -p ubio-cli -p ubio-preload), go, musl-gcc, zstd; SIZE_GIB x 3 free in target/.
# Run it through /work/bin/measure; to keep each call short, run the steps
# one by one (prepare, then one round per call, then summary), as
# bench/runs/2026-11-24-run-programs/run.sh does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size="${1:-4}"
rounds="${2:-3}"
dir=target/bench-run-programs
py=bench/run_programs.py
python3 "$py" prepare --dir "$dir" --size-gib "$size" --ubio target/release/ubio
rm -f "$dir/runs.jsonl"
for _ in $(seq "$rounds"); do
    python3 "$py" round --dir "$dir" --ubio target/release/ubio --jsonl "$dir/runs.jsonl"
done
python3 "$py" summary --jsonl "$dir/runs.jsonl"
