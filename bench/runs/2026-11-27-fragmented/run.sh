#!/usr/bin/env bash
# seq-read under global pressure, the balloon's free memory left whole or in single pages
# (UBIO_BALLOON_FRAGMENT_MIB), `ubio` reading direct under reclaim (UBIO_EXP_DIRECT_READS)
# beside `ubio:emulated` and buffered, with /proc/buddyinfo and kswapd/compaction counters
# logged each second (mem.log), through bench/pressure-run.sh.
# Usage: run.sh BIN_DIR OUTDIR FRAGMENT_MIB [ubio-bench run args...]
# (BIN_DIR: ubio and ubio-bench built with experiment.patch.)
set -u
bin=$1 out=$2 frag=$3; shift 3
UBIO_BALLOON_FRAGMENT_MIB=$frag UBIO_EXP_DIRECT_READS=1 UBIO_BIN_DIR=$bin MEMLOG=buddy \
  exec "$(dirname "$0")/../../pressure-run.sh" "$out" run --workload seq-read --pressure global "$@"
