#!/usr/bin/env bash
# One `ubio demo --pressure global` with the demo's default sizes, with a log of
# MemFree and the hot file's residency every 0.25 s. Usage: run.sh OUTDIR [demo args...]
set -u
out=$1; shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=/work/demo3-scratch; mkdir -p "$work"
(
  while :; do
    f=$(find "$work" -name hot -type f 2>/dev/null | head -1)
    h=; [ -n "$f" ] && h=$(fincore -b -n -o RES "$f" 2>/dev/null)
    echo "$(date +%s.%N | cut -c1-14) free_kib=$(awk '/MemFree/{print $2}' /proc/meminfo) hot=$h"
    sleep 0.25
  done
) > "$out/hot.log" &
logger=$!
cd /work/main
UBIO_EXE=/tmp/demo-bin/ubio /tmp/demo-bin/ubio-bench demo --pressure global --dir "$work" --out "$out/report" "$@" > "$out/demo.txt" 2>&1
rc=$?
kill $logger
rm -rf "$work"
echo "exit $rc" >> "$out/demo.txt"
