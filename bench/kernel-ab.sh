#!/usr/bin/env bash
# Kernel A/B of the benchmark matrix: the same `ubio-bench matrix` on this
# machine and in QEMU guests booting Debian's Linux 6.12 and 6.1
# (scripts/guest/run.sh), then `ubio-bench compare` of the host's matrix
# against each guest's, point by point, against the runs' own noise.
#
#   bench/kernel-ab.sh OUT [MATRIX-ARGS...]
#
# Where the guests have no KVM (this machine: QEMU's software emulation,
# TCG), their timings say nothing about the kernel: only what does not
# depend on speed is compared (the page-cache footprints and reclaim per
# GB: `compare --no-timings`), and each comparison says so.
#
# OUT gets host/ and guest-<kernel>/ (the matrices), ab-<kernel>.md (the
# comparisons), console-<kernel>.log and guest.log. The default matrix is
# small (seq-write and seq-read, one thread, 0.5, 1 and 2 times a 256 MiB
# memory cgroup, buffered, dontcache, odirect and ubio, ext4 over /dev/shm,
# 2 rounds); MATRIX-ARGS replace it (the same on both sides; give --seed so
# that both run their points in the same order).
#
# Environment: UBIO_AB_KERNELS (default "6.12 6.1"); UBIO_AB_HOST_PREFIX and
# UBIO_AB_GUEST_PREFIX, a command to run each part under (for example a
# lock that keeps a shared machine quiet for the host's timed runs);
# UBIO_GUEST_ACCEL and UBIO_GUEST_TIMEOUT go to scripts/guest/run.sh.
# Needs root. Exit status: 0 no regression, 1 a regression or a failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -ge 1 ] || { echo "usage: bench/kernel-ab.sh OUT [MATRIX-ARGS...]" >&2; exit 2; }
out=$1
shift
if [ $# -eq 0 ]; then
    set -- --targets ext4/shm --workloads seq-write,seq-read --threads 1 --datasets 0.5,1,2 \
        --memory 256M --pressure cgroup --modes buffered,dontcache,odirect,ubio --rounds 2 \
        --no-ceiling --seed 27
fi
kernels=${UBIO_AB_KERNELS:-"6.12 6.1"}
read -r -a host_prefix <<< "${UBIO_AB_HOST_PREFIX:-}"
read -r -a guest_prefix <<< "${UBIO_AB_GUEST_PREFIX:-}"
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
cargo build -q --release -p ubio-bench -p ubio-cli
bench=$PWD/target/release/ubio-bench

echo "== kernel-ab: the host ($(uname -r)): ubio-bench matrix $*"
UBIO_EXE=$PWD/target/release/ubio "${host_prefix[@]}" "$bench" matrix "$@" --out "$out/host"

echo "== kernel-ab: the guests ($kernels): the same matrix"
rc=0
UBIO_GUEST_KERNELS=$kernels UBIO_GUEST_FS=none UBIO_GUEST_NFS= UBIO_GUEST_POWERCUT= UBIO_GUEST_DISKFAULT= \
    UBIO_GUEST_MATRIX="$*" UBIO_GUEST_KEEP_LOG="$out" \
    "${guest_prefix[@]}" scripts/guest/run.sh 2>&1 | tee "$out/guest.log" || rc=1
accel=$(sed -n 's/^host: .*accelerator: \([a-z]*\).*/\1/p' "$out/guest.log" | tail -1)
timings=()
note=
if [ "$accel" != kvm ]; then
    timings=(--no-timings)
    note="The guests ran under QEMU's software emulation (${accel:-tcg}): their timings are not comparable with the host's, so only the page-cache footprints and reclaim per GB are compared."
fi

for k in $kernels; do
    log="$out/console-$k.log"
    dir="$out/guest-$k"
    rm -rf "$dir" && mkdir -p "$dir"
    if ! tr -d '\r' < "$log" | sed -n '/^GUEST-MATRIX-BEGIN$/,/^GUEST-MATRIX-END$/p' | sed '1d;$d' |
        base64 -d | tar -xzf - -C "$dir"; then
        echo "kernel-ab: no matrix came back from the $k guest (see $log)" >&2
        rc=1
        continue
    fi
    grep -a '^GUEST-MATRIX:' "$log" | tr -d '\r' | sed "s/^/  $k: /" || true
    {
        echo "# Kernel A/B: this machine against Linux $k in QEMU ($accel)"
        echo
        [ -n "$note" ] && echo "$note" && echo
        "$bench" compare "$out/host" "$dir" "${timings[@]}" || true
    } > "$out/ab-$k.md"
    if ! "$bench" compare "$out/host" "$dir" "${timings[@]}" > /dev/null; then
        echo "kernel-ab: Linux $k regressed against the host (or could not be compared): $out/ab-$k.md"
        rc=1
    fi
    echo "== kernel-ab: $out/ab-$k.md"
done
exit $rc
