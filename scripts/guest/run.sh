#!/usr/bin/env bash
# The kernel and filesystem matrix: boot Debian's Linux 6.1 (no RWF_DONTCACHE,
# no cachestat) in QEMU and run ubio's contract tests on f2fs, ext4, xfs and
# btrfs inside it, so the emulated path is proven on a real older kernel.
#
#   scripts/guest/run.sh
#
# Steps (each cached under $UBIO_GUEST_CACHE, default ~/.cache/ubio-guest,
# keyed by package versions, so a second run downloads and rebuilds nothing
# but ubio's own binaries):
# 1. Install what is missing with apt-get (qemu-system-x86, cpio, xz-utils,
#    f2fs-tools, xfsprogs, btrfs-progs, e2fsprogs).
# 2. apt-get download the newest linux-image-6.1.0-*-amd64 (the generic
#    flavour: it has f2fs) and busybox-static; extract the PVH vmlinux from
#    vmlinuz and the modules for virtio-blk, loop, ext4, xfs, btrfs, f2fs
#    and their dependencies (modules.dep from `busybox depmod`).
# 3. A base initramfs (uncompressed cpio): busybox, the modules, mkfs.f2fs,
#    mke2fs, mkfs.xfs, mkfs.btrfs, losetup and mount with their libraries,
#    and scripts/guest/init.sh as /init.
# 4. cargo builds `ubio` and the contract test binaries statically (glibc
#    crt-static, in target/guest) and appends them as a second cpio.
# 5. qemu-system-x86_64 with KVM if a quick boot check passes there, else
#    TCG; a sparse 4 GiB scratch disk; serial console to a log file.
# 6. The guest prints GUEST-RESULT lines; this script checks that every
#    filesystem has a passing probe and test binary, prints a summary and
#    exits non-zero on any failure. The disk image and temporary files are
#    removed on exit, failure or Ctrl-C.
#
# Environment: UBIO_GUEST_FS (default "f2fs ext4 xfs btrfs"),
# UBIO_GUEST_STREAM_MB (the contract's big streams, default 256: 4x the
# 64 MiB bound), UBIO_GUEST_TIMEOUT (seconds, default 900),
# UBIO_GUEST_ACCEL (kvm or tcg, to skip the check), UBIO_GUEST_KEEP_LOG
# (a path to copy the console log to).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD

FILESYSTEMS=${UBIO_GUEST_FS:-"f2fs ext4 xfs btrfs"}
STREAM_MB=${UBIO_GUEST_STREAM_MB:-256}
TIMEOUT=${UBIO_GUEST_TIMEOUT:-900}
CACHE=${UBIO_GUEST_CACHE:-$HOME/.cache/ubio-guest}
TESTS="contract_cache contract_io contract_faults"

started=$SECONDS
phase_start=$SECONDS
phase() {
    local now=$SECONDS
    timings+=("$1 $((now - phase_start))s")
    phase_start=$now
}
timings=()

