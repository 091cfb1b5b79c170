#!/usr/bin/env bash
# The release matrix's /dev/shm points (seq-read and seq-write, 1, 2 and 4
# streams, ext4 and xfs; 1 GiB, 512 MiB of memory) with two builds of ubio in
# alternation: NEW (the streams of a device race together, race::Shared) and
# OLD (each stream races alone), one round of each per turn in a random
# order, ROUNDS turns (default 3). Each round is a whole matrix with its own
# buffered, dontcache and odirect runs, so each build is compared with the
# modes run beside it. Run it again to go on with what is not done. Root.
# Then compare.py.
#
#   NEW=target/release OLD=/tmp/old/target/release bench/runs/2026-12-07-shared-race/ab.sh [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
new=$(realpath "${NEW:?NEW: the directory of the new ubio and ubio-bench}")
old=$(realpath "${OLD:?OLD: the directory of the old ones}")
cd "$here/../../.."
for round in $(seq 1 "${1:-3}"); do
    for label in $(printf 'new\nold\n' | shuf); do
        bin=$new
        [ "$label" = old ] && bin=$old
        echo "== round $round: $label ($bin) $(date -u +%T)"
        # A point the balloon could not set up fails; the matrix, run again,
        # goes on with the points not done.
        for try in 1 2 3; do
            UBIO_BIN_DIR=$bin "${prefix[@]}" bench/matrix.sh "$here/$label/round$round" \
                --preset release --targets ext4/shm,xfs/shm --threads 1,2,4 --rounds 1 && break
            echo "== round $round: $label: try $try left points not done"
        done
    done
done
