#!/usr/bin/env bash
# The kernel and filesystem matrix: boot Debian's Linux 6.12 (trixie:
# cachestat, no RWF_DONTCACHE) and Linux 6.1 (bookworm: neither) in QEMU,
# each kernel once, and run ubio's contract tests on f2fs, ext4, xfs and
# btrfs inside each, and on an NFS client mount in the 6.12 guest (a kernel
# NFS server in the guest exports an ext4 over loopback), so the emulated
# path is proven on real older kernels and on filesystems (f2fs, nfs) this
# machine's kernel does not have.
#
#   scripts/guest/run.sh
#
# Steps (each a file of scripts/guest/phases/, sourced in order; each
# cached under $UBIO_GUEST_CACHE, default ~/.cache/ubio-guest,
# keyed by package versions, so a second run downloads and rebuilds nothing
# but ubio's own binaries):
# 1. Install what is missing with apt-get (qemu-system-x86, cpio, xz-utils,
#    zstd, f2fs-tools, xfsprogs, btrfs-progs, e2fsprogs; binutils for strip,
#    libc6-dev for static linking).
# 2. For each kernel: apt-get download (with a private sources list naming
#    the kernel's Debian release and private package lists, whatever the
#    host runs) the newest linux-image-<series>*-amd64 of the generic
#    flavour (it has f2fs), and busybox-static; extract the PVH vmlinux
#    from vmlinuz (xz or zstd) and the modules for virtio-blk, loop, ext4,
#    xfs, btrfs, f2fs, nfsd, nfsv4 and their dependencies (modules.dep from
#    `busybox depmod`; xz-compressed modules are unpacked) into a modules
#    cpio. With NFS: nfs-kernel-server and libwrap0 of the host's release,
#    downloaded and extracted (never installed).
# 3. A base initramfs (uncompressed cpio) for every kernel: busybox,
#    mkfs.f2fs, mke2fs, mkfs.xfs, mkfs.btrfs, losetup and mount, and
#    rpc.nfsd, rpc.mountd and exportfs, with their libraries, and
#    scripts/guest/init.sh as /init.
# 4. cargo builds `ubio` and the contract test binaries statically (glibc
#    crt-static, in target/guest) and appends them as a last cpio.
# 5. qemu-system-x86_64 with KVM if a quick boot check passes there, else
#    TCG; all kernels at once (a test uses about one vCPU; the host has
#    two), each with a sparse 4 GiB scratch disk and its serial console in
#    a log file.
# 6. Each guest prints GUEST-PROBE and GUEST-TEST lines; this script checks
#    for every kernel and filesystem that the probe found what that kernel
#    has (cachestat from 6.5, RWF_DONTCACHE from 6.14) and that every test
#    passed, prints one `GUEST-RESULT <kernel> <fs>: ok|FAILED ...` line for
#    each and exits non-zero on any failure. Disk images and temporary files
#    are removed on exit, failure or Ctrl-C.
#
# Environment: UBIO_GUEST_KERNELS (default "6.12 6.1"), UBIO_GUEST_FS
# (default "f2fs ext4 xfs btrfs"), UBIO_GUEST_NFS (the kernels whose guest
# also tests nfs after those, default 6.12; empty for none),
# UBIO_GUEST_STREAM_MB (the contract's big streams, default 128: twice the 64 MiB read bound, four times the write
# bound), UBIO_GUEST_TIMEOUT (seconds for the guests, default 3600: a run
# takes 33 minutes on this 2-core VM while five other builds run),
# UBIO_GUEST_ACCEL (kvm or tcg, to skip the check), UBIO_GUEST_KEEP_LOG (a
# directory to copy the console logs to), UBIO_GUEST_FAILED_LOGS (where the
# console log of a kernel with a failed cell is always kept, default
# target/guest-failures; each failed cell's own output is also printed),
# UBIO_GUEST_ONLY (one test, `binary::name`, instead of all) and
# UBIO_GUEST_REPEAT (run each test that many times: hunting a flake) and
# UBIO_GUEST_LOG (UBIO_LOG for the command's tests, `ubio_engine=debug`);
# UBIO_GUEST_FS=none runs no contract test. UBIO_GUEST_BUILD_ONLY=1 stops
# after step 4 (downloads, kernels, initramfs, the static build; all cached,
# so the run after it boots at once): scripts/test.sh does that, at the
# lowest priority, while the host tests leave a core idle.
# The power-cut suite (ubio-powercut, after the contract tests:
# dm-log-writes records each workload, every flush and FUA point is
# replayed and checked) and the disk-fault suite (ubio-diskfault, after
# that: dm-error and dm-flakey fail reads and writes below the filesystem
# mid-stream) take lists of filesystems, each entry `fs@K` (in kernel K's
# guest only) or a bare `fs` (in every guest of the suite's _KERNELS).
# CI's defaults give each guest one filesystem of each suite, so both
# kernels are covered and the two guests end near the same time.
# UBIO_GUEST_POWERCUT (default "ext4@6.12 xfs@6.1", the reduced pass CI
# runs; "ext4 xfs btrfs f2fs" for the matrix of scripts/integrity.sh;
# empty: none), UBIO_GUEST_POWERCUT_KERNELS (the guests of a bare entry,
# default 6.12), UBIO_GUEST_POWERCUT_BACKENDS (default "emulated,direct"),
# UBIO_GUEST_POWERCUT_WORKLOADS (default "cp,tree,fsync,overwrite"; runcp
# and unsynced too in the matrix, and tails, files that end inside a block;
# libtails, the same through the library with the application's own
# same-size truncates, by hand), UBIO_GUEST_POWERCUT_MIB (MiB per
# workload, default 5). A failing point's replayed image and log excerpt
# are kept in the failed-logs directory.
# UBIO_GUEST_DIRECT_WRITES_KERNELS (default 6.12): the guests whose
# power-cut and disk-fault suites force the emulated backend's aligned writes
# through O_DIRECT (`--direct-writes always`; the other guests run the
# default, when-faster).
# UBIO_GUEST_DISKFAULT (default "ext4@6.1 xfs@6.12"; empty: none; both
# kernels pass it on both filesystems), UBIO_GUEST_DISKFAULT_KERNELS (the
# guests of a bare entry, default 6.1), UBIO_GUEST_DISKFAULT_BACKENDS
# (default "emulated,direct": CI's pass; scripts/integrity.sh adds buffered
# and kernel), UBIO_GUEST_DISKFAULT_MIB (MiB per stream, at least 24,
# default 24).
# Both guests boot cgroup v2 alone (cgroup_no_v1=all, as every current
# systemd distribution and Kubernetes node): UBIO_GUEST_CGROUP=v2 (the
# default) or "hybrid" (the kernel's default mounts, as before; no cgroup
# is mounted by /init then). After the contract tests, the guests of
# UBIO_GUEST_POLICY (default 6.12; empty: none) run every test of the
# policy daemon's test binary (crates/ubio-cli/tests/policy.rs, the host's
# on cgroup v1) on an ext4, on cgroup v2, with the programs it runs (GNU
# cp, tar and sha256sum, Python, setpriv and unshare from the host, the
# static Go copier built here); one `GUEST-RESULT <kernel> policy` line.
# A Python script of the project's in every guest after the tests
# (bench/runs/2026-12-06-pods/run.sh): UBIO_GUEST_PYTHON="SCRIPT ARGS...",
# run as `python3 SCRIPT --dir /mnt/data ARGS...` on an ext4 on the
# scratch disk; each line it prints reaches the console as `GUEST-SCRIPT
# <line>`. UBIO_GUEST_DISK_GB: the scratch disk's size (default 4).
# TMPDIR (default /tmp): where the run's work directory goes, with the
# guests' sparse scratch disks (discarded by each mkfs, so they hold about
# what the guest has written since), their initramfs and console logs.
# scripts/test.sh puts it on /dev/shm, so the guests write nothing to the
# host's disk while the host tests measure it.
# The ext4 tail detector in every guest after the power-cut and disk-fault
# suites (issue 37; default off): UBIO_GUEST_TAILDETECT, the arguments of
# ubio-taildetect (e.g. "--iterations 20000"; empty: not run); its result is
# one GUEST-RESULT line per kernel (ok: every iteration ran, no mismatch).
# A benchmark matrix in every guest after the tests (bench/kernel-ab.sh):
# UBIO_GUEST_MATRIX, the arguments of `ubio-bench matrix` (empty: none);
# scripts/guest/matrix.sh runs it and prints the matrix on the console.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD

