#!/usr/bin/env bash
# One `ubio demo --pressure global` with the demo's default sizes, with a log of
# MemFree and the hot file's residency every 0.25 s (hot.log), through
# bench/pressure-run.sh. Usage: run.sh OUTDIR [demo args...]
# (UBIO_BIN_DIR: the binaries, default target/release; these runs used main 74e3282's.)
set -u
out=$1; shift
exec "$(dirname "$0")/../../pressure-run.sh" "$out" demo --pressure global "$@"
