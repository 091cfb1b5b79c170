#!/usr/bin/env bash
# The engine's bounds for every program at every load (issue 38), with
# bench/bounds.py: ROUNDS rounds (default 50) of each (load, mode) of the
# modes that hold the bounds exactly (the daemon and `ubio run` with a
# device dirty limit), and COMPARE rounds (default 10) of the modes without
# it and of the daemon at nice -10 (as before issue 38); every (load, mode)
# round in a new random order. Then seed 004's dd demo (3.2 GiB from
# /dev/zero) 10 times in each mode at no load. Writes runs.jsonl and
# summary.md here.
#
#   bench/runs/2026-12-06-engine-bounds/run.sh [ROUNDS] [COMPARE]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
rounds=${1:-50}
compare=${2:-10}
work=$repo/target/bench-bounds
ubio=$repo/target/release/ubio
(cd "$repo" && cargo build --release -p ubio-cli -p ubio-preload)
python3 "$repo/bench/bounds.py" prepare --dir "$work" --ubio "$ubio"
plan=()
for load in none busy4 busy8 writer; do
    for mode in policy-limited run-limited; do
        for _ in $(seq "$rounds"); do plan+=("$load $mode"); done
    done
    for mode in policy policy-nice run; do
        for _ in $(seq "$compare"); do plan+=("$load $mode"); done
    done
done
mapfile -t plan < <(printf '%s\n' "${plan[@]}" | shuf)
: > "$here/runs.jsonl"
n=0
for item in "${plan[@]}"; do
    read -r load mode <<< "$item"
    n=$((n + 1))
    echo "== $n of ${#plan[@]}: $load $mode"
    python3 "$repo/bench/bounds.py" round --dir "$work" --ubio "$ubio" --jsonl "$here/runs.jsonl" \
        --load "$load" --mode "$mode"
done
for _ in $(seq 10); do
    for mode in $(printf '%s\n' policy policy-limited run run-limited | shuf); do
        python3 "$repo/bench/bounds.py" round --dir "$work" --ubio "$ubio" --jsonl "$here/runs.jsonl" \
            --load none --mode "$mode" --only "seed 004"
    done
done
python3 "$repo/bench/bounds.py" summary --jsonl "$here/runs.jsonl" > "$here/summary.md"
cat "$here/summary.md"