KERNELS=${UBIO_GUEST_KERNELS:-"6.12 6.1"}
FILESYSTEMS=${UBIO_GUEST_FS:-"f2fs ext4 xfs btrfs"}
[ "$FILESYSTEMS" = none ] && FILESYSTEMS=
MATRIX=${UBIO_GUEST_MATRIX:-}
PYTHON_SCRIPT=${UBIO_GUEST_PYTHON:-}
DISK_GB=${UBIO_GUEST_DISK_GB:-4}
POWERCUT=${UBIO_GUEST_POWERCUT-"ext4@6.12 xfs@6.1"}
POWERCUT_BACKENDS=${UBIO_GUEST_POWERCUT_BACKENDS:-emulated,direct}
POWERCUT_WORKLOADS=${UBIO_GUEST_POWERCUT_WORKLOADS:-cp,tree,fsync,overwrite}
POWERCUT_MIB=${UBIO_GUEST_POWERCUT_MIB:-5}
DISKFAULT=${UBIO_GUEST_DISKFAULT-"ext4@6.1 xfs@6.12"}
DISKFAULT_BACKENDS=${UBIO_GUEST_DISKFAULT_BACKENDS:-emulated,direct}
DISKFAULT_MIB=${UBIO_GUEST_DISKFAULT_MIB:-24}
# The guests whose power-cut and disk-fault suites run the emulated backend
# with every aligned write forced through O_DIRECT (--direct-writes always,
# the race's other path; `ubio cp` then copies through its buffers); the
# others run it as users get it (when-faster).
DIRECT_WRITES_KERNELS=${UBIO_GUEST_DIRECT_WRITES_KERNELS-6.12}
TAILDETECT=${UBIO_GUEST_TAILDETECT:-}
STREAM_MB=${UBIO_GUEST_STREAM_MB:-128}
CGROUP=${UBIO_GUEST_CGROUP:-v2}
POLICY_KERNELS=${UBIO_GUEST_POLICY-6.12}
case "$CGROUP" in v2 | hybrid) ;; *) echo "guest: UBIO_GUEST_CGROUP must be v2 or hybrid, not $CGROUP" >&2; exit 2 ;; esac
TIMEOUT=${UBIO_GUEST_TIMEOUT:-3600}
CACHE=${UBIO_GUEST_CACHE:-$HOME/.cache/ubio-guest}
TESTS="contract_cache contract_io contract_faults"
# The command's test binaries (crates/ubio-cli/tests) run in their own phase.
CLI_TESTS=policy
ONLY=${UBIO_GUEST_ONLY:-}
BUILD_ONLY=${UBIO_GUEST_BUILD_ONLY:-}
REPEAT=${UBIO_GUEST_REPEAT:-1}
LOG=${UBIO_GUEST_LOG:-}
FAILED_LOGS=${UBIO_GUEST_FAILED_LOGS:-$root/target/guest-failures}
# Kernels whose guest also tests an NFS client mount (a kernel NFS server
# in the guest exports an ext4 over loopback): the host kernel has neither.
NFS_KERNELS=${UBIO_GUEST_NFS-6.12}
if [ -n "$ONLY" ]; then
    case " $CLI_TESTS " in
    *" ${ONLY%%::*} "*) TESTS= CLI_TESTS=${ONLY%%::*} FILESYSTEMS= NFS_KERNELS= ;;
    *) TESTS=${ONLY%%::*} CLI_TESTS= ;;
    esac
