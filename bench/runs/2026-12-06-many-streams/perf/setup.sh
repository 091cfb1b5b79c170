#!/bin/bash
# ext4 on a loop device over /dev/shm, 64 files of 32 MiB and one shared 2 GiB file.
set -e
IMG=/dev/shm/streams-perf.img; MNT=/tmp/streams-perf/mnt
truncate -s 6G $IMG
mkfs.ext4 -q -F $IMG
LOOP=$(losetup --find --show $IMG); echo $LOOP > /tmp/streams-perf/loop
mkdir -p $MNT; mount $LOOP $MNT
mkdir -p $MNT/b/data
for t in $(seq 0 63); do head -c 32M /dev/urandom > $MNT/b/data/t$t-f0; done
for t in $(seq 0 63); do cat $MNT/b/data/t$t-f0; done > $MNT/b/data/shared
sync
