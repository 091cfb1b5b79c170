#!/usr/bin/env bash
# Is the streamed walk's short lookahead why `ubio cp -r` is slower than the
# planned walk right after a tree was removed (issue 24; ../2026-11-26-cp-tree)?
# Three ubio builds side by side, after-rm case only (the previous copy
# removed just before each run, as a backup rotation does), every round in a
# new random order (bench/cp-tree.sh; tree.py of ../2026-11-24-truth: 20,000
# files of 1-63 KiB in 200 directories and 4 of 256 MiB, `cp -r` then `sync -f`):
#   before:  the planned walk (the whole tree listed first);
#   main:    the streamed walk, 34 copies in flight per worker;
#   ahead1k: main with 1024 copies in flight per worker.
#
#   bench/runs/2026-11-26-cp-tree-lookahead/run.sh BEFORE MAIN AHEAD1K [DIR] [ROUNDS]
#
# Run it alone on the machine. DIR (default target/bench-lookahead) holds the data.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir=${4:-target/bench-lookahead} rounds=${5:-5}
MODES=ubio-cp@before/ubio,ubio-cp@main/ubio,ubio-cp@ahead1k/ubio TREE_UBIO=main \
    "$here/../../cp-tree.sh" "$dir" "$here/after-rm" before="$1" main="$2" ahead1k="$3" -- \
    --rounds "$rounds" --seed 2623 --large-size 256
