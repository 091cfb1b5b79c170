#!/usr/bin/env bash
# ubio demo under global pressure with the direct backend beside ubio (emulated) and buffered,
# with a log of MemFree and the hot file's residency every 0.25 s. Usage: run.sh OUTDIR [demo args...]
set -u
out=$1; shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=/work/demo-scratch; mkdir -p "$work"
(
  while :; do
    f=$(find "$work" -name hot -type f 2>/dev/null | head -1)
    h=; [ -n "$f" ] && h=$(fincore -b -n -o RES "$f" 2>/dev/null)
    echo "$(date +%s.%N | cut -c1-14) free_kib=$(awk '/MemFree/{print $2}' /proc/meminfo) hot=$h"
    sleep 0.25
  done
) > "$out/hot.log" &
logger=$!
cd "$(dirname "$0")/../../.."
UBIO_EXE=target/release/ubio target/release/ubio-bench demo --pressure global --dir "$work" --out "$out/report" "$@" > "$out/demo.txt" 2>&1
rc=$?
kill $logger
rm -rf "$work"
echo "exit $rc" >> "$out/demo.txt"
