#!/usr/bin/env bash
# The engine's output pages dropped when their writeback completes, before
# and after (issue 38): dd bs=1M count=1024 (the one program whose output's
# clean pages went past the 64 MiB bound at no load) followed by the
# daemon and by `ubio run`, both with the device dirty limit, ROUNDS times
# each (default 50) with the engine of BEFORE and of AFTER (two `ubio`
# binaries), every (binary, mode) round in one random order, at no load.
# Writes runs-before.jsonl, runs-after.jsonl and summary.md to OUT (default
# this directory).
#
#   bench/runs/2026-12-06-written-back-drops/run.sh BEFORE AFTER [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=${OUT:-$here}
before=$1 after=$2 rounds=${3:-50}
work=$repo/target/bench-bounds
python3 "$repo/bench/bounds.py" prepare --dir "$work" --ubio "$after"
plan=()
for engine in before after; do
    for mode in policy-limited run-limited; do
        for _ in $(seq "$rounds"); do plan+=("$engine $mode"); done
    done
done
mapfile -t plan < <(printf '%s\n' "${plan[@]}" | shuf)
: > "$out/runs-before.jsonl"
: > "$out/runs-after.jsonl"
echo "start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before: $("$before" --version); after: $("$after" --version)"
for item in "${plan[@]}"; do
    read -r engine mode <<< "$item"
    ubio=$before
    [ "$engine" = after ] && ubio=$after
    python3 "$repo/bench/bounds.py" round --dir "$work" --ubio "$ubio" \
        --jsonl "$out/runs-$engine.jsonl" --load none --mode "$mode" --only "dd bs=1M" ||
        printf '{"round_failed": true, "mode": "%s"}\n' "$mode" >> "$out/runs-$engine.jsonl"
done
echo "end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
{
    for engine in before after; do
        echo "## $engine"
        echo
        python3 "$repo/bench/bounds.py" summary --jsonl "$out/runs-$engine.jsonl"
        echo
    done
} > "$out/summary.md"
