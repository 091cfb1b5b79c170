#!/usr/bin/env bash
# Issue 39's run of `ubio-bench neighbours` under the other pressure users
# have: the service and the stream each in a memory cgroup of its own (512 MiB
# each: v1 on this machine, v2 where the kernel has only it), 3 rounds (or
# ROUNDS) in a new random order each: pgbench -S, read-write pgbench and wrk,
# alone and beside tar of a 4 GiB tree and cp of a 4 GiB image, plain, under
# `ubio run`, under `ubio policy run` and with the tool's own option where it
# has one (dd's nocache for the image copy). 72 runs, about 40 minutes on 2
# cores.
#
#   bench/runs/2026-12-07-neighbours-cgroup/run.sh [ROUNDS] [args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rounds=${1:-3}
shift || true
UBIO_NEIGHBOURS_OUT=${UBIO_NEIGHBOURS_OUT:-$here} exec "$here/../2026-12-06-neighbours/run.sh" custom "$rounds" \
    --pressure cgroup --loads pgbench-ro,pgbench-rw,wrk --streams tar,image-cp \
    --modes plain,ubio-run,policy,own --lead-secs 3 "$@"
