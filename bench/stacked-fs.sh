#!/usr/bin/env bash
# The page cache of the real file under overlayfs and FUSE (bindfs), cat/cp
# vs ubio cat/ubio cp, 4 GiB read and write; see bench/stacked_fs.py.
#
#   bench/stacked-fs.sh [SIZE_GIB=4] [ROUNDS=3] [OUT_DIR]
#
# Needs root, bindfs, python3 and 3 x SIZE_GIB free in target/. With OUT_DIR
# the output and every run (runs.json) are written there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size="${1:-4}"
rounds="${2:-3}"
out="${3:-}"
cargo build -q --release -p ubio-cli --bin ubio
dir=target/bench-stacked-fs
mkdir -p "$dir"
trap 'umount "$dir/ovl" "$dir/fuse" 2>/dev/null || true; rm -rf "$dir"' EXIT
args=(--dir "$dir" --ubio "$PWD/target/release/ubio" --size-gib "$size" --rounds "$rounds")
if [ -n "$out" ]; then
    mkdir -p "$out"
    { echo "\$ bench/stacked-fs.sh $*"; echo "kernel $(uname -r); $(nproc) CPUs"; } > "$out/output.txt"
    python3 bench/stacked_fs.py "${args[@]}" --json "$out/runs.json" 2>&1 | tee -a "$out/output.txt"
else
    python3 bench/stacked_fs.py "${args[@]}"
fi
