#!/usr/bin/env bash
# The integrity runs too long for CI (issue 29), into a run directory:
#
#   scripts/integrity.sh [OUT_DIR]      # default bench/runs/<date>-integrity
#
# Four parts, run side by side (each logs to OUT_DIR/<part>.log):
# 1. kills: ubio cp (every backend, GNU cp beside it), ubio cp -r, ubio cat,
#    cat under ubio run and ubio run's engine killed with SIGKILL at random
#    seeded moments, UBIO_KILLS (default 200) per case
#    (crates/ubio-cli/tests/kill.rs), and the concurrency tests with
#    UBIO_CONCURRENT_OPS (default 20,000) operations per thread and process
#    (crates/ubio-fsx/tests/concurrent.rs);
# 2. fsx: the exerciser's soak, UBIO_FSX_SOAK_OPS (default 1,000,000)
#    operations per backend (and the emulated backend with its reads
#    through O_DIRECT) on ext4, xfs, btrfs (loop devices in /dev/shm) and
#    tmpfs;
# 3. power cuts: ubio-powercut in the Linux 6.12 guest on ext4, xfs, btrfs
#    and f2fs, backends buffered (the reference), emulated, direct and
#    kernel (refused there: 6.12 has no RWF_DONTCACHE), every workload
#    (scripts/guest/run.sh with UBIO_GUEST_POWERCUT); then, in the same
#    guest, disk faults (ubio-diskfault: read and write EIO mid-stream) on
#    ext4 and xfs with the same backends;
# 4. powercut-6.1: the same in the Linux 6.1 guest (no cachestat, no
#    RWF_DONTCACHE: kernel refused), power cuts on ext4 and xfs, then the
#    disk faults on ext4 and xfs.
# Then OUT_DIR/summary.txt: the figures of each part whose log is in OUT_DIR
# (a later run of some parts into the same directory adds to it), and the
# exit status. Needs root (loop devices, the guests). UBIO_INTEGRITY_PARTS
# narrows the parts (e.g. "kills fsx", or "powercut-6.1" after a run
# without it; "none": only the summary of the logs OUT_DIR holds).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-bench/runs/$(date +%Y-%m-%d)-integrity}
mkdir -p "$out"
out=$(cd "$out" && pwd)
all_parts="kills fsx powercut powercut-6.1"
parts=${UBIO_INTEGRITY_PARTS:-$all_parts}
[ "$parts" = none ] && parts=
export UBIO_NO_SKIP=1

[ -z "$parts" ] || cargo build --release --workspace --all-targets

run_kills() {
    UBIO_KILLS=${UBIO_KILLS:-200} cargo test --release -p ubio-cli --test kill -- --test-threads=1 --nocapture &&
        UBIO_CONCURRENT_OPS=${UBIO_CONCURRENT_OPS:-20000} cargo test --release -p ubio-fsx --test concurrent -- --test-threads=1 --nocapture
}
run_fsx() {
    UBIO_FSX_SCRATCH_SHM=1 UBIO_FSX_SOAK_OPS=${UBIO_FSX_SOAK_OPS:-1000000} \
        cargo test --release -p ubio-fsx --test fsx -- --ignored soak --nocapture
}
# The power cuts on the filesystems FS_LIST, then the disk faults on ext4 and
# xfs, every backend and workload, in kernel K's guest alone.
guest_matrix() { # K "FS_LIST"
    UBIO_GUEST_KERNELS=$1 UBIO_GUEST_FS=none UBIO_GUEST_NFS= \
        UBIO_GUEST_POWERCUT="$2" UBIO_GUEST_POWERCUT_KERNELS=$1 \
        UBIO_GUEST_POWERCUT_BACKENDS=buffered,emulated,direct,kernel UBIO_GUEST_TIMEOUT=14400 \
        UBIO_GUEST_POWERCUT_WORKLOADS=cp,tree,tails,fsync,overwrite,runcp,unsynced \
        UBIO_GUEST_DISKFAULT="ext4 xfs" UBIO_GUEST_DISKFAULT_KERNELS=$1 \
        UBIO_GUEST_DISKFAULT_BACKENDS=buffered,emulated,direct,kernel UBIO_GUEST_DISKFAULT_MIB=32 \
        UBIO_GUEST_KEEP_LOG="$out" UBIO_GUEST_FAILED_LOGS="$out/failed" scripts/guest/run.sh
}
run_powercut() { guest_matrix 6.12 "ext4 xfs btrfs f2fs"; }
run_powercut-6.1() { guest_matrix 6.1 "ext4 xfs"; }

declare -A pid
for p in $parts; do
    started=$SECONDS
    (
        r=0
        "run_$p" > "$out/$p.log" 2>&1 || r=$?
        echo "exit $r after $((SECONDS - started))s" >> "$out/$p.log"
        exit $r
    ) &
    pid[$p]=$!
done
rc=0
for p in $parts; do wait "${pid[$p]}" || rc=1; done

{
    echo "scripts/integrity.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs"
    for p in $all_parts; do
        [ -f "$out/$p.log" ] || continue
        echo
        echo "== $p: $(tail -1 "$out/$p.log")"
        case $p in
        kills) grep -E '^(killed|a_|killed streams|threads on|[a-z0-9]+ [a-z]+: (share|4 threads))|^test result' "$out/$p.log" || true ;;
        fsx) grep -E '^soak|^  [a-z0-9]+ +[a-z]+ |^test result' "$out/$p.log" || true ;;
        powercut*) grep -E '^  (POWERCUT|DISKFAULT)|^GUEST-RESULT|^guest kernel|^timings' "$out/$p.log" || true ;;
        esac
    done
} > "$out/summary.txt"
cat "$out/summary.txt"
exit $rc
