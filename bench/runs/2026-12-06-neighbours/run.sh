#!/usr/bin/env bash
# Issue 39's run of `ubio-bench neighbours`: a PostgreSQL (pgbench) and an
# nginx (wrk, random files) of its own, each alone and beside streams of 4 GiB
# (4x the 1 GiB left), plain, under `ubio run`, under `ubio policy run` and
# with the tool's own option where it has one (dd's nocache for the image copy),
# ROUNDS rounds (default 3), each in a new random order. Writes neighbours.md,
# neighbours.html (the plots), runs.csv and seconds.csv here, and
# neighbours.json.gz and run.log.gz (bench/runs/README.md: raw records and logs
# gzip-compressed), or into $UBIO_NEIGHBOURS_OUT if set. Needs root and about
# 20 GiB free under target/. Extra arguments go to ubio-bench neighbours;
# UBIO_EXE, if set, is the ubio its ubio-run and policy modes run.
#
#   bench/runs/2026-12-06-neighbours/run.sh [ROUNDS] [args...]
#       the committed run (about 25 minutes on a 2-core machine): global
#       pressure only (a balloon leaves 1 GiB to the whole machine), pgbench -S
#       and wrk, beside tar of a 4 GiB tree and cp of a 4 GiB image; 48 runs
#   bench/runs/2026-12-06-neighbours/run.sh full [ROUNDS] [args...]
#       everything (about 2.5-3 hours): both pressures (the balloon, and memory
#       cgroups of 512 MiB each for the service and the stream), pgbench -S and
#       read-write and wrk, beside tar and restic backups of the tree and rsync
#       and cp of the image; 252 runs
#   bench/runs/2026-12-06-neighbours/run.sh custom [ROUNDS] args...
#       only what the arguments say (--pressure, --loads, --streams...): how
#       later runs (bench/runs/2026-12-07-neighbours) call it
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
what=reduced
if [ "${1:-}" = full ] || [ "${1:-}" = custom ]; then
    what=$1
    shift
fi
rounds=${1:-3}
shift || true
if [ "$what" = full ]; then
    set -- --pressure global,cgroup --loads pgbench-ro,pgbench-rw,wrk \
        --streams tar,restic,rsync,image-cp --modes plain,ubio-run,policy,own --lead-secs 5 "$@"
elif [ "$what" = reduced ]; then
    set -- --pressure global --loads pgbench-ro,wrk --streams tar,image-cp \
        --modes plain,ubio-run,policy,own --lead-secs 3 "$@"
fi
out=${UBIO_NEIGHBOURS_OUT:-$here}
mkdir -p "$out"
cd "$repo"
scripts/install-deps.sh postgresql nginx wrk restic rsync
nice -n 10 cargo build --release -p ubio-bench -p ubio-cli -p ubio-preload
# The scratch directory's parents must be searchable by the user postgres.
scratch=$repo/target/neighbours-scratch
mkdir -p "$scratch"
chmod 755 "$repo/target" "$scratch"
UBIO_EXE=${UBIO_EXE:-$repo/target/release/ubio} target/release/ubio-bench neighbours \
    --memory 1G --data 4G --rounds "$rounds" --alone-secs 20 \
    --dir "$scratch" --out "$out" "$@" 2>&1 | tee "$out/run.log"
rmdir "$scratch" 2>/dev/null || true
gzip -9f "$out/neighbours.json" "$out/run.log"
