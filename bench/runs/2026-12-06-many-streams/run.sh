#!/bin/bash
# Many streams (issue 37, item 3): 1, 4, 16 and 64 concurrent streams, as threads of one
# process and as a process each, with a file each and with one shared file (each stream its
# own region), seq-read and seq-write, 1 MiB requests, in buffered, RWF_DONTCACHE, O_DIRECT
# and ubio (backend auto); ext4 on a loop device over /dev/shm (the fastest device here),
# a 2 GiB dataset in a 1 GiB memory cgroup; 3 rounds per point, each round's modes in a new
# random order, the points in a random order (seed 37).
#
# The matrix runs one point per invocation, each under the measurement lock, so that other
# measurements on this shared machine can run between points; run again, it goes on with
# the points not done. Then report.py writes the tables of README.md from matrix.json.
#
#   bench/runs/2026-12-06-many-streams/run.sh [OUT]     (root; about 30 minutes here)
set -euo pipefail
# UBIO_BENCH_PREFIX="CMD ARGS": a command each measured step runs under (for
# example a lock that keeps a shared machine quiet); default none.
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$here/matrix}
cd "$root"
nice -n 10 cargo build --release -p ubio-bench -p ubio-cli
bench=(target/release/ubio-bench matrix
    --targets ext4/shm --workloads seq-read,seq-write
    --threads 1,4,16,64 --streams threads,processes --files own,shared
    --datasets 2 --memory 1G --pressure cgroup
    --modes buffered,dontcache,odirect,ubio --rounds 3 --no-ceiling --seed 37
    --out "$out")
complete() {
    python3 -c 'import gzip,json,os,sys; p=sys.argv[1]
sys.exit(0 if json.load(open(p) if os.path.exists(p) else gzip.open(p + ".gz", "rt"))["complete"] else 1)' \
        "$out/matrix.json" 2>/dev/null
}
for _ in $(seq 1 60); do
    complete && break
    "${prefix[@]}" "${bench[@]}" --max-points 1 || true
done
complete || { echo "the matrix is not complete: run again" >&2; exit 1; }
python3 "$here/report.py" "$out" > "$here/tables.md"
