#!/bin/bash
# Where ubio's own calls spend the stream threads' CPU, and what waits on kernel locks, with
# 16 and 64 streams (threads of one process), files of their own and one shared file, reads
# and writes: each case one run of the harness's worker (`ubio-bench __worker bench JOB`,
# mode ubio, 2 GiB, 1 MiB requests) on ext4 on a loop device over /dev/shm, under
# `perf record -a -g` (cpu-clock and the lock:contention_begin tracepoint), then per case
# the threads' samples by system call and the contended callers (analysis.txt), and a
# `perf lock record` of the 64-stream shared-file read (lock-contention-read-64-shared.txt).
# The kernel has no CONFIG_LOCK_STAT (no /proc/lock_stat); perf is Debian's 6.1 (linux-perf)
# on a 6.18 kernel: cpu-clock sampling and tracepoints work.
#
#   bench/runs/2026-12-06-many-streams/perf/run.sh     (root, from the repository; ~3 min)
set -euo pipefail
# UBIO_BENCH_PREFIX="CMD ARGS": a command each measured step runs under (for
# example a lock that keeps a shared machine quiet); default none.
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
export UBIO_BENCH=$PWD/target/release/ubio-bench
mkdir -p /tmp/streams-perf
cp "$here"/{job.py,drop.py} /tmp/streams-perf/
trap 'bash "$here/teardown.sh" 2>/dev/null || true' EXIT
"${prefix[@]}" bash "$here/setup.sh"
# Reads before writes: a write rewrites the files to its own layout.
for c in "seq-read 64 own" "seq-read 64 shared" "seq-write 64 own" "seq-write 64 shared" \
         "seq-write 16 own" "seq-read 16 own" "seq-read 16 shared" "seq-write 16 shared"; do
    set -- $c
    (cd /tmp/streams-perf && "${prefix[@]}" bash "$here/prof.sh" "$1" "$2" "$3" ubio)
done
cd /tmp/streams-perf
for f in seq-read-64-own seq-read-64-shared seq-write-64-own seq-write-64-shared \
         seq-read-16-own seq-read-16-shared seq-write-16-own seq-write-16-shared; do
    echo "== $f (ubio, threads of one process)"
    python3 "$here/bysys.py" "$f-ubio.data" | head -7
    python3 "$here/flat.py" "$f-ubio.data" | sed -n '1p;/contended/,$p' | head -7
done > "$here/analysis.txt"
python3 drop.py
"${prefix[@]}" perf lock record -o lock.data -a -- "$UBIO_BENCH" __worker bench \
    "$(python3 job.py seq-read 64 shared ubio)" > /dev/null
{ perf lock contention -i lock.data -E 12; perf lock contention -i lock.data -t -E 20; } \
    > "$here/lock-contention-read-64-shared.txt" 2>&1
rm -f /tmp/streams-perf/*.data