fi
# Whether kernel K's guest runs the command's tests (the policy daemon's).
runs_policy() { [ -n "$CLI_TESTS" ] && [[ " $POLICY_KERNELS " == *" $1 "* ]]; }

# The Debian release that ships each kernel series.
suite_of() {
    case "$1" in
    6.1) echo bookworm ;;
    6.12) echo trixie ;;
    *) echo "guest: no Debian release known for kernel $1 (6.1 and 6.12 are)" >&2; return 1 ;;
    esac
}
# What ubio probe must find on a kernel series: cachestat since 6.5,
# RWF_DONTCACHE since 6.14 (FACTS.md); auto picks emulated either way on
# the filesystems here (f2fs and btrfs have no RWF_DONTCACHE; on ext4 and
# xfs emulated is faster where the file's residency can be known).
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
expect_of() { # series -> "cachestat dontcache auto"
    local cs=false dc=false
    at_least "$1" 6.5 && cs=true
    at_least "$1" 6.14 && dc=true
    echo "$cs $dc emulated"
}
for k in $KERNELS; do suite_of "$k" > /dev/null; done
POWERCUT_KERNELS=${UBIO_GUEST_POWERCUT_KERNELS-6.12}
DISKFAULT_KERNELS=${UBIO_GUEST_DISKFAULT_KERNELS-6.1}
# The filesystems of a suite's list (UBIO_GUEST_POWERCUT, _DISKFAULT) that
# kernel K's guest runs: an entry `fs@K` in K's guest only, a bare `fs` in
# every guest of the suite's kernels (_POWERCUT_KERNELS, _DISKFAULT_KERNELS).
suite_fs_of() { # "list" "kernels" series
    local e out=
    for e in $1; do
        case "$e" in
        *@*) [ "${e#*@}" = "$3" ] && out+=" ${e%@*}" ;;
        *) [[ " $2 " == *" $3 "* ]] && out+=" $e" ;;
        esac
    done
    echo $out
}
for e in $POWERCUT $DISKFAULT; do
    case "$e" in *@*) suite_of "${e#*@}" > /dev/null ;; esac
