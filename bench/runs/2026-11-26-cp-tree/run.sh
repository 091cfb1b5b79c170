#!/usr/bin/env bash
# Issue 24's tree benchmark again, with the fix for the slowdown after a
# removal (the destination not looked up in a directory the copy just made):
# `cp -r` of bench/runs/2026-11-24-truth's tree (20,000 files of 1-63 KiB in
# 200 directories and 4 of 256 MiB, 1.73 GB) to durability (`sync -f` ends
# each run), GNU cp 9.1 and three ubio builds side by side, every round in a
# new random order (bench/cp-tree.sh), in two cases:
#   fresh:   every run into a destination of its own, nothing removed
#            before it (tree.py --fresh);
#   after-rm: the previous run's copy removed (rm -rf, sync -f) just before
#            each run, as a backup rotation does.
#
#   bench/runs/2026-11-26-cp-tree/run.sh CASE BEFORE MAIN FIXED [DIR] [ROUNDS]
#
# With AHEAD=BINARY in the environment, a fifth mode: that build (see
# ahead.patch) run with UBIO_CP_AHEAD=100000; MODES=a,b,... picks modes
# (default all) and TAG names the output (default CASE).
#
# CASE: fresh or after-rm. BEFORE, MAIN, FIXED: ubio binaries, copied to
# DIR/{before,main,fixed}/ubio (the modes' names). DIR (default
# target/bench-cp24, on the disk) holds the data. Each case is one call, run
# alone on the machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case=$1 dir=${5:-target/bench-cp24} rounds=${6:-5}
builds=(before="$2" main="$3" fixed="$4")
if [ -n "${AHEAD:-}" ]; then
    builds+=(ahead="$AHEAD")
    export UBIO_CP_AHEAD=100000
fi
case $case in
fresh) extra=(--fresh) seed=2621 ;;
after-rm) extra=() seed=2622 ;;
*) echo "run.sh: CASE is fresh or after-rm" >&2; exit 2 ;;
esac
TREE_UBIO=fixed "$here/../../cp-tree.sh" "$dir" "$here/${TAG:-$case}" "${builds[@]}" -- \
    --rounds "$rounds" --seed "$seed" --large-size 256 "${extra[@]}"
