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
# Steps (each cached under $UBIO_GUEST_CACHE, default ~/.cache/ubio-guest,
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
# run as `python3 SCRIPT --dir /work/data ARGS...` on an ext4 on the
# scratch disk; each line it prints reaches the console as `GUEST-SCRIPT
# <line>`. UBIO_GUEST_DISK_GB: the scratch disk's size (default 4).
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

work=$(mktemp -d /tmp/ubio-guest.XXXXXX)
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

# 1. Host tools (what is missing), and Rust.
"$root/scripts/install-deps.sh" qemu-system-x86 cpio xz-utils zstd f2fs-tools xfsprogs btrfs-progs e2fsprogs \
    dmsetup binutils libc6-dev |
    sed 's/^/== guest: /'
export PATH="$PATH:/usr/sbin:/sbin"
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

mkdir -p "$CACHE/debs"
chmod 755 "$CACHE" "$CACHE/debs"
# One run at a time fills the cache (another run may share it).
exec 9> "$CACHE/.lock"
flock 9

# apt-get/apt-cache on one Debian release only, with its own package lists
# under the cache (the host's sources and lists are not used or touched).
apt_in() { # suite command args...
    local suite=$1 cmd=$2 dir="$CACHE/apt-$1"
    shift 2
    "$cmd" -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Dir::State::status=/dev/null \
        -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false "$@"
}
apt_update() { # suite
    local dir="$CACHE/apt-$1"
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $1 main" \
        > "$dir/sources.list"
    echo "== guest: apt-get update ($1 only, lists in $dir)"
    apt_in "$1" apt-get update > "$work/apt-update.log" 2>&1 ||
        { cat "$work/apt-update.log" >&2; echo "guest: apt-get update for $1 failed" >&2; exit 1; }
}
# The newest generic kernel of a series in a suite: "package version".
kernel_pkg() { # series suite
    local pkg
    pkg=$(apt_in "$2" apt-cache depends linux-image-amd64 2>/dev/null |
        awk -v s="$1" '$1 == "Depends:" && index($2, "linux-image-" s ".") == 1 && $2 ~ /-amd64$/ && !p {print $2; p = 1}')
    [ -n "$pkg" ] || return 0
    echo "$pkg $(apt_in "$2" apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
}
deb_of() { # package version -> cached .deb path, or nothing
    find "$CACHE/debs" -name "$1_$(printf %s "$2" | sed 's/:/%3a/')_*.deb" -print -quit
}
fetch() { # suite package version
    local f
    f=$(deb_of "$2" "$3")
    if [ -z "$f" ]; then
        (cd "$CACHE/debs" && apt_in "$1" apt-get download "$2=$3" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
        f=$(deb_of "$2" "$3")
    fi
    [ -n "$f" ] || return 1
    echo "$f"
}

# 2. Packages and kernels (busybox-static from the first kernel's release).
declare -A kpkg kver kdir kdebs
for k in $KERNELS; do
    suite=$(suite_of "$k")
    # Lists a month old are refreshed (a newer kernel of the series may be out).
    if [ ! -f "$CACHE/apt-$suite/sources.list" ] ||
        [ -n "$(find "$CACHE/apt-$suite/sources.list" -mtime +30)" ]; then
        apt_update "$suite"
    fi
    read -r p v < <(kernel_pkg "$k" "$suite") || true
    if [ -z "${p:-}" ] || ! deb=$(fetch "$suite" "$p" "$v"); then
        # Lists too old (the mirror keeps only the newest version): refresh once.
        apt_update "$suite"
        read -r p v < <(kernel_pkg "$k" "$suite") || true
        [ -n "${p:-}" ] || { echo "guest: no linux-image-$k.*-amd64 in Debian $suite" >&2; exit 1; }
        deb=$(fetch "$suite" "$p" "$v") || { echo "guest: apt-get download $p=$v failed" >&2; exit 1; }
    fi
    kpkg[$k]=$p kver[$k]=$v kdir[$k]="$CACHE/kernel-$v"
    kdebs[$k]=$deb
done
bbsuite=$(suite_of "${KERNELS%% *}")
bbver=$(apt_in "$bbsuite" apt-cache policy busybox-static | awk '/Candidate:/ {print $2}')
bbdeb=$(fetch "$bbsuite" busybox-static "$bbver") ||
    { echo "guest: apt-get download busybox-static=$bbver failed" >&2; exit 1; }
busybox="$CACHE/busybox-$bbver"
if [ ! -x "$busybox" ]; then
    rm -rf "$work/bb" && dpkg-deb -x "$bbdeb" "$work/bb"
    # /bin/busybox up to bookworm, /usr/bin/busybox since trixie (merged /usr).
    cp "$(find "$work/bb" -path '*bin/busybox' -type f -print -quit)" "$busybox.tmp"
    mv "$busybox.tmp" "$busybox"
fi
phase download

# The kernel: PVH vmlinux (boots directly, no decompression under TCG) and
# a cpio of the modules, in load order (the NFS server and client ones in
# every kernel: loaded, they cost nothing where NFS is not tested).
guest_nfs_modules="nfsd nfsv4 nfs"
# device-mapper for the power-cut suite (log-writes) and disk faults (flakey).
guest_dm_modules="dm-mod dm-log-writes dm-flakey"
modkey=$(echo "$guest_nfs_modules $guest_dm_modules" | sha256sum | cut -c1-8)
extract_kernel() { # series
    local k=$1 d=${kdir[$1]} krel=${kpkg[$1]#linux-image-} vmlinuz off magic unpack mods dep name path seen m
    echo "== guest: extracting ${kpkg[$k]} ${kver[$k]}"
    rm -rf "$d" && mkdir -p "$d"
    dpkg-deb -x "${kdebs[$k]}" "$d/pkg"
    # trixie keeps modules in /usr/lib/modules; busybox depmod looks in /lib.
    [ -e "$d/pkg/lib" ] || ln -s usr/lib "$d/pkg/lib"
    vmlinuz="$d/pkg/boot/vmlinuz-$krel"
    if grep -q '^CONFIG_KERNEL_ZSTD=y' "$d/pkg/boot/config-$krel"; then
        magic='\x28\xb5\x2f\xfd' unpack="zstd -dcq"
    else
        magic='\xfd7zXZ\x00' unpack="xz -dc --single-stream"
    fi
    off=$(LC_ALL=C grep -obUaP -m1 "$magic" "$vmlinuz" | LC_ALL=C cut -d: -f1 | sed -n 1p)
    # The size trailer after the payload makes zstd complain: judge the ELF.
    { tail -c +$((off + 1)) "$vmlinuz" || true; } | { $unpack > "$d/vmlinux" 2> /dev/null || true; }
    [ "$(head -c 4 "$d/vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] ||
        { echo "guest: no vmlinux in $vmlinuz" >&2; exit 1; }
    "$busybox" depmod -b "$d/pkg" "$krel"
    # The modules wanted, their dependencies first (modules.dep lists each
    # module's dependencies, deepest last), softdeps added by hand.
    mods="$d/pkg/lib/modules/$krel"
    dep="$mods/modules.dep"
    order=()
    add() { # kernel/...ko[.xz]
        local m d
        m=$1
        for seen in "${order[@]}"; do [ "$seen" = "$m" ] && return 0; done
        for d in $(awk -v m="$m:" '$1 == m {for (i = NF; i > 1; i--) print $i}' "$dep"); do
            add "$d"
        done
        order+=("$m")
    }
    for name in crc32c_generic crc32c-intel crc32_generic xxhash_generic blake2b_generic sha256_generic \
        virtio_pci virtio_blk loop ext4 xfs btrfs f2fs $guest_nfs_modules $guest_dm_modules; do
        path=$(awk -F: -v n="/$name.ko" '!p && (substr($1, length($1) - length(n) + 1) == n ||
            substr($1, length($1) - length(n) - 2) == n ".xz") {print $1; p = 1}' "$dep")
        [ -n "$path" ] && add "$path"
    done
    mkdir -p "$d/root/modules"
    : > "$d/root/modules/load-order"
    for m in "${order[@]}"; do
        name=$(basename "$m" .xz)
        case "$m" in
        *.xz) xz -dc "$mods/$m" > "$d/root/modules/$name" ;;
        *) cp "$mods/$m" "$d/root/modules/$name" ;;
        esac
        echo "$name" >> "$d/root/modules/load-order"
    done
    (cd "$d/root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$d/modules.cpio"
    rm -rf "$d/pkg" "$d/root"
    touch "$d/ok-$modkey"
}
for k in $KERNELS; do
    [ -f "${kdir[$k]}/ok-$modkey" ] || extract_kernel "$k"
done

# The NFS server's userspace (rpc.nfsd, rpc.mountd, exportfs) from the
# host's Debian release, whose libraries the other tools bring: apt-get
# download and extract, never installed (its package starts services).
nfsdir=
if [ -n "$NFS_KERNELS" ]; then
    hsuite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    [ -f "$CACHE/apt-$hsuite/sources.list" ] || apt_update "$hsuite"
    nfsdir="$CACHE/nfs"
    nfsvers=
    for p in nfs-kernel-server libwrap0; do
        v=$(apt_in "$hsuite" apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
        deb=$(fetch "$hsuite" "$p" "$v") || { echo "guest: apt-get download $p=$v failed" >&2; exit 1; }
        nfsvers+="$p=$v "
        [ -f "$nfsdir/ok-$p-$v" ] || { dpkg-deb -x "$deb" "$nfsdir" && touch "$nfsdir/ok-$p-$v"; }
    done
fi

# 3. The base initramfs: busybox, filesystem tools and their libraries, /init.
# The checkers and dmsetup: the power-cut and disk-fault suites. GNU cp (the host's, with its
# libraries, in /opt/gnu/bin: busybox's cp stays the guest's `cp`): the
# power-cut suite's unmodified dynamic program under `ubio run`.
tools="mkfs.f2fs mkfs.ext4 mkfs.xfs mkfs.btrfs losetup mount umount dmsetup e2fsck xfs_repair btrfs fsck.f2fs"
# GNU programs the policy tests run (cp also for the power-cut suite), in
# /opt/gnu/bin, with dash as their `sh` there (busybox's sh runs its own
# applets before the PATH's programs); setpriv and unshare (util-linux's:
# busybox's lack the options) in /usr/bin; Python with the part of its
# library a copy needs.
gnu_tools="cp tar sha256sum dash"
util_tools="setpriv unshare"
# Debian's (not a pyenv shim earlier on the PATH): its library is the package's.
python=$(readlink -f /usr/bin/python3)
pyver=${python##*/}
toolver=$(dpkg-query -W -f '${Version} ' f2fs-tools e2fsprogs xfsprogs btrfs-progs util-linux mount coreutils \
    tar "lib$pyver-stdlib" 2>/dev/null || true)
# A program into the image under root R, in directory DIR, with the
# libraries ldd names (the NFS tools' from their extracted package).
add_program() { # R program DIR
    local r=$1 p=$2 lib
    mkdir -p "$r$3"
    cp -L "$p" "$r$3/${p##*/}"
    for lib in $(LD_LIBRARY_PATH=${nfsdir:+$nfsdir/usr/lib/x86_64-linux-gnu} ldd "$p" |
        awk '/=> \// {print $3} /^\t\/lib64/ {print $1}'); do
        [ -e "$r${lib#"$nfsdir"}" ] && continue
        mkdir -p "$r$(dirname "${lib#"$nfsdir"}")"
        cp -L "$lib" "$r${lib#"$nfsdir"}"
    done
}
key=$(cat scripts/guest/init.sh - <<<"$bbver $toolver ${nfsvers:-} $gnu_tools $util_tools $pyver" | sha256sum | cut -c1-16)
base="$CACHE/base-$key.cpio"
if [ ! -f "$base" ]; then
    echo "== guest: building the base initramfs ($key)"
    r="$work/base"
    mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,lib64,lib/x86_64-linux-gnu,tests,etc,proc,sys,dev,tmp,mnt}
    cp "$busybox" "$r/bin/busybox"
    ln -s busybox "$r/bin/sh"
    cp scripts/guest/init.sh "$r/init"
    chmod 755 "$r/init"
    echo "root:x:0:0:root:/:/bin/sh" > "$r/etc/passwd"
    echo "nobody:x:65534:65534:nobody:/:/bin/sh" >> "$r/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
    paths=()
    for t in $tools; do paths+=("$(command -v "$t")"); done
    if [ -n "$nfsdir" ]; then
        for t in rpc.nfsd rpc.mountd exportfs; do paths+=("$nfsdir/usr/sbin/$t"); done
        mkdir -p "$r/var/lib/nfs"
        cp /etc/netconfig "$r/etc/netconfig"
        printf '127.0.0.1 localhost\n' > "$r/etc/hosts"
    fi
    for p in "${paths[@]}"; do add_program "$r" "$p" /usr/sbin; done
    for t in $gnu_tools; do add_program "$r" "$(command -v "$t")" /opt/gnu/bin; done
    ln -s dash "$r/opt/gnu/bin/sh"
    for t in $util_tools; do add_program "$r" "$(command -v "$t")" /usr/bin; done
    add_program "$r" "$python" /usr/bin
    ln -s "$pyver" "$r/usr/bin/python3"
    # The library without what a test never imports (tests, tools, Tk, the
    # build configuration, the GUI and network packages): about a third.
    (cd "/usr/lib/$pyver" && find . \( -path ./test -o -path ./config-\* -o -path ./idlelib \
        -o -path ./tkinter -o -path ./turtledemo -o -path ./lib2to3 -o -path ./pydoc_data \
        -o -path ./distutils -o -path ./ensurepip -o -path ./site-packages -o -path ./dist-packages \
        -o -path ./asyncio -o -path ./email -o -path ./xml -o -path ./http -o -path ./unittest \
        -o -path ./multiprocessing -o -path ./sqlite3 -o -path ./xmlrpc -o -path ./wsgiref \) -prune \
        -o -print | cpio -pdm --quiet "$r/usr/lib/$pyver")
    (cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$base.tmp"
    mv "$base.tmp" "$base"
fi
# Only the current kernels and base image are kept.
find "$CACHE" -maxdepth 1 -name 'base-*.cpio' ! -name "base-$key.cpio" -delete
find "$CACHE" -maxdepth 1 -name 'busybox-*' ! -name "busybox-$bbver" -delete
keep=()
for k in $KERNELS; do keep+=(! -name "kernel-${kver[$k]}"); done
find "$CACHE" -maxdepth 1 -type d -name 'kernel-*' "${keep[@]}" -exec rm -rf {} +
for k in $KERNELS; do
    cp "${kdir[$k]}/vmlinux" "$work/vmlinux-$k"
    cp "${kdir[$k]}/modules.cpio" "$work/modules-$k.cpio"
done
cp "$base" "$work/base.cpio"
flock -u 9
phase kernels+initramfs

# 4. ubio and the contract tests, static. Every test in these binaries runs
# in the guest (a test added to them runs there too, in guest mode).
echo "== guest: building static ubio and contract tests (target/guest)"
export CARGO_TARGET_DIR="$root/target/guest"
export RUSTFLAGS="-C target-feature=+crt-static"
target=x86_64-unknown-linux-gnu
test_args=()
for t in $TESTS; do test_args+=(--test "$t"); done
cargo build -q --release --target "$target" -p ubio-cli --bin ubio
: > "$work/build.log"
if [ -n "$TESTS" ]; then
    cargo test --release --target "$target" -p ubio-tests "${test_args[@]}" --no-run 2> "$work/build.log" ||
        { cat "$work/build.log" >&2; exit 1; }
fi
r="$work/bins"
mkdir -p "$r/usr/bin" "$r/tests" "$r/cli-tests" "$r/usr/share/ubio"
strip -o "$r/usr/bin/ubio" "$CARGO_TARGET_DIR/$target/release/ubio"
if [ -n "$CLI_TESTS" ] && [ -n "$POLICY_KERNELS" ]; then
    cli_args=()
    for t in $CLI_TESTS; do cli_args+=(--test "$t"); done
    cargo test --release --target "$target" -p ubio-cli "${cli_args[@]}" --no-run 2> "$work/build-cli.log" ||
        { cat "$work/build-cli.log" >&2; exit 1; }
    for t in $CLI_TESTS; do
        exe=$(sed -n "s|.*Executable tests/$t.rs (\(.*\))|\1|p" "$work/build-cli.log" | tail -1)
        [ -n "$exe" ] || { echo "guest: no executable for $t in cargo's output" >&2; cat "$work/build-cli.log" >&2; exit 1; }
        strip -o "$r/cli-tests/$t" "$exe"
    done
    # The static Go copier the tests run (they build it where Go is).
    CGO_ENABLED=0 go build -o "$r/usr/bin/gocopy" crates/ubio-cli/tests/run_programs/gocopy.go
    # Where the tests look for `ubio` and their scratch directories (paths
    # cargo compiled in: the host's checkout): /init links them to the
    # scratch filesystem.
    # (The crate's directory too: a path through its `..` must resolve;
    # and the files of the checkout the tests read: the systemd unit.)
    printf 'UBIO_HOST_TARGET=%s\nUBIO_BIN_DIR=%s\n' "$root/target" "$CARGO_TARGET_DIR/$target/release" \
        > "$r/usr/share/ubio/guest.env"
    mkdir -p "$r$root/crates/ubio-cli" "$r$root/dist"
    cp -r dist/systemd "$r$root/dist/"
fi
if [ -n "$PYTHON_SCRIPT" ]; then
    read -r script script_args <<< "$PYTHON_SCRIPT"
    cp "$script" "$r/usr/share/ubio/script.py"
    echo "$script_args" > "$r/usr/share/ubio/script.args"
    echo "== guest: and python3 $script $script_args"
fi
if [ -n "$MATRIX" ]; then
    cargo build -q --release --target "$target" -p ubio-bench --bin ubio-bench
    strip -o "$r/usr/bin/ubio-bench" "$CARGO_TARGET_DIR/$target/release/ubio-bench"
    echo "$MATRIX" > "$r/usr/share/ubio/matrix.args"
    cp scripts/guest/matrix.sh "$r/usr/share/ubio/matrix.sh"
    echo "== guest: and ubio-bench matrix $MATRIX"
fi
if [ -n "$POWERCUT$DISKFAULT" ]; then
    cargo build -q --release --target "$target" -p ubio-fsx --bin ubio-powercut --bin ubio-diskfault
    strip -o "$r/usr/bin/ubio-powercut" "$CARGO_TARGET_DIR/$target/release/ubio-powercut"
    strip -o "$r/usr/bin/ubio-diskfault" "$CARGO_TARGET_DIR/$target/release/ubio-diskfault"
    # `ubio run`'s shim, beside ubio (where it looks first after
    # UBIO_PRELOAD): a cdylib, so built without crt-static, in the main
    # target directory, against the host's glibc that the image carries.
    # (Not while only building: the host tests' cargo holds that directory.)
    if [ -z "$BUILD_ONLY" ]; then
        env -u RUSTFLAGS CARGO_TARGET_DIR="$root/target" cargo build -q --release -p ubio-preload
        add_program "$r" "$root/target/release/libubio_preload.so" /usr/bin
        strip "$r/usr/bin/libubio_preload.so"
    fi
fi
if [ -n "$TAILDETECT" ]; then
    cargo build -q --release --target "$target" -p ubio-fsx --bin ubio-taildetect
    strip -o "$r/usr/bin/ubio-taildetect" "$CARGO_TARGET_DIR/$target/release/ubio-taildetect"
fi
for t in $TESTS; do
    exe=$(sed -n "s|.*Executable tests/$t.rs (\(.*\))|\1|p" "$work/build.log" | tail -1)
    [ -n "$exe" ] || { echo "guest: no executable for $t in cargo's output" >&2; cat "$work/build.log" >&2; exit 1; }
    strip -o "$r/tests/$t" "$exe"
done
(cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$work/bins.cpio"
for k in $KERNELS; do
    cat "$work/base.cpio" "$work/modules-$k.cpio" "$work/bins.cpio" > "$work/initramfs-$k.cpio"
done
phase build
if [ -n "$BUILD_ONLY" ]; then
    echo "== guest: built, not booted (UBIO_GUEST_BUILD_ONLY); timings: ${timings[*]}"
    exit 0
fi

# 5. Boot.
qemu_start() { # accel kernel-series log cmdline-extra [outbox-image]; sets qemu_pid
    local accel=$1 k=$2 log=$3 extra=$4 cpu=max
    [ "$accel" = kvm ] && cpu=host
    : > "$log"
    truncate -s "${DISK_GB}G" "$work/disk-$k.img"
    qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -smp 2 -m 3072 \
        -nodefaults -display none -no-reboot \
        -kernel "$work/vmlinux-$k" -initrd "$work/initramfs-$k.cpio" \
        -append "console=ttyS0 quiet panic=-1 $extra" \
        -serial "file:$log" \
        -drive "file=$work/disk-$k.img,format=raw,if=virtio,cache=unsafe" \
        ${5:+-drive "file=$5,format=raw,if=virtio,cache=unsafe"} \
        > "$log.qemu" 2>&1 &
    qemu_pid=$!
    qemu_pids+=("$qemu_pid")
}
# Each qemu's CPU seconds (user + system, last seen) and wall seconds until
# it exited: CPU time does not depend on what else the host is running.
declare -A qemu_cpu qemu_wall
tck=$(getconf CLK_TCK)
qemu_wait() { # limit pid...: wait for all, stop those past the limit
    local limit=$1 p alive t t0=$SECONDS
    shift
    while :; do
        alive=0
        for p in "$@"; do
            if t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) && kill -0 "$p" 2>/dev/null; then
                alive=1
                qemu_cpu[$p]=$((t / tck))
                qemu_wall[$p]=$((SECONDS - t0))
            fi
        done
        [ "$alive" = 1 ] || break
        if [ $((SECONDS - t0)) -ge "$limit" ]; then
            echo "guest: no power-off after ${limit}s; stopping qemu" >&2
            for p in "$@"; do kill "$p" 2>/dev/null || true; done
            break
        fi
        sleep 1
    done
    for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

accel=${UBIO_GUEST_ACCEL:-}
verdict="$CACHE/kvm-verdict-$(uname -r)-$(qemu-system-x86_64 --version | awk 'NR == 1 {print $4}')"
if [ -z "$accel" ] && [ -f "$verdict" ]; then
    accel=$(cat "$verdict")
fi
if [ -z "$accel" ]; then
    accel=tcg
    if [ -w /dev/kvm ]; then
        k=${KERNELS%% *}
        qemu_start kvm "$k" "$work/kvm.log" "ubio.mode=boot-check"
        qemu_wait 60 "$qemu_pid"
        if grep -q GUEST-BOOTED "$work/kvm.log"; then
            accel=kvm
        else
            echo "guest: KVM did not boot the guest ($(grep -m1 -iE 'error|fail' "$work/kvm.log.qemu" || echo 'no output'));" \
                "using TCG (software emulation)"
        fi
    fi
    echo "$accel" > "$verdict"
fi
phase accel-check

pids=()
declare -A kpid
for k in $KERNELS; do
    echo "== guest: booting ${kpkg[$k]} ${kver[$k]} with $accel (-smp 2, 3 GiB), filesystems: $(fs_of "$k"), streams of $STREAM_MB MiB"
    extra="ubio.fs=$(fs_of "$k" | tr ' ' ,) ubio.stream_mb=$STREAM_MB ubio.repeat=$REPEAT${ONLY:+ ubio.only=$ONLY}"
    [ "$CGROUP" = v2 ] && extra+=" cgroup_no_v1=all ubio.cgroup=v2"
    if runs_policy "$k"; then
        extra+=" ubio.cli_tests=$(echo $CLI_TESTS | tr ' ' ,)${LOG:+ ubio.log=$LOG}"
        echo "== guest: $k: and the command's tests ($CLI_TESTS) on ext4, cgroup $CGROUP"
    fi
    outbox=
    direct_writes=when-faster
    case " $DIRECT_WRITES_KERNELS " in *" $k "*) direct_writes=always ;; esac
    if runs_powercut "$k" || runs_diskfault "$k"; then
        extra+=" ubio.direct_writes=$direct_writes"
    fi
    if runs_powercut "$k"; then
        # The power-cut suite's failing images come back on a second disk.
        outbox="$work/outbox-$k.img"
        truncate -s 4G "$outbox"
        extra+=" ubio.powercut=$(pc_fs_of "$k" | tr ' ' ,) ubio.pc_backends=$POWERCUT_BACKENDS"
        extra+=" ubio.pc_workloads=$POWERCUT_WORKLOADS ubio.pc_mib=$POWERCUT_MIB"
        echo "== guest: $k: and the power-cut suite on $(pc_fs_of "$k") (backends $POWERCUT_BACKENDS; workloads $POWERCUT_WORKLOADS; $POWERCUT_MIB MiB each; direct writes $direct_writes)"
    fi
    if runs_diskfault "$k"; then
        extra+=" ubio.diskfault=$(df_fs_of "$k" | tr ' ' ,) ubio.df_backends=$DISKFAULT_BACKENDS ubio.df_mib=$DISKFAULT_MIB"
        echo "== guest: $k: and the disk-fault suite on $(df_fs_of "$k") (backends $DISKFAULT_BACKENDS; streams of $DISKFAULT_MIB MiB; direct writes $direct_writes)"
    fi
    if [ -n "$TAILDETECT" ]; then
        extra+=" ubio.taildetect=${TAILDETECT// /+}"
        echo "== guest: $k: and the ext4 tail detector ($TAILDETECT)"
    fi
    qemu_start "$accel" "$k" "$work/console-$k.log" "$extra" "$outbox"
    pids+=("$qemu_pid")
    kpid[$k]=$qemu_pid
done
qemu_wait "$TIMEOUT" "${pids[@]}"
if [ -n "${UBIO_GUEST_KEEP_LOG:-}" ]; then
    mkdir -p "$UBIO_GUEST_KEEP_LOG"
    for k in $KERNELS; do cp "$work/console-$k.log" "$UBIO_GUEST_KEEP_LOG/console-$k.log"; done
fi
phase guests

# The output of a failed cell: the lines between its "== fs bin::name"
# header and its verdict (of its last run, with UBIO_GUEST_REPEAT).
cell_output() { # fs bin::name log
    awk -v h="== $1 $2" -v v="GUEST-TEST $1 $2: FAILED" \
        '$0 == h {on = 1; buf = ""; next} on && index($0, v) == 1 {printf "%s", buf; on = 0; next} on {buf = buf $0 "\n"}' "$3"
}

# Why a cell failed, in one line: the message of its first panic (the line
# after "panicked at"), so that the summary says it even where CI's output
# is cut short.
panic_message() { # fs bin::name log
    cell_output "$@" | awk 'found {print; exit} /panicked at/ {found = 1}' | cut -c1-240
}

# A failed kernel's console log is kept (the work directory is not), and
# each failed cell's own output is printed: a flake seen once in CI must
# leave what it printed.
keep_failed_log() { # series log
    local k=$1 log=$2 kept cell
    mkdir -p "$FAILED_LOGS"
    kept="$FAILED_LOGS/console-$k-$(date +%Y%m%d-%H%M%S).log"
    cp "$log" "$kept"
    echo "guest: Linux $k failed; console log kept in $kept"
    grep -E '^GUEST-TEST [^ ]+ [^ ]+: FAILED' "$log" | awk '{sub(/:$/, "", $3); print $2, $3}' | sort -u |
        while read -r fs cell; do
        echo "guest: output of the failed cell $k $fs $cell:"
        cell_output "$fs" "$cell" "$log" | tail -80 | sed 's/^/  | /'
    done
    echo "guest: its console log's last lines:"
    tail -40 "$log" | sed 's/^/  | /'
}

# 6. Results: one line per kernel and filesystem.
failures=0
echo
echo "== guest summary"
echo "host: $(uname -r); accelerator: $accel; streams of $STREAM_MB MiB"
for k in $KERNELS; do
    log="$work/console-$k.log.txt"
    tr -d '\r' < "$work/console-$k.log" > "$log"
    read -r want_cs want_dc want_auto < <(expect_of "$k")
    kline=$(grep -m1 '^GUEST-KERNEL ' "$log" || true)
    secs=$(sed -n 's/^GUEST-DONE \([0-9]*\)s$/\1/p' "$log" | tail -1)
    p=${kpid[$k]}
    echo "guest kernel: ${kline#GUEST-KERNEL }${kline:+; }${kpkg[$k]} ${kver[$k]}; ${secs:-?}s from /init to power-off, qemu ${qemu_wall[$p]:-?}s wall, ${qemu_cpu[$p]:-?}s CPU"
    kfail=0
    if [ -z "$kline" ]; then
        echo "GUEST-RESULT $k all: FAILED (the guest never started /init)"
        kfail=1
    fi
    for fs in $(fs_of "$k"); do
        why=()
        probe=$(grep -m1 "^GUEST-PROBE $fs " "$log" || true)
        cs=$(echo "$probe" | sed -nE 's/.*"cachestat": \{ "available": ([a-z]+).*/\1/p')
        dc=$(echo "$probe" | sed -nE 's/.*"dontcache": \{ "available": ([a-z]+).*/\1/p')
        auto=$(echo "$probe" | sed -nE 's/.*"auto": "([a-z]+)".*/\1/p')
        if [ -z "$probe" ]; then
            why+=("no probe")
        elif [ "$cs" != "$want_cs" ] || [ "$dc" != "$want_dc" ] || [ "$auto" != "$want_auto" ]; then
            why+=("probe: expected cachestat=$want_cs, RWF_DONTCACHE=$want_dc, auto=$want_auto")
        fi
        grep -E "^GUEST-FS $fs: FAILED" "$log" | sed 's/^GUEST-FS [a-z0-9]*: FAILED //' > "$work/fsfail" || true
        while read -r l; do why+=("$l"); done < "$work/fsfail"
        parts=()
        fs_secs=0
        for t in $TESTS; do
            tests=$(grep -c "^GUEST-TEST $fs $t::" "$log" || true)
            ok=$(grep -cE "^GUEST-TEST $fs $t::[^ ]+: ok" "$log" || true)
            bad=$({ grep -E "^GUEST-TEST $fs $t::[^ ]+: FAILED" "$log" || true; } | sed -E 's/^GUEST-TEST [^ ]+ [^:]+::([^:]+):.*/\1/')
            s=$({ grep -E "^GUEST-TEST $fs $t::" "$log" || true; } | sed -nE 's/.*\(([0-9]+)s\)$/\1/p' | awk '{s += $1} END {print s + 0}')
            fs_secs=$((fs_secs + s))
            if [ "$tests" -eq 0 ]; then
                why+=("$t: no test ran")
            elif [ -n "$bad" ]; then
                why+=("$t: $((tests - ok)) of $tests failed: $(echo $bad)")
                for name in $(echo "$bad" | sort -u); do
                    msg=$(panic_message "$fs" "$t::$name" "$log")
                    [ -n "$msg" ] && why+=("$name: $msg")
                done
            fi
            parts+=("$t $ok/$tests")
        done
        if [ -z "$probe" ] && ! grep -q "^GUEST-TEST $fs " "$log"; then
            why=("not reached: the guest stopped before this filesystem")
        fi
        yn() { case "$1" in true) echo yes ;; false) echo no ;; *) echo "?" ;; esac; }
        what="cachestat $(yn "$cs"), RWF_DONTCACHE $(yn "$dc"), auto ${auto:-?}; $(IFS=,; echo "${parts[*]}" | sed 's/,/, /g') passed; ${fs_secs}s"
        # Cases that ran but could not inject their fault on this filesystem.
        n=$(grep -c ": device faults are injected under local filesystems only, not under $fs\$" "$log" || true)
        [ "$n" -gt 0 ] && what+="; $n device-fault cases inject nothing under $fs"
        if [ "${#why[@]}" -eq 0 ]; then
            echo "GUEST-RESULT $k $fs: ok ($what)"
        else
            echo "GUEST-RESULT $k $fs: FAILED ($(printf '%s; ' "${why[@]}")$what)"
            kfail=1
        fi
    done
    if runs_policy "$k"; then
        # The command's tests, reported as GUEST-TEST cli <binary>::<test>.
        why=() parts=() cli_secs=0
        cg=$(sed -n 's/^GUEST-CGROUP //p' "$log" | head -1)
        for t in $CLI_TESTS; do
            tests=$(grep -c "^GUEST-TEST cli $t::" "$log" || true)
            ok=$(grep -cE "^GUEST-TEST cli $t::[^ ]+: ok" "$log" || true)
            bad=$({ grep -E "^GUEST-TEST cli $t::[^ ]+: FAILED" "$log" || true; } | sed -E 's/^GUEST-TEST cli [^:]+::([^:]+):.*/\1/')
            s=$({ grep -E "^GUEST-TEST cli $t::" "$log" || true; } | sed -nE 's/.*\(([0-9]+)s\)$/\1/p' | awk '{s += $1} END {print s + 0}')
            cli_secs=$((cli_secs + s))
            if [ "$tests" -eq 0 ]; then
                why+=("$t: no test ran")
            elif [ -n "$bad" ]; then
                why+=("$t: $((tests - ok)) of $tests failed: $(echo $bad)")
                for name in $(echo "$bad" | sort -u); do
                    msg=$(panic_message cli "$t::$name" "$log")
                    [ -n "$msg" ] && why+=("$name: $msg")
                done
            fi
            parts+=("$t $ok/$tests")
        done
        grep -E '^GUEST-CLI: FAILED' "$log" | sed 's/^GUEST-CLI: FAILED //' > "$work/clifail" || true
        while read -r l; do why+=("$l"); done < "$work/clifail"
        what="ext4, cgroup ${cg:-?}; $(IFS=,; echo "${parts[*]}" | sed 's/,/, /g') passed; ${cli_secs}s"
        if [ "${#why[@]}" -eq 0 ]; then
            echo "GUEST-RESULT $k policy: ok ($what)"
        else
            echo "GUEST-RESULT $k policy: FAILED ($(printf '%s; ' "${why[@]}")$what)"
            kfail=1
        fi
    fi
    if runs_powercut "$k"; then
        grep -E '^POWERCUT(-NOTE|-WIDER|-EXAMPLE)? ' "$log" | sed 's/^/  /' || true
        cells=$(grep -c '^POWERCUT ' "$log" || true)
        bad=$(grep -cE '^POWERCUT [^:]+: FAILED|^POWERCUT-WIDER |^GUEST-POWERCUT: FAILED' "$log" || true)
        points=$(sed -nE 's/^POWERCUT .*: ok \(([0-9]+) replay points.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
        if [ "$cells" -eq 0 ] || [ "$bad" -gt 0 ]; then
            echo "GUEST-RESULT $k powercut: FAILED ($cells cells, $bad failed or wider than buffered)"
            kfail=1
            if [ -s "$work/outbox-$k.img" ] && [ "$(head -c 5 "$work/outbox-$k.img" | tr -d '\0')" != "" ]; then
                mkdir -p "$FAILED_LOGS"
                cp --sparse=always "$work/outbox-$k.img" "$FAILED_LOGS/powercut-$k-$(date +%Y%m%d-%H%M%S).tar"
                echo "guest: the failing replay images and log excerpts kept in $FAILED_LOGS (a tar)"
            fi
        else
            case ",$POWERCUT_BACKENDS," in
            *,buffered,*) wider="no state wider than buffered's" ;;
            *) wider="states not compared: buffered not run" ;;
            esac
            echo "GUEST-RESULT $k powercut: ok ($cells cells on $(pc_fs_of "$k"), $points replay points checked, none failed; $wider)"
        fi
    fi
    if runs_diskfault "$k"; then
        grep -E '^DISKFAULT(-NOTE|-DONE)? ' "$log" | sed 's/^/  /' || true
        cases=$(grep -c '^DISKFAULT [^:]*: ' "$log" || true)
        bad=$(grep -cE '^DISKFAULT [^:]+: FAILED' "$log" || true)
        crashed=$(grep -c '^GUEST-DISKFAULT: FAILED' "$log" || true)
        done_fs=$(grep -c '^DISKFAULT-DONE ' "$log" || true)
        secs=$(sed -nE 's/^DISKFAULT-DONE .*\(([0-9]+)s\)$/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
        notes=$(grep -c '^DISKFAULT-NOTE ' "$log" || true)
        if [ "$cases" -eq 0 ] || [ "$bad" -gt 0 ] || [ "$crashed" -gt 0 ] || [ "$done_fs" -ne "$(df_fs_of "$k" | wc -w)" ]; then
            echo "GUEST-RESULT $k diskfault: FAILED ($cases cases, $bad failed, $done_fs of $(df_fs_of "$k" | wc -w) filesystems done)"
            kfail=1
        else
            echo "GUEST-RESULT $k diskfault: ok ($cases cases on $(df_fs_of "$k"), none failed, ${secs}s; $notes backend(s) that cannot run there noted)"
        fi
    fi
    if [ -n "$TAILDETECT" ]; then
        grep -E '^TAILDETECT-(SETUP|SYSCTL|START|RESULT|DONE|FAILED|ERROR)|^GUEST-TAILDETECT' "$log" | sed 's/^/  /' || true
        n=$(grep -c '^TAILDETECT-MISMATCH ' "$log" || true)
        if grep -q '^TAILDETECT-DONE .* 0 mismatches$' "$log" && ! grep -q '^GUEST-TAILDETECT' "$log"; then
            echo "GUEST-RESULT $k taildetect: ok ($(sed -n 's/^TAILDETECT-DONE [^:]*: //p' "$log"))"
        else
            echo "GUEST-RESULT $k taildetect: FAILED ($n mismatches printed; see the console log)"
            kfail=1
        fi
    fi
    if ! grep -q '^GUEST-DONE' "$log"; then
        echo "GUEST-RESULT $k all: FAILED (the guest did not reach the end)"
        kfail=1
    fi
    if [ "$kfail" -ne 0 ]; then
        failures=$((failures + 1))
        keep_failed_log "$k" "$log"
    fi
done
echo "timings: ${timings[*]}; total $((SECONDS - started))s"
if [ "$failures" -gt 0 ]; then
    echo "guest: FAILED"
    exit 1
fi
echo "guest: ok"
