#!/usr/bin/env bash
# Issue 39's open question: why the service's set is pushed out of the page
# cache beside a stream under ubio (bench/runs/2026-12-07-neighbours-policy,
# "kswapd woken for 2 MiB blocks") and not beside the same stream plain. Runs
# nginx (wrk; or LOADS, then in VARIANT-LOADS, and -TAG if set; or in OUT) beside cp of a 4 GiB image under
# global pressure, plain and under `ubio run` (or MODES), ROUNDS rounds (default 2), while sample.sh
# records the free blocks by order (/proc/buddyinfo), the watermark boost
# (/proc/zoneinfo) and reclaim and compaction counters (/proc/vmstat) every
# 0.5 s; analyse.py lines them up with the runs. VARIANT names the output
# directory and the kernel setting tried:
#   default   the machine as it is
#   noboost   vm.watermark_boost_factor=0 for the run (put back after)
#   ra128     the data's disk with 128 KiB of readahead, as most distributions
#             set for NVMe (this VM's disk has 8 MiB: readahead's folios then
#             grow to 2 MiB), put back after
#
#   bench/runs/2026-12-07-neighbours-fragmentation/run.sh VARIANT [ROUNDS] [args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
variant=${1:?VARIANT: default, noboost or ra128}
rounds=${2:-2}
shift 2 || shift $#
out=${OUT:-$here/$variant${LOADS:+-$LOADS}${TAG:+-$TAG}}
mkdir -p "$out"
boost=/proc/sys/vm/watermark_boost_factor
old_boost=$(cat "$boost")
# The disk under target/, where the harness keeps its data.
repo=$(cd "$here/../../.." && pwd)
disk=/sys/class/block/$(basename "$(findmnt -no SOURCE --target "$repo/target")")
[ -e "$disk/partition" ] && disk=$(dirname "$(readlink -f "$disk")")
readahead=$disk/queue/read_ahead_kb
old_readahead=$(cat "$readahead")
sampler=
cleanup() {
    [ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
    echo "$old_boost" >"$boost"
    echo "$old_readahead" >"$readahead"
}
trap cleanup EXIT
case $variant in
default) ;;
noboost) echo 0 >"$boost" ;;
ra128) echo 128 >"$readahead" ;;
*)
    echo "unknown VARIANT $variant" >&2
    exit 2
    ;;
esac
"$here/sample.sh" >"$out/samples.tsv" &
sampler=$!
# The harness's first log line dates its runs (analyse.py).
rm -f "$out/run.log" "$out/run.log.gz" "$out/started"
(
    until [ -s "$out/run.log" ]; do sleep 0.05; done
    date +%s.%N >"$out/started"
) &
UBIO_NEIGHBOURS_OUT=$out "$here/../2026-12-06-neighbours/run.sh" custom "$rounds" \
    --pressure global --loads "${LOADS:-wrk}" --streams image-cp --modes "${MODES:-plain,ubio-run}" \
    --lead-secs 3 "$@"
kill "$sampler"
sampler=
gzip -9f "$out/samples.tsv"
python3 "$here/analyse.py" "$out" | tee "$out/analysis.txt"
