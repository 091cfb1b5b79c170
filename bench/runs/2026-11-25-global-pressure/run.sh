#!/usr/bin/env bash
# The run committed here: seeds 000 (two-thread 32 KiB reads; 64 KiB writes
# to a slow device) and 001 (64 KiB reads of 10x memory) under global memory
# pressure: no memory cgroup; a balloon of locked memory, held by a child
# process, leaves 2 GiB of the machine's memory available (never less than
# a 1 GiB floor), so that kswapd reclaims for the whole machine as on the
# seeds' phone and server. Every round in a new random order; every
# per-second sample printed (-v) and kept in the reports.
#
#   bench/runs/2026-11-25-global-pressure/run.sh [OUT]   (OUT defaults to this directory)
#
# SEED=N repeats the orders of an earlier run (default: from the clock).
# NO_BUILD=1 skips the build (when the binaries are built already, for
# example before taking a lock that keeps the machine quiet).
# Needs root, ~24 GiB of memory available to lock and ~40 GiB free on the
# disk for the loop devices' backing files. About 12 minutes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
cd "$here/../../.."
[ -n "${NO_BUILD:-}" ] || cargo build --release -p ubio-cli -p ubio-bench
ubio="$PWD/target/release/ubio"
seed="${SEED:-$(date +%s)}"
mkdir -p "$out"
echo "seed $seed" | tee "$out/seed.txt"
"$ubio" bench suite seeds --only 000,001 --pressure global --limit 2G --slow-device 300 \
    --rounds 2 --seed "$seed" --out "$out/seeds" -v \
    > "$out/seeds.txt" 2> >(tee "$out/seeds.log" >&2)
# Buffered writes as fast as the disk takes them (seed 000's write table is
# kswapd under buffered writes; the suite's experiment throttles the device
# to 300 MB/s, which keeps reclaim slow), next to a process re-reading a
# 256 MiB hot file: its reads per second are the victim column.
"$ubio" bench run --workload seq-write --block 64K --dataset 8G --fs ext4 --backing disk \
    --pressure global --limit 2G --victim 256M --modes buffered,dontcache,ubio \
    --rounds 2 --seed "$seed" --out "$out/writes" -v \
    > "$out/writes.txt" 2> >(tee "$out/writes.log" >&2)
