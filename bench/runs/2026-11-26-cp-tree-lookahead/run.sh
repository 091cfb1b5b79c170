#!/usr/bin/env bash
# Is the streamed walk's short lookahead why `ubio cp -r` is slower than the
# planned walk right after a tree was removed (issue 24; ../2026-11-26-cp-tree)?
# Three ubio builds side by side, after-rm case only (the previous copy
# removed just before each run, as a backup rotation does), every round in a
# new random order (tree.py of ../2026-11-24-truth: 20,000 files of 1-63 KiB
# in 200 directories and 4 of 256 MiB, `cp -r` then `sync -f`):
#   before:  the planned walk (the whole tree listed first);
#   main:    the streamed walk, 34 copies in flight per worker;
#   ahead1k: main with 1024 copies in flight per worker.
#
#   bench/runs/2026-11-26-cp-tree-lookahead/run.sh BEFORE MAIN AHEAD1K [DIR] [ROUNDS]
#
# Run under the helpers' quiet lock. DIR (default target/bench-lookahead) holds the data.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir=${4:-target/bench-lookahead} rounds=${5:-5}
declare -A bin=([before]=$1 [main]=$2 [ahead1k]=$3)
modes=
for b in before main ahead1k; do
    mkdir -p "$dir/$b" && cp "${bin[$b]}" "$dir/$b/ubio"
    modes+="${modes:+,}ubio-cp@$b/ubio"
done
cd "$dir"
for b in before main ahead1k; do echo "$b: $("$b/ubio" --version)"; done | tee "$here/versions.txt"
python3 "$here/../2026-11-24-truth/tree.py" main/ubio . "$here/after-rm" --rounds "$rounds" \
    --seed 2623 --large-size 256 --modes "$modes" | tee "$here/after-rm.txt"
