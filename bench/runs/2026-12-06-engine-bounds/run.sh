#!/usr/bin/env bash
# The engine's bounds for every program at every load (issue 38), with
# bench/bounds.py: ROUNDS rounds (default 50) of each (load, mode) of the
# modes that hold the bounds exactly (the daemon and `ubio run` with a
# device dirty limit), and COMPARE rounds (default 10) of the modes without
# it and of the daemon at nice -10 (as before issue 38); every (load, mode)
# round in a new random order. Then seed 004's dd demo (3.2 GiB from
# /dev/zero) SEED times (default 10) in each mode at no load. Writes
# runs.jsonl and summary.md here. A round that fails is said in runs.jsonl
# ("round_failed") and in the summary, and the run goes on. With STOP_AT
# (a time `date -d` reads) no round starts after it: the rounds left are
# counted in runs.jsonl ("rounds_skipped") and the summary. LOADS="none busy4"
# runs those loads only; OUT=DIR writes runs.jsonl and summary.md there
# (default: this directory). DEVICE_LIMIT=32M sets the device dirty limit of
# the -limited modes (default 64M, the cache bound).
#
#   [STOP_AT=TIME] [LOADS=...] [OUT=DIR] [DEVICE_LIMIT=SIZE] bench/runs/2026-12-06-engine-bounds/run.sh [ROUNDS] [COMPARE] [SEED]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=${OUT:-$here}
read -r -a loads <<< "${LOADS:-none busy4 busy8 writer}"
rounds=${1:-50}
compare=${2:-10}
seed=${3:-10}
stop_at=${STOP_AT:+$(date -d "$STOP_AT" +%s)}
skipped=0
work=$repo/target/bench-bounds
ubio=$repo/target/release/ubio
(cd "$repo" && nice -n 10 cargo build --release -p ubio-cli -p ubio-preload)
python3 "$repo/bench/bounds.py" prepare --dir "$work" --ubio "$ubio"
plan=()
for load in "${loads[@]}"; do
    for mode in policy-limited run-limited; do
        for _ in $(seq "$rounds"); do plan+=("$load $mode"); done
    done
    for mode in policy policy-nice run; do
        for _ in $(seq "$compare"); do plan+=("$load $mode"); done
    done
done
mapfile -t plan < <(printf '%s\n' "${plan[@]}" | shuf)
: > "$out/runs.jsonl"
round() {  # LOAD MODE [ARGS]: one round; a failure is recorded, not fatal
    local load=$1 mode=$2 rc=0
    shift 2
    if [ -n "$stop_at" ] && [ "$(date +%s)" -ge "$stop_at" ]; then
        skipped=$((skipped + 1))
        return
    fi
    python3 "$repo/bench/bounds.py" round --dir "$work" --ubio "$ubio" --jsonl "$out/runs.jsonl" \
        --load "$load" --mode "$mode" --device-limit "${DEVICE_LIMIT:-64M}" "$@" || rc=$?
    if [ "$rc" != 0 ]; then
        printf '{"round_failed": true, "load": "%s", "mode": "%s", "rc": %d, "args": "%s"}\n' \
            "$load" "$mode" "$rc" "$*" >> "$out/runs.jsonl"
    fi
}
echo "start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
n=0
for item in "${plan[@]}"; do
    read -r load mode <<< "$item"
    n=$((n + 1))
    echo "== $n of ${#plan[@]}: $load $mode"
    round "$load" "$mode"
done
for _ in $(seq "$seed"); do
    for mode in $(printf '%s\n' policy policy-limited run run-limited | shuf); do
        round none "$mode" --only "seed 004"
    done
done
if [ "$skipped" != 0 ]; then
    printf '{"rounds_skipped": %d, "stop_at": "%s"}\n' "$skipped" "$STOP_AT" >> "$out/runs.jsonl"
fi
echo "end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$repo/bench/bounds.py" summary --jsonl "$out/runs.jsonl" > "$out/summary.md"
cat "$out/summary.md"
