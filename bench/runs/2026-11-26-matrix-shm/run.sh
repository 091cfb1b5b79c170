#!/usr/bin/env bash
# The matrix committed here (issue 27): ext4 over a loop device in /dev/shm
# (seed 003's pmem: no device limit, so the page cache's own cost shows),
# seq-write and seq-read, 1 MiB requests, 1, 2 and 4 threads, datasets of
# 0.25, 0.5, 1 and 2 times the 512 MiB the run may use, buffered,
# dontcache, odirect and ubio, plus seed 003's own job (2 MiB, one job per
# CPU, ten files per job, fio's cross-check) at each dataset; 3 rounds per
# point, each in a new random order; the points in a random order (seed 2611).
# --pressure auto: on this VM (free page reporting) global pressure, a
# balloon leaving 512 MiB to the whole machine and a filler holding free
# memory small before every run, so every mode takes pages just freed.
#
#   bench/runs/2026-11-26-matrix-shm/run.sh [MAX-MINUTES]
#
# Each call is one session of at most MAX-MINUTES (default 8); run it again
# to go on with the points not done (bench/matrix.sh). UBIO_BIN_DIR: where
# ubio and ubio-bench are (default target/release). Needs root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../matrix.sh" "$here" \
    --targets ext4/shm --workloads seq-write,seq-read --blocks 1M --threads 1,2,4 \
    --datasets 0.25,0.5,1,2 --modes buffered,dontcache,odirect,ubio --memory 512M \
    --pressure auto --seed-point --rounds 3 --seed 2611 --max-minutes "${1:-8}"
