#!/usr/bin/env bash
# Is ubio's single-reader gap of bench/runs/2026-11-26-matrix-disk (0.82-0.94x buffered,
# 180k-200k pages/GB reclaimed) still there? Its seq-read points at 1 thread, the same
# target, memory and pressure, buffered/odirect/ubio, 5 rounds per point, plus a 4x dataset.
#   bench/runs/2026-11-27-read-gap/run.sh OUT   (UBIO_BIN_DIR: default target/release; root)
set -euo pipefail
"$(dirname "$0")/../../matrix.sh" "$1" \
    --targets ext4/disk --workloads seq-read --blocks 1M --threads 1 \
    --datasets 0.5,1,2,4 --modes buffered,odirect,ubio --memory 512M \
    --pressure auto --rounds 5 --seed 2712 --max-minutes 20
