#!/usr/bin/env bash
# The release matrix extended (issue 37): seq-write and seq-read, 1, 2 and 4
# threads, twice the memory the run may use (512 MiB), buffered, dontcache,
# odirect and ubio (auto: the emulated backend's race between the page cache
# and O_DIRECT), on ext4 and xfs over /dev/shm (the fastest device here) and
# ext4 on the disk; 3 rounds per point, each in a new random order, the points
# in a random order. Run it again to go on with the points not done. Root.
# OUT: the matrix's directory (default: this run's matrix/; the run after the
# read race's warm-up, 2026-12-06-device-limit-2, gives its own).
#
#   bench/runs/2026-12-06-device-limit/run.sh [OUT]
set -euo pipefail
# UBIO_BENCH_PREFIX="CMD ARGS": a command each measured step runs under (for
# example a lock that keeps a shared machine quiet); default none.
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/../../.."
nice -n 10 cargo build -q --release -p ubio-cli -p ubio-bench
"${prefix[@]}" bench/matrix.sh "${1:-$here/matrix}" --preset release \
    --targets ext4/shm,xfs/shm,ext4/disk --threads 1,2,4 --rounds 3
