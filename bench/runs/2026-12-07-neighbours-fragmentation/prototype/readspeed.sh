#!/usr/bin/env bash
# What reading ahead in 4 KiB folios costs a single cold reader (read.py),
# against the kernel's readahead, on two devices: this VM's disk (a file
# under target/, 8 MiB readahead) and ext4 on a loop device over /dev/shm
# (the fastest device here; the loop device's readahead as the kernel sets
# it). ROUNDS rounds (default 5), the two ways in a new random order each.
# Prints a TSV (device, round, how, seconds, MB/s, CPU s/GB) and the medians.
# Needs root and ubio built (target/release/ubio: it says the readahead);
# removes its files, mount and loop device, also on failure.
#
#   bench/runs/2026-12-07-neighbours-fragmentation/prototype/readspeed.sh [ROUNDS] [SIZE_MIB]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
rounds=${1:-5}
size=${2:-2048}
scratch=$(mktemp -d "$repo/target/readspeed.XXXXXX")
img=/dev/shm/ubio-readspeed-$$.img
loop=
cleanup() {
    mountpoint -q "$scratch/shm" && umount "$scratch/shm"
    [ -n "$loop" ] && losetup -d "$loop"
    rm -f "$img"
    rm -rf "$scratch"
}
trap cleanup EXIT
truncate -s $((size + 512))M "$img"
mkfs.ext4 -q -F "$img"
loop=$(losetup --find --show "$img")
mkdir "$scratch/shm"
mount "$loop" "$scratch/shm"
declare -A file=([disk]="$scratch/data" [shm-ext4]="$scratch/shm/data")
for dev in disk shm-ext4; do
    head -c $((size << 20)) /dev/urandom >"${file[$dev]}"
    sync "${file[$dev]}"
done
readahead_kb() { "$repo/target/release/ubio" probe "$1" | sed -n 's/^readahead: *//p'; }
echo "readahead: disk $(readahead_kb "$scratch"), shm-ext4 $(readahead_kb "$scratch/shm")"
printf 'device\tround\thow\tsecs\tMB/s\tCPU s/GB\n'
for r in $(seq 1 "$rounds"); do
    for dev in disk shm-ext4; do
        for how in $(printf 'kernel-readahead\nwillneed-steps\n' | shuf); do
            printf '%s\t%s\t%s\n' "$dev" "$r" "$(python3 "$here/read.py" "$how" "${file[$dev]}")"
        done
    done
done
