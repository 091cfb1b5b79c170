#!/usr/bin/env bash
# Issue 39's second run of `ubio-bench neighbours`, what the first
# (bench/runs/2026-12-06-neighbours) left out, on the engine with issue 37's
# race and issue 38's looks: pgbench -S, read-write pgbench and wrk, each
# alone and beside a restic backup of a 4 GiB tree, an rsync and a cp of a
# 4 GiB image (4x the 1 GiB left to the machine by the balloon), plain, under
# `ubio run`, under `ubio policy run` and with the tool's own option where it
# has one; with the stream's, the daemon's and kswapd's CPU. 3 rounds (or
# ROUNDS), each in a new random order: 99 runs, about an hour on 2 cores.
#
#   bench/runs/2026-12-07-neighbours/run.sh [ROUNDS] [args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rounds=${1:-3}
shift || true
UBIO_NEIGHBOURS_OUT=${UBIO_NEIGHBOURS_OUT:-$here} exec "$here/../2026-12-06-neighbours/run.sh" custom "$rounds" \
    --pressure global --loads pgbench-ro,pgbench-rw,wrk --streams restic,rsync,image-cp \
    --modes plain,ubio-run,policy,own --lead-secs 3 "$@"
