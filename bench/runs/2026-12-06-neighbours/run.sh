#!/usr/bin/env bash
# Issue 39's committed run: `ubio-bench neighbours` at full size. PostgreSQL
# (pgbench -S and read-write) and nginx (wrk, random files) of its own, each
# alone and beside tar and restic backups of a 4 GiB tree and rsync and cp of a
# 4 GiB image (4x the 1 GiB left), plain, under `ubio run`, under `ubio policy
# run` and with dd's nocache, under global pressure (a balloon leaves 1 GiB to
# the machine) and in memory cgroups (512 MiB each for the service and the
# stream); ROUNDS rounds (default 3), each in a new random order. Writes
# neighbours.json, neighbours.md, neighbours.html (the plots), runs.csv,
# seconds.csv and run.log here. About 2.5-3 hours on a 2-core machine
# (252 runs of about 35 s, the setups); needs root and about 20 GiB free
# under target/. Extra arguments go to ubio-bench neighbours.
#
#   bench/runs/2026-12-06-neighbours/run.sh [ROUNDS] [ubio-bench neighbours args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
rounds=${1:-3}
shift || true
cd "$repo"
scripts/install-deps.sh postgresql nginx wrk restic rsync
cargo build --release -p ubio-bench -p ubio-cli -p ubio-preload
# The scratch directory's parents must be searchable by the user postgres.
scratch=$repo/target/neighbours-scratch
mkdir -p "$scratch"
chmod 755 "$repo/target" "$scratch"
UBIO_EXE=$repo/target/release/ubio target/release/ubio-bench neighbours \
    --memory 1G --data 4G --rounds "$rounds" --lead-secs 5 --alone-secs 20 \
    --dir "$scratch" --out "$here" "$@" 2>&1 | tee "$here/run.log"
rmdir "$scratch" 2>/dev/null || true
