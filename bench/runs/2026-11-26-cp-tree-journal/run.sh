#!/usr/bin/env bash
# The after-rm case of ../2026-11-26-cp-tree (cp -r of a 20,000-file tree
# right after rm -rf of the previous copy) on an ext4 WITH a journal: the
# slowdown seen there comes from ext4's recently_deleted() inode skip, which
# the kernel applies only to an ext4 without a journal (fs/ext4/ialloc.c:
# find_inode_bit, check_recently_deleted = !s_journal), as this VM's root
# filesystem is (/sys/fs/ext4/vda/journal_task: <none>).
#
#   bench/runs/2026-11-26-cp-tree-journal/run.sh BEFORE MAIN FIXED [ROUNDS] [JOURNAL]
#
# JOURNAL: yes (default: mkfs.ext4's defaults) or no (mkfs.ext4 -O
# ^has_journal, the control). The tree and the copies live on a fresh
# ext4 of 8 GiB on a loop device over a sparse file under target/ (on the
# VM's disk); it is unmounted and removed on exit. Run it alone on the
# machine. The copies: bench/cp-tree.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
before=$(realpath "$1") main=$(realpath "$2") fixed=$(realpath "$3") rounds=${4:-5} journal=${5:-yes}
work=$(realpath -m target/bench-cp-journal)
mkdir -p "$work/mnt"
img=$work/ext4.img
dev=
cleanup() {
    cd /
    mountpoint -q "$work/mnt" && umount "$work/mnt"
    [ -n "$dev" ] && losetup -d "$dev"
    rm -rf "$work"
}
trap cleanup EXIT
truncate -s 8G "$img"
opts=()
[ "$journal" = no ] && opts=(-O ^has_journal)
mkfs.ext4 -q -F "${opts[@]}" "$img"
dev=$(losetup --find --show "$img")
mount "$dev" "$work/mnt"
echo "ext4 on $dev: journal_task $(cat /sys/fs/ext4/"${dev#/dev/}"/journal_task)"
VERSIONS=$here/versions-journal-$journal.txt \
    "$here/../../cp-tree.sh" "$work/mnt" "$here/journal-$journal" before="$before" main="$main" fixed="$fixed" -- \
    --rounds "$rounds" --seed 2622 --large-size 256
