#!/usr/bin/env bash
# One `ubio-bench demo` or `ubio-bench run` with a log of the machine's memory
# beside it: the driver of the global-pressure runs in bench/runs (demo-3,
# demo-global, direct-reads, read-gap's demo, fragmented), each of which gives
# its own arguments in its run.sh.
#
#   bench/pressure-run.sh OUT demo|run [ubio-bench ARGS...]
#
# It runs `ubio-bench demo ARGS` (or `ubio-bench run ARGS`) with --dir SCRATCH
# and --out OUT/report, its output in OUT/demo.txt (OUT/run.txt), then "exit N".
#
# Environment:
#   UBIO_BIN_DIR  where ubio and ubio-bench are (default target/release; built if
#                 missing)
#   SCRATCH       the scratch directory (default target/bench-scratch, on the root
#                 filesystem), removed at the end
#   MEMLOG        hot (default): MemFree and the hot file's resident bytes (fincore)
#                 every 0.25 s, in OUT/hot.log;
#                 buddy: /proc/buddyinfo's zone Normal and the kswapd and compaction
#                 counters of /proc/vmstat every second, in OUT/mem.log;
#                 none: no log
# Anything else in the environment reaches ubio-bench (for example the
# experiments' UBIO_EXP_DIRECT_READS and UBIO_BALLOON_FRAGMENT_MIB of a build
# with their patch). Needs root.
set -u
[ $# -ge 2 ] || { echo "usage: bench/pressure-run.sh OUT demo|run [ubio-bench ARGS...]" >&2; exit 2; }
out=$1 cmd=$2
shift 2
case $cmd in
demo) text=demo.txt ;;
run) text=run.txt ;;
*) echo "bench/pressure-run.sh: demo or run, not '$cmd'" >&2; exit 2 ;;
esac
mkdir -p "$out"; out=$(cd "$out" && pwd)
bin=
[ -z "${UBIO_BIN_DIR:-}" ] || bin=$(cd "$UBIO_BIN_DIR" && pwd) || exit 2
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "$bin" ]; then
    [ -x target/release/ubio-bench ] || cargo build --release -p ubio-cli -p ubio-bench || exit 1
    bin=$PWD/target/release
fi
work=$(realpath -m "${SCRATCH:-target/bench-scratch}"); mkdir -p "$work"
logger=
case ${MEMLOG:-hot} in
hot)
    (
      while :; do
        f=$(find "$work" -name hot -type f 2>/dev/null | head -1)
        h=; [ -n "$f" ] && h=$(fincore -b -n -o RES "$f" 2>/dev/null)
        echo "$(date +%s.%N | cut -c1-14) free_kib=$(awk '/MemFree/{print $2}' /proc/meminfo) hot=$h"
        sleep 0.25
      done
    ) > "$out/hot.log" &
    logger=$! ;;
buddy)
    (
      while :; do
        echo "$(date +%s.%N | cut -c1-14) normal=$(awk '/Normal/{$1=$2=$3=$4="";print}' /proc/buddyinfo | xargs | tr ' ' ,)" \
          "$(awk '/^(pgscan_kswapd|pgsteal_kswapd|compact_stall|compact_fail|compact_success|kswapd_high_wmark_hit_quickly|pageoutrun) /{printf "%s=%s ",$1,$2}' /proc/vmstat)"
        sleep 1
      done
    ) > "$out/mem.log" &
    logger=$! ;;
none) ;;
*) echo "bench/pressure-run.sh: MEMLOG is hot, buddy or none" >&2; exit 2 ;;
esac
UBIO_EXE=$bin/ubio "$bin/ubio-bench" "$cmd" --dir "$work" --out "$out/report" "$@" > "$out/$text" 2>&1
rc=$?
[ -z "$logger" ] || kill "$logger"
rm -rf "$work"
echo "exit $rc" >> "$out/$text"
exit "$rc"
