#!/usr/bin/env bash
# The release matrix's /dev/shm read points (seq-read, 1, 2 and 4 streams,
# ext4 and xfs; 1 GiB under global pressure; WORKLOADS=seq-write for its
# write points, or both comma-separated) with two or more builds of
# ubio in turn: LABEL=BIN_DIR pairs (a directory holding ubio and
# ubio-bench). One whole matrix per build and turn, the builds of a turn in
# a random order, TURNS turns; each matrix has its own buffered, dontcache
# and odirect runs, so each build is compared with the modes run beside it.
# OUT: where the runs go (default: beside this script). Run it again to go
# on with what is not done. Root. Then
# bench/runs/2026-12-07-race-cost/compare.py OUT.
#
#   [FIRST_TURN=N] [WORKLOADS=...] [OUT=DIR] bench/runs/2026-12-07-settle-again/ab.sh TURNS LABEL=BIN_DIR...
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${OUT:-$here}")
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
turns=$1
shift
cd "$here/../../.."
for turn in $(seq "${FIRST_TURN:-1}" "$turns"); do
    for build in $(printf '%s\n' "$@" | shuf); do
        label=${build%%=*}
        echo "== turn $turn: $label (${build#*=}) $(date -u +%T)"
        # A point the balloon could not set up fails; the matrix, run again,
        # goes on with the points not done.
        for try in 1 2 3; do
            UBIO_BIN_DIR=${build#*=} "${prefix[@]}" bench/matrix.sh "$out/$label/turn$turn" \
                --preset release --targets ext4/shm,xfs/shm --threads 1,2,4 --rounds 1 \
                --workloads "${WORKLOADS:-seq-read}" && break
            echo "== turn $turn: $label: try $try left points not done"
        done
    done
done