work=$(mktemp -d /tmp/ubio-guest.XXXXXX)
qemu_pid=
cleanup() {
    if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "guest: interrupted" >&2; exit 130' INT TERM HUP

# 1. Host tools (what is missing), and Rust.
"$root/scripts/install-deps.sh" qemu-system-x86 cpio xz-utils f2fs-tools xfsprogs btrfs-progs e2fsprogs |
    sed 's/^/== guest: /'
export PATH="$PATH:/usr/sbin:/sbin"
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

# 2. Packages: the newest 6.1 generic kernel and busybox-static.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\.0-[0-9]+-amd64$/ && !p {print $2; p = 1}')
if [ -z "$kpkg" ]; then
    kpkg=$(apt-cache pkgnames linux-image-6.1.0- | grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -1)
fi
if [ -z "$kpkg" ]; then
    echo "guest: no linux-image-6.1.0-*-amd64 package in the apt sources" >&2
    exit 1
fi
kver=$(apt-cache policy "$kpkg" | awk '/Candidate:/ {print $2}')
bbver=$(apt-cache policy busybox-static | awk '/Candidate:/ {print $2}')
krel=${kpkg#linux-image-}
mkdir -p "$CACHE/debs"
chmod 755 "$CACHE" "$CACHE/debs"
# One run at a time fills the cache (another run may share it).
exec 9> "$CACHE/.lock"
flock 9
fetch() { # package version
    local f
    f=$(find "$CACHE/debs" -name "$1_$(printf %s "$2" | sed 's/:/%3a/')_*.deb" -print -quit)
    if [ -z "$f" ]; then
        (cd "$CACHE/debs" && apt-get download -q "$1=$2" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
        f=$(find "$CACHE/debs" -name "$1_$(printf %s "$2" | sed 's/:/%3a/')_*.deb" -print -quit)
    fi
    [ -n "$f" ] || { echo "guest: apt-get download $1=$2 failed" >&2; exit 1; }
    echo "$f"
}
kdeb=$(fetch "$kpkg" "$kver")
bbdeb=$(fetch busybox-static "$bbver")
phase download

# The kernel: PVH vmlinux (boots directly, no decompression under TCG) and modules.
kdir="$CACHE/kernel-$kver"
if [ ! -f "$kdir/ok" ]; then
    echo "== guest: extracting $kpkg $kver"
    rm -rf "$kdir" && mkdir -p "$kdir"
    dpkg-deb -x "$kdeb" "$kdir/pkg"
    dpkg-deb -x "$bbdeb" "$kdir/bb"
    vmlinuz="$kdir/pkg/boot/vmlinuz-$krel"
    off=$(LC_ALL=C grep -obUaP -m1 '\xfd7zXZ\x00' "$vmlinuz" | LC_ALL=C cut -d: -f1 | sed -n 1p)
    { tail -c +$((off + 1)) "$vmlinuz" || true; } | xz -dc --single-stream > "$kdir/vmlinux" # tail: SIGPIPE
    "$kdir/bb/bin/busybox" depmod -b "$kdir/pkg" "$krel"
    # The modules wanted, their dependencies first (modules.dep lists each
    # module's dependencies, deepest last), softdeps added by hand.
    dep="$kdir/pkg/lib/modules/$krel/modules.dep"
    order=()
    add() { # kernel/...ko
        local m d
        m=$1
        for seen in "${order[@]}"; do [ "$seen" = "$m" ] && return 0; done
        for d in $(awk -v m="$m:" '$1 == m {for (i = NF; i > 1; i--) print $i}' "$dep"); do
            add "$d"
        done
        order+=("$m")
    }
    for name in crc32c_generic crc32c-intel crc32_generic xxhash_generic blake2b_generic sha256_generic \
        virtio_pci virtio_blk loop ext4 xfs btrfs f2fs; do
        path=$(awk -F: -v n="/$name.ko" '!p && substr($1, length($1) - length(n) + 1) == n {print $1; p = 1}' "$dep")
        [ -n "$path" ] && add "$path"
    done
    mkdir -p "$kdir/modules"
    : > "$kdir/modules/load-order"
    for m in "${order[@]}"; do
        cp "$kdir/pkg/lib/modules/$krel/$m" "$kdir/modules/"
        basename "$m" >> "$kdir/modules/load-order"
    done
    rm -rf "$kdir/pkg"
    touch "$kdir/ok"
fi

# 3. The base initramfs: busybox, modules, filesystem tools and their libraries.
tools="mkfs.f2fs mkfs.ext4 mkfs.xfs mkfs.btrfs losetup mount umount"
toolver=$(dpkg-query -W -f '${Version} ' f2fs-tools e2fsprogs xfsprogs btrfs-progs util-linux mount 2>/dev/null || true)
key=$(cat scripts/guest/init.sh scripts/guest/run.sh "$kdir/modules/load-order" - <<<"$kver $bbver $toolver" | sha256sum | cut -c1-16)
base="$CACHE/base-$key.cpio"
if [ ! -f "$base" ]; then
    echo "== guest: building the base initramfs ($key)"
    r="$work/base"
    mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,lib64,lib/x86_64-linux-gnu,modules,tests,etc,proc,sys,dev,tmp,mnt}
    cp "$kdir/bb/bin/busybox" "$r/bin/busybox"
    ln -s busybox "$r/bin/sh"
    cp "$kdir/modules/"* "$r/modules/"
    cp scripts/guest/init.sh "$r/init"
    chmod 755 "$r/init"
    echo "root:x:0:0:root:/:/bin/sh" > "$r/etc/passwd"
    echo "nobody:x:65534:65534:nobody:/:/bin/sh" >> "$r/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
    for t in $tools; do
        p=$(command -v "$t")
        cp -L "$p" "$r/usr/sbin/$t"
        for lib in $(ldd "$p" | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}'); do
            cp -Ln "$lib" "$r$lib" 2>/dev/null || { mkdir -p "$r$(dirname "$lib")"; cp -Ln "$lib" "$r$lib"; }
        done
    done
    (cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$base.tmp"
    mv "$base.tmp" "$base"
fi
# Only the current kernel and base image are kept.
find "$CACHE" -maxdepth 1 -name 'base-*.cpio' ! -name "base-$key.cpio" -delete
find "$CACHE" -maxdepth 1 -type d -name 'kernel-*' ! -name "kernel-$kver" -exec rm -rf {} +
cp "$base" "$work/base.cpio"
base="$work/base.cpio"
flock -u 9
phase kernel+initramfs

# 4. ubio and the contract tests, static.
echo "== guest: building static ubio and contract tests (target/guest)"
export CARGO_TARGET_DIR="$root/target/guest"
export RUSTFLAGS="-C target-feature=+crt-static"
target=x86_64-unknown-linux-gnu
test_args=()
for t in $TESTS; do test_args+=(--test "$t"); done
cargo build -q --release --target "$target" -p ubio-cli --bin ubio
cargo test --release --target "$target" -p ubio-tests "${test_args[@]}" --no-run 2> "$work/build.log" ||
    { cat "$work/build.log" >&2; exit 1; }
r="$work/bins"
mkdir -p "$r/usr/bin" "$r/tests"
strip -o "$r/usr/bin/ubio" "$CARGO_TARGET_DIR/$target/release/ubio"
for t in $TESTS; do
    exe=$(sed -n "s|.*Executable tests/$t.rs (\(.*\))|\1|p" "$work/build.log" | tail -1)
    [ -n "$exe" ] || { echo "guest: no executable for $t in cargo's output" >&2; cat "$work/build.log" >&2; exit 1; }
    strip -o "$r/tests/$t" "$exe"
done
(cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$work/bins.cpio"
cat "$base" "$work/bins.cpio" > "$work/initramfs.cpio"
phase build

# 5. Boot.
qemu_run() { # accel timeout log cmdline-extra
    local accel=$1 limit=$2 log=$3 extra=$4 cpu=max
    [ "$accel" = kvm ] && cpu=host
    : > "$log"
    qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -smp 2 -m 3072 \
        -nodefaults -display none -no-reboot \
        -kernel "$kdir/vmlinux" -initrd "$work/initramfs.cpio" \
        -append "console=ttyS0 quiet panic=-1 $extra" \
        -serial "file:$log" \
        -drive "file=$work/disk.img,format=raw,if=virtio,cache=unsafe" \
        > "$log.qemu" 2>&1 &
    qemu_pid=$!
    local waited=0
    while kill -0 "$qemu_pid" 2>/dev/null; do
        if [ "$waited" -ge "$limit" ]; then
            echo "guest: no power-off after ${limit}s; stopping qemu" >&2
            kill "$qemu_pid" 2>/dev/null || true
            break
        fi
        sleep 1
        waited=$((waited + 1))
    done
    wait "$qemu_pid" 2>/dev/null || true
    qemu_pid=
}
truncate -s 4G "$work/disk.img"

accel=${UBIO_GUEST_ACCEL:-}
verdict="$CACHE/kvm-verdict-$(uname -r)-$(qemu-system-x86_64 --version | awk 'NR == 1 {print $4}')"
if [ -z "$accel" ] && [ -f "$verdict" ]; then
    accel=$(cat "$verdict")
fi
if [ -z "$accel" ]; then
    accel=tcg
    if [ -w /dev/kvm ]; then
        qemu_run kvm 60 "$work/kvm.log" "ubio.mode=boot-check"
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

echo "== guest: booting $kpkg $kver with $accel (-smp 2, 3 GiB), filesystems: $FILESYSTEMS, streams of $STREAM_MB MiB"
log="$work/console.log"
fs_csv=$(echo "$FILESYSTEMS" | tr ' ' ,)
qemu_run "$accel" "$TIMEOUT" "$log" "ubio.fs=$fs_csv ubio.stream_mb=$STREAM_MB"
[ -n "${UBIO_GUEST_KEEP_LOG:-}" ] && cp "$log" "$UBIO_GUEST_KEEP_LOG"
phase guest

# 6. Results.
tr -d '\r' < "$log" > "$log.txt"
failures=0
echo
echo "== guest summary"
echo "host: $(uname -r); accelerator: $accel; kernel package: $kpkg $kver"
kline=$(grep -m1 '^GUEST-KERNEL ' "$log.txt" || true)
echo "guest kernel: ${kline#GUEST-KERNEL }"
[ -n "$kline" ] || { echo "guest: the guest never started /init"; failures=$((failures + 1)); }
for fs in $FILESYSTEMS; do
    probe=$(grep -m1 "^GUEST-PROBE $fs " "$log.txt" || true)
    if [ -n "$probe" ]; then
        dc=$(echo "$probe" | grep -oE '"dontcache": \{ "available": [a-z]+' | awk '{print $NF}')
        auto=$(echo "$probe" | grep -oE '"auto": "[a-z]+"' | awk -F'"' '{print $4}')
        echo "GUEST-PROBE $fs: RWF_DONTCACHE available=$dc, auto=$auto"
    fi
    for what in probe $TESTS; do
        line=$(grep -m1 "^GUEST-RESULT $fs $what: " "$log.txt" || true)
        if [ -z "$line" ]; then
            echo "GUEST-RESULT $fs $what: FAILED (no result: the guest stopped before it)"
            failures=$((failures + 1))
        else
            echo "$line"
            case "$line" in *": ok"*) ;; *) failures=$((failures + 1)) ;; esac
        fi
    done
done
grep -E '^GUEST-RESULT [a-z0-9]+ (disk|mount|umount): ' "$log.txt" && failures=$((failures + 1))
grep -q '^GUEST-DONE' "$log.txt" || { echo "guest: did not reach the end (see the console log)"; failures=$((failures + 1)); }
echo "timings: ${timings[*]}; total $((SECONDS - started))s"
if [ "$failures" -gt 0 ]; then
    echo "guest: $failures failure(s); the console log's last lines:"
    tail -40 "$log.txt"
    echo "guest: FAILED"
    exit 1
fi
echo "guest: ok"
