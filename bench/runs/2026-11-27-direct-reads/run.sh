#!/usr/bin/env bash
# ubio demo under global pressure with the direct backend beside ubio (emulated) and buffered,
# with a log of MemFree and the hot file's residency every 0.25 s (hot.log), through
# bench/pressure-run.sh. Usage: run.sh OUTDIR [demo args...]
# (UBIO_BIN_DIR: the binaries, default target/release.)
set -u
out=$1; shift
exec "$(dirname "$0")/../../pressure-run.sh" "$out" demo --pressure global "$@"
