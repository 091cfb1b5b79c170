#!/usr/bin/env bash
# The demo's defaults (global pressure here) with `ubio` reading direct under the switch
# (UBIO_EXP_DIRECT_READS, experiment.patch) beside ubio:emulated without it.
#   demo.sh BIN_DIR OUT
set -u
bin=$1 out=$2
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=/work/demo-scratch; mkdir -p "$work"
UBIO_EXP_DIRECT_READS=1 UBIO_EXE=$bin/ubio "$bin/ubio-bench" demo --dir "$work" --out "$out/report" \
  --modes buffered,ubio,ubio:emulated > "$out/demo.txt" 2>&1
echo "exit $?" >> "$out/demo.txt"
rm -rf "$work"
