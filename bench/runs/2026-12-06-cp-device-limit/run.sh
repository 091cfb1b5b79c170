#!/usr/bin/env bash
# `ubio cp` at the device's limit (issue 37, item 5): cp_limit.py on ext4 over a
# loop device on /dev/shm (the fastest device here) and on a loop device over a
# file on the disk, 2 GiB, 5 rounds each in a new random order. Root.
#
#   bench/runs/2026-12-06-cp-device-limit/run.sh
set -euo pipefail
# UBIO_BENCH_PREFIX="CMD ARGS": a command each measured step runs under (for
# example a lock that keeps a shared machine quiet); default none.
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
nice -n 10 cargo build -q --release -p ubio-cli
ubio=$root/target/release/ubio
mnt=$(mktemp -d)
img="" loop=""
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt"
    [ -z "$loop" ] || losetup -d "$loop"
    [ -z "$img" ] || rm -f "$img"
    rmdir "$mnt"
}
trap cleanup EXIT
for target in shm disk; do
    case $target in
        shm) img=$(mktemp /dev/shm/ubio-cp-limit.XXXXXX) ;;
        disk) img=$(mktemp "$root/target/ubio-cp-limit.XXXXXX") ;;
    esac
    truncate -s 6G "$img"
    # Initialized now, not by ext4lazyinit in the background of the first rounds.
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$img"
    loop=$(losetup -f --show "$img")
    mount "$loop" "$mnt"
    "${prefix[@]}" python3 "$here/cp_limit.py" "$ubio" "$mnt" "$here/$target.json" \
        | tee "$here/$target.txt"
    umount "$mnt"; losetup -d "$loop"; rm -f "$img"
    img="" loop=""
done
