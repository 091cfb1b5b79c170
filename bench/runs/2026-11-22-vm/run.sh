#!/usr/bin/env bash
# The full run committed here: the seed suite, then every in-process mode
# reading and writing, and every copy tool, on ext4 over a loop device on the
# disk (loop direct I/O), in a 1 GiB memory cgroup next to a 256 MiB victim.
# About 30 minutes on a 2-core VM; needs root and ~20 GiB free disk and RAM.
#
#   bench/runs/2026-11-22-vm/run.sh [OUT]    (OUT defaults to this directory)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
cd "$here/../../.."
cargo build --release -p ubio-cli -p ubio-preload -p ubio-bench
ubio=target/release/ubio
common=(--fs ext4 --backing disk --limit 1G --victim 256M --rounds 3)

$ubio bench suite seeds --limit 1G --out "$out/seeds" > "$out/seeds.txt"
$ubio bench run --workload seq-read --dataset 8G "${common[@]}" --fio --out "$out/seq-read" > "$out/seq-read.txt"
$ubio bench run --workload seq-write --dataset 8G "${common[@]}" --fio --out "$out/seq-write" > "$out/seq-write.txt"
$ubio bench run --workload copy --dataset 4G "${common[@]}" --verify --out "$out/copy" > "$out/copy.txt"