done
pc_fs_of() { suite_fs_of "$POWERCUT" "$POWERCUT_KERNELS" "$1"; }
df_fs_of() { suite_fs_of "$DISKFAULT" "$DISKFAULT_KERNELS" "$1"; }
# Whether kernel K's guest runs the power-cut (or disk-fault) suite.
runs_powercut() { [ -n "$(pc_fs_of "$1")" ]; }
runs_diskfault() { [ -n "$(df_fs_of "$1")" ]; }
# A suite asked for that no booted guest runs is said, not dropped silently.
for suite in "powercut $POWERCUT" "diskfault $DISKFAULT"; do
    set -- $suite
    [ $# -gt 1 ] || continue
    n=0
    for k in $KERNELS; do if runs_$1 "$k"; then n=$((n + 1)); fi; done
    if [ "$n" -eq 0 ]; then
        echo "guest: NOTE: the $1 suite (${*:2}) runs in none of the kernels booted ($KERNELS)"
    fi
done
# The filesystems tested in a kernel's guest, in order.
fs_of() { # series
    local n out=$FILESYSTEMS
    case " $out " in *" nfs "*) ;; *) for n in $NFS_KERNELS; do [ "$n" = "$1" ] && out+=" nfs"; done ;; esac
    echo $out
}

started=$SECONDS
phase_start=$SECONDS
phase() {
    local now=$SECONDS
    timings+=("$1 $((now - phase_start))s")
    phase_start=$now
}
timings=()

work=$(mktemp -d -t ubio-guest.XXXXXX)
qemu_pids=()
cleanup() {
    local p
    for p in "${qemu_pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "guest: interrupted" >&2; exit 130' INT TERM HUP

# The phases, each in a file of its own (scripts/guest/phases/), sourced in
# order: they share this script's settings, helpers and variables.
for phase_file in 1-host-tools 2-kernels 3-initramfs 4-build 5-boot 6-results; do
    # shellcheck source=/dev/null
    . "$root/scripts/guest/phases/$phase_file.sh"
done
