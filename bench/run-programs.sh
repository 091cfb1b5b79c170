#!/usr/bin/env bash
# About 19 unmodified programs (coreutils, compressors, interpreters, a static
# Go copy, a static musl stdio copy, a pipeline, and copies the kernel makes
# in calls that move no position: Go's io.Copy, copy_file_range, sendfile,
# splice) on a big file, with and without `ubio run`: wall time, CPU of the
# whole tree, ubio's own (engine) CPU, peak page cache of the data files;
# ROUNDS rounds in random order, medians [min-max]. See bench/run_programs.py.
# The runs of bench/runs/*-run-programs and -kernel-copies call it from their
# run.sh with their own parameters.
#
#   bench/run-programs.sh [SIZE_GIB=4] [ROUNDS=3]
#
# Steps: build (cargo build --release -p ubio-cli -p ubio-preload), prepare the
# data in target/bench-run-programs (SIZE_GIB of text, its zstd, the static
# Go and musl programs), copy the binaries to target/bench-run-programs/bin (so
# that builds between rounds cannot change them), ROUNDS rounds, the summary.
#
# Environment:
#   JSONL=FILE     where every run goes (default target/bench-run-programs/runs.jsonl;
#                  emptied first)
#   ONLY=TEXT      only the programs whose name holds TEXT (e.g. "kernel copy")
#   MODES=M,...    the modes of a round (default plain,backed,ubio)
#   UBIO=PATH      the ubio to measure, its libubio_preload.so beside it (default: this
#                  tree's build, copied as above)
#   NO_BUILD=1     no build; NO_PREPARE=1 the data is there already; NO_SUMMARY=1
#   UBIO_BENCH_PREFIX="CMD ARGS"  a command each round runs under (for example a lock
#                  that keeps a shared machine quiet while it measures); default none
#
# Needs root, go, musl-gcc and zstd (scripts/install-deps.sh), SIZE_GIB x 3 free in
# target/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size="${1:-4}"
rounds="${2:-3}"
dir=target/bench-run-programs
py=bench/run_programs.py
jsonl="${JSONL:-$dir/runs.jsonl}"
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
[ -n "${NO_BUILD:-}" ] || cargo build --release -p ubio-cli -p ubio-preload --bins
ubio="${UBIO:-}"
if [ -z "$ubio" ]; then
    mkdir -p "$dir/bin"
    cp target/release/ubio target/release/libubio_preload.so "$dir/bin/"
    ubio=$dir/bin/ubio
fi
[ -n "${NO_PREPARE:-}" ] || python3 "$py" prepare --dir "$dir" --size-gib "$size" --ubio "$ubio"
args=(--dir "$dir" --ubio "$ubio" --jsonl "$jsonl")
[ -z "${ONLY:-}" ] || args+=(--only "$ONLY")
[ -z "${MODES:-}" ] || args+=(--modes "$MODES")
mkdir -p "$(dirname "$jsonl")"
rm -f "$jsonl"
for round in $(seq "$rounds"); do
    echo "== round $round $(date -u +%H:%M:%S)"
    "${prefix[@]}" python3 "$py" round "${args[@]}"
done
[ -n "${NO_SUMMARY:-}" ] || python3 "$py" summary --jsonl "$jsonl"
