#!/usr/bin/env bash
# The policy daemon beside nginx and PostgreSQL again, after 41c4d86 (what a
# busy process out of scope costs the daemon): wrk and pgbench -S, each alone
# and beside restic, rsync and cp of 4 GiB (4x the 1 GiB left to the machine
# by the balloon), plain and under `ubio policy run`, 3 rounds (or ROUNDS),
# each in a new random order: 42 runs, about 20 minutes on 2 cores. Compare
# with bench/runs/2026-12-07-neighbours (the daemon before).
#
#   bench/runs/2026-12-07-neighbours-policy/run.sh [ROUNDS] [args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rounds=${1:-3}
shift || true
UBIO_NEIGHBOURS_OUT=${UBIO_NEIGHBOURS_OUT:-$here} exec "$here/../2026-12-06-neighbours/run.sh" custom "$rounds" \
    --pressure global --loads pgbench-ro,wrk --streams restic,rsync,image-cp \
    --modes plain,policy --lead-secs 3 "$@"
