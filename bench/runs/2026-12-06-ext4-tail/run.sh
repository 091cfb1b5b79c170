#!/usr/bin/env bash
# The ext4 tail detector's runs (issue 37, item 2; see README.md). Root.
#   bench/runs/2026-12-06-ext4-tail/run.sh [PART ...]
# Parts (default: all, in this order):
#   control      on this host: the controls beside pre and cur (each control
#                iteration must be reported)
#   probe        on this host: 6,000 copies per flusher setting (expiry kept,
#                10 ms, 0), --probe: how often writeback reached the tail's page
#                before the copy's own sync_file_range
#   host         on this host: 400,000 copies, i3/pre/cur/lib in turn, the
#                flusher every 10 ms writing every dirty inode
#   host-keep    on this host: 150,000 copies, i3/pre/cur, the flusher every
#                10 ms but the default expiry (30 s: it never writes these
#                files; sync_file_range and fsync do, as in the guest that lost
#                the tail)
#   host-racer   on this host: 150,000 copies, i3/pre/cur, with --racer --probe
#   host-race    on this host: 100,000 copies, race/cur (race: the emulated
#                backend's forced O_DIRECT writes, the path of its race; by hand,
#                not in the default list, which is what the README's runs made)
#   guest-short  the Linux 6.12 guest (QEMU TCG): 1,200 copies with the controls
#                and --probe (its rate; the detector works there)
#   guest        the Linux 6.12 guest: 200,000 copies, i3/cur
#   guest-racer  the Linux 6.12 guest: 30,000 copies, i3/pre/cur, --racer --probe
#   guest-keep   the Linux 6.12 guest: 60,000 copies, i3/pre/cur, the default expiry
#                (the flusher never writes these files, as in integrity-3), --probe
#   guest-6.1    the Linux 6.1 guest: 100,000 copies, i3/cur
# Each part's output goes to <part>.log beside this script (the guests'
# console logs to <part>.console-<kernel>.log), gzipped when over 100 KiB
# (bench/runs keeps big logs as .gz).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
bin=target/release/ubio-taildetect
built=
host() { # part args...
    local part=$1 rc=0
    shift
    [ -n "$built" ] || { cargo build -q --release -p ubio-fsx --bin ubio-taildetect && built=1; }
    echo "== $part: $bin $*"
    # The detector's exit status is the verdict: kept, not stopping the others.
    "$bin" "$@" > "$here/$part.log" 2>&1 || rc=$?
    echo "== $part: exit $rc"
    grep -E '^TAILDETECT-(SETUP|SYSCTL|START|RESULT|RACER|DONE|FAILED|ERROR)' "$here/$part.log" || true
}
guest() { # part kernel timeout detector-args...
    local part=$1 kernel=$2 timeout=$3 rc=0 keep
    shift 3
    keep=$(mktemp -d)
    echo "== $part: scripts/guest/run.sh, Linux $kernel, ubio-taildetect $*"
    # As the recorded runs were made (before c0362ba): the kernel's default
    # cgroup mounts, and no policy tests (main's guests now boot cgroup v2
    # alone and run the policy tests in 6.12 by default).
    UBIO_GUEST_KERNELS=$kernel UBIO_GUEST_FS=none UBIO_GUEST_NFS= UBIO_GUEST_POWERCUT= UBIO_GUEST_DISKFAULT= \
        UBIO_GUEST_POLICY= UBIO_GUEST_CGROUP=hybrid UBIO_GUEST_TIMEOUT=$timeout UBIO_GUEST_KEEP_LOG="$keep" UBIO_GUEST_TAILDETECT="$*" \
        scripts/guest/run.sh > "$here/$part.log" 2>&1 || rc=$?
    echo "== $part: exit $rc"
    cp "$keep/console-$kernel.log" "$here/$part.console-$kernel.log" 2>/dev/null || true
    rm -rf "$keep"
    grep -E '^ *(TAILDETECT-(SETUP|SYSCTL|START|RESULT|RACER|DONE|FAILED|ERROR)|GUEST-RESULT|guest kernel:)' "$here/$part.log" || true
}
parts=("$@")
[ $# -gt 0 ] || parts=(control probe host host-keep host-racer guest-short guest guest-racer guest-keep guest-6.1)
for part in "${parts[@]}"; do
    case "$part" in
    control) host control --iterations 40 --variants pre,ctl-lost,cur,ctl-dirty --keep 4 --max-mismatches 1000 ;;
    probe)
        for e in keep 1 0; do
            host "probe-expire-$e" --iterations 6000 --variants i3,pre,cur --probe --expire-centisecs "$e"
        done
        ;;
    host) host host --iterations 400000 --variants i3,pre,cur,lib ;;
    host-keep) host host-keep --iterations 150000 --variants i3,pre,cur --expire-centisecs keep ;;
    host-race) host host-race --iterations 100000 --variants race,cur ;;
    host-racer) host host-racer --iterations 150000 --variants i3,pre,cur --racer --probe ;;
    guest-short)
        guest guest-short 6.12 1800 --iterations 1200 --variants i3,pre,cur,ctl-lost,ctl-dirty,lib --probe \
            --progress-secs 30 --max-mismatches 1000
        ;;
    guest) guest guest 6.12 10800 --iterations 200000 --variants i3,cur --progress-secs 60 ;;
    guest-racer) guest guest-racer 6.12 5400 --iterations 30000 --variants i3,pre,cur --racer --probe --progress-secs 60 ;;
    guest-keep)
        guest guest-keep 6.12 5400 --iterations 60000 --variants i3,pre,cur --expire-centisecs keep --probe \
            --progress-secs 60
        ;;
    guest-6.1) guest guest-6.1 6.1 7200 --iterations 100000 --variants i3,cur --progress-secs 60 ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
    esac
done
# Large logs (a control's every report, a guest's console) compressed.
find "$here" -maxdepth 1 -name '*.log' -size +100k -exec gzip -9f {} \;
