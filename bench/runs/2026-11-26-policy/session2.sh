#!/usr/bin/env bash
# Session 2 of bench/runs/2026-11-26-policy, as it ran (05:07-05:55 UTC):
# no build (the lead's CI held the machine), the binaries of main's
# target/release copied first to target/bench-bin/main-5845570-dirty/
# (ubio, ubio-bench, libubio_preload.so); each experiment-round under the
# machine's lock, `quiet`, given here as UBIO_BENCH_PREFIX (retried if it
# gives up: 75; without a prefix each runs at once), skipped once past its
# cutoff so that the write-up met the session's deadline (06:10). Round 1
# adds dd and cost to session 1's container and operator; rounds 2 and 3 run
# all four. The cutoffs are that morning's clock times: a run today needs its own.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
R=bench/runs/2026-11-26-policy
D=target/bench-policy
B=target/bench-bin/main-5845570-dirty
out=$R/output.txt
# latest start (epoch s) per experiment, so the last round ends by ~06:02
declare -A LATEST=([dd]=$(date -ud 05:58 +%s) [container]=$(date -ud 05:58 +%s) [cost]=$(date -ud 05:57 +%s) [operator]=$(date -ud 05:56 +%s))
one() {
    local round=$1 exp=$2
    while :; do
        echo "== round $round: $exp queued $(date -u +%H:%M:%S)" | tee -a $out
        "${prefix[@]}" bash -c '
            [ "$(date +%s)" -le "$1" ] || { echo "== skipped: past the cutoff $(date -u +%H:%M:%S)"; exit 99; }
            echo "== started $(date -u +%H:%M:%S), load $(cut -d" " -f1-3 /proc/loadavg)"
            python3 bench/policy.py round --dir "$2" --ubio "$3/ubio" --jsonl "$4/runs.jsonl" --exp "$5"
            rc=$?; echo "== ended $(date -u +%H:%M:%S) rc $rc"; exit $rc' \
            quiet "${LATEST[$exp]}" "$D" "$B" "$R" "$exp" 2>&1 | tee -a $out
        rc=${PIPESTATUS[0]}
        [ "$rc" -eq 75 ] && { echo "== quiet gave up (75), again" | tee -a $out; continue; }
        return $rc
    done
}
echo "== session 2 $(date -u +%H:%M:%S): $(cat $B/VERSION), copied from main's target/release at 05:07 UTC" | tee -a $out
for exp in $(printf '%s\n' dd cost | shuf); do one 1 $exp; done
for round in 2 3; do
    for exp in $(printf '%s\n' container operator dd cost | shuf); do one $round $exp; done
done
echo "== session 2 done $(date -u +%H:%M:%S)" | tee -a $out
# Added at 05:51, after round 3: the operator's shuffle had put `on` first in
# every round so far (order and mode confounded for the hot reader): one more
# operator round (random order again), its cutoff unchanged.
one 4 operator
echo "== session 2, round 4 done $(date -u +%H:%M:%S)" | tee -a $out
