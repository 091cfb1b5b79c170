#!/usr/bin/env bash
# seq-read under global pressure, the balloon's free memory left whole or in single pages
# (UBIO_BALLOON_FRAGMENT_MIB), `ubio` reading direct under reclaim (UBIO_EXP_DIRECT_READS)
# beside `ubio:emulated` and buffered, with /proc/buddyinfo and kswapd/compaction counters
# logged each second. Usage: run.sh BIN_DIR OUTDIR FRAGMENT_MIB [ubio-bench run args...]
set -u
bin=$1 out=$2 frag=$3; shift 3
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=/work/frag-scratch; mkdir -p "$work"
(
  while :; do
    echo "$(date +%s.%N | cut -c1-14) normal=$(awk '/Normal/{$1=$2=$3=$4="";print}' /proc/buddyinfo | xargs | tr ' ' ,)" \
      "$(awk '/^(pgscan_kswapd|pgsteal_kswapd|compact_stall|compact_fail|compact_success|kswapd_high_wmark_hit_quickly|pageoutrun) /{printf "%s=%s ",$1,$2}' /proc/vmstat)"
    sleep 1
  done
) > "$out/mem.log" &
logger=$!
UBIO_BALLOON_FRAGMENT_MIB=$frag UBIO_EXP_DIRECT_READS=1 UBIO_EXE=$bin/ubio "$bin/ubio-bench" run \
  --workload seq-read --pressure global --dir "$work" --out "$out/report" "$@" > "$out/run.txt" 2>&1
rc=$?
kill $logger
rm -rf "$work"
echo "exit $rc" >> "$out/run.txt"
