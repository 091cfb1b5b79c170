#!/usr/bin/env bash
# `ubio-bench matrix --out OUT ARGS` with the binaries of UBIO_BIN_DIR (default
# target/release, built if missing): the driver of the matrices in bench/runs
# (2026-11-26-matrix-shm, -matrix-disk, 2026-11-27-read-gap's m1), each of which
# gives its axes in its run.sh. Run it again to go on with the points not done.
#
#   bench/matrix.sh OUT [ubio-bench matrix ARGS...]
#
# Needs root.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/matrix.sh OUT [ubio-bench matrix ARGS...]" >&2; exit 2; }
out=$(realpath -m "$1")
shift
bin=
[ -z "${UBIO_BIN_DIR:-}" ] || bin=$(cd "$UBIO_BIN_DIR" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "$bin" ]; then
    [ -x target/release/ubio-bench ] || cargo build --release -p ubio-cli -p ubio-bench
    bin=$PWD/target/release
fi
UBIO_EXE=$bin/ubio exec "$bin/ubio-bench" matrix --out "$out" "$@"
