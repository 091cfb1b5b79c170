#!/usr/bin/env bash
# ubio's small-folio readahead beside PostgreSQL (pgbench -S; or LOADS, such
# as wrk for nginx) under global pressure: `ubio run -- cp` of a 4 GiB image
# with UBIO_SMALL_READAHEAD=never and when-fragmented (the default)
# alternating, ROUNDS pairs (default 3), the order within each pair random.
# Each run goes to abN-WHEN/ here (LOADS-abN-WHEN/ with LOADS), with the
# shim's log (shim.log: one line per file at close, saying whether the source
# was read ahead in small folios). Root; from anywhere.
#
#   bench/runs/2026-12-07-neighbours-fragmentation/small-readahead/ab.sh [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for i in $(seq 1 "${1:-3}"); do
    for when in $(printf 'never\nwhen-fragmented\n' | shuf); do
        out=$here/${LOADS:+$LOADS-}ab$i-$when
        mkdir -p "$out"
        rm -f "$out/shim.log"
        UBIO_SMALL_READAHEAD=$when UBIO_LOG=debug UBIO_LOG_FILE=$out/shim.log OUT=$out \
            LOADS=${LOADS:-pgbench-ro} MODES=ubio-run \
            flock /tmp/ubio-measure.lock "$here/../run.sh" default 1
    done
done
