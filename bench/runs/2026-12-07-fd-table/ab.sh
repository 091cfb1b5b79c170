#!/usr/bin/env bash
# Two builds of ubio-bench (before and after a change to the library)
# interleaved: each turn runs every point with both, the builds in a random
# order, each run with its own buffered, dontcache and odirect rounds, so
# that each build's ubio is compared with the modes run beside it. Points:
# seq-read and seq-write, 1, 2 and 4 threads, 1 GiB, 1 MiB calls, ext4 on a
# loop device over /dev/shm, no memory pressure. Root. Then compare.py.
#
#   bench/runs/2026-12-07-fd-table/ab.sh OLD_BENCH NEW_BENCH [TURNS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
old=$(realpath "$1") new=$(realpath "$2")
for turn in $(seq 1 "${3:-3}"); do
    for build in $(printf 'old\nnew\n' | shuf); do
        bench=$old
        [ "$build" = new ] && bench=$new
        for workload in seq-read seq-write; do
            for threads in 1 2 4; do
                out="$here/$build/turn$turn/$workload-t$threads"
                mkdir -p "$(dirname "$out")"
                echo "== turn $turn: $build $workload t$threads $(date -u +%T)"
                "$bench" run --workload "$workload" --threads "$threads" --dataset 1G \
                    --block 1M --fs ext4 --backing shm --no-victim --rounds 3 \
                    --modes buffered,dontcache,odirect,ubio --out "$out" > "$out.log" 2>&1 ||
                    echo "== failed: $out.log"
            done
        done
    done
done
