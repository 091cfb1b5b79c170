#!/usr/bin/env bash
# The demo's defaults (global pressure here) with `ubio` reading direct under the switch
# (UBIO_EXP_DIRECT_READS, experiment.patch) beside ubio:emulated without it, through
# bench/pressure-run.sh (no memory log).
#   demo.sh BIN_DIR OUT
set -u
bin=$1 out=$2
UBIO_EXP_DIRECT_READS=1 UBIO_BIN_DIR=$bin MEMLOG=none \
  exec "$(dirname "$0")/../../pressure-run.sh" "$out" demo --modes buffered,ubio,ubio:emulated
