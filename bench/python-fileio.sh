#!/usr/bin/env bash
# The builtin open()/io.FileIO against ubio.open()/ubio.FileIO: readall,
# read(64 KiB), read(1 MiB), readinto, write, on cold 100 MB and 4 GiB
# files, every round in a new random order; see bench/python_fileio.py.
#
#   bench/python-fileio.sh [--no-build] [OUT_DIR] [SIZES=100MB,4GiB] [ROUNDS=7,3]
#
# Needs the venv of scripts/install-deps.sh (maturin) and twice the largest
# size free in target/. With OUT_DIR the output and every run (runs.json)
# are written there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=1
if [ "${1:-}" = "--no-build" ]; then
    build=0
    shift
fi
out="${1:-}"
sizes="${2:-100MB,4GiB}"
rounds="${3:-7,3}"
pyenv="${UBIO_PYENV:-$HOME/.cache/ubio/pyenv}"
work=target/bench-python-fileio
site="$work/site"
if [ "$build" -eq 1 ]; then
    rm -rf "$work/wheels" "$site" && mkdir -p "$work/wheels"
    "$pyenv/bin/maturin" build --release --quiet --interpreter "$pyenv/bin/python" \
        --manifest-path python/Cargo.toml --target-dir target/maturin --out "$work/wheels"
    "$pyenv/bin/python" -m pip install --quiet --no-deps --no-index --target "$site" "$work"/wheels/*.whl
fi
mkdir -p "$work/data"
trap 'rm -rf "$work/data"' EXIT
args=(--dir "$work/data" --sizes "$sizes" --rounds "$rounds")
if [ -n "$out" ]; then
    mkdir -p "$out"
    { echo "\$ bench/python-fileio.sh $*"; echo "kernel $(uname -r); $(nproc) CPUs; $("$pyenv/bin/python" --version)"; } > "$out/output.txt"
    PYTHONPATH="$site" "$pyenv/bin/python" bench/python_fileio.py "${args[@]}" --json "$out/runs.json" 2>&1 | tee -a "$out/output.txt"
else
    PYTHONPATH="$site" "$pyenv/bin/python" bench/python_fileio.py "${args[@]}"
fi
