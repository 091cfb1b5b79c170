#!/usr/bin/env bash
# Issue 24's benchmark: `ubio cp -r` before the GNU cp changes (the build of
# fef5c87, main before the merge of cpclean 5845570) against after (the
# build under test), GNU cp beside them, to durability (`sync -f` ends each
# run), every round in a new random order (bench/cp-tree.sh, with
# bench/runs/2026-11-24-truth/tree.py):
#   tree: 20,000 files of 1-63 KiB in 200 directories and 4 of 256 MiB
#         (the tree of bench/runs/2026-11-24-truth), 5 rounds;
#   4g:   one file of 4 GiB (in a directory, copied with -r), 5 rounds.
#
#   bench/runs/2026-11-26-cp-before-after/run.sh BEFORE_UBIO AFTER_UBIO [DIR]
#
# The two binaries are copied to DIR/before/ubio and DIR/after/ubio (the
# modes' names); DIR (default target/bench-cp, on the disk) holds the data.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
drive=$here/../../cp-tree.sh
before=$1 after=$2 dir=${3:-target/bench-cp}
"$drive" "$dir" "$here/tree" before="$before" after="$after" -- \
    --rounds 5 --seed 2611 --large-size 256
"$drive" "$dir" "$here/4g" before="$before" after="$after" -- \
    --rounds 5 --seed 2612 --small 0 --large 1 --large-size 4096
