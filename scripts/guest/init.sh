#!/bin/sh
# /init of the test guest that scripts/guest/run.sh boots (busybox sh, PID 1).
#
# For each filesystem named by ubio.fs= on the kernel command line: mkfs on
# the scratch disk /dev/vda, mount it at /mnt, `ubio probe --json`, run each
# contract test binary in /tests in guest mode (UBIO_TEST_ONLY_DIR=1) against
# it, unmount. Every outcome is one `GUEST-RESULT <fs> <what>: ok|FAILED ...`
# line on the serial console; the host parses them. Powers off at the end.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/

/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /tmp /mnt
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o size=64m tmpfs /tmp

say() { echo "$*" > /dev/console; }
finish() {
    say "GUEST-DONE"
    sync
    poweroff -f
    echo o > /proc/sysrq-trigger
    sleep 30
}

arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^ubio\.$1=//p"; }
FILESYSTEMS=$(arg fs | tr , ' ')
STREAM_MB=$(arg stream_mb)
MODE=$(arg mode)

say "GUEST-KERNEL $(uname -r) $(uname -m), $(grep -c ^processor /proc/cpuinfo) CPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB"
if [ "$MODE" = boot-check ]; then
    say "GUEST-BOOTED"
    finish
fi

# Modules in dependency order (written by run.sh); softdeps (crc32c, xxhash,
# blake2b) are in the list by hand. Built-in or already-loaded ones fail quietly.
while read -r m; do
    insmod "/modules/$m" 2>/dev/null
done < /modules/load-order

for _ in $(seq 50); do
    [ -b /dev/vda ] && break
    sleep 0.1
done
if [ ! -b /dev/vda ]; then
    say "GUEST-RESULT all disk: FAILED no /dev/vda"
    finish
fi

# Full paths: busybox sh runs its own applets (mke2fs, mount) before $PATH.
mkfs_for() {
    case "$1" in
    f2fs) /usr/sbin/mkfs.f2fs -q -f /dev/vda ;;
    ext4) /usr/sbin/mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda ;;
    xfs) /usr/sbin/mkfs.xfs -q -f /dev/vda ;;
    btrfs) /usr/sbin/mkfs.btrfs -q -f /dev/vda ;;
    *) echo "unknown filesystem $1"; return 1 ;;
    esac
}

for fs in $FILESYSTEMS; do
    opts=
    [ "$fs" = ext4 ] && opts="-o noinit_itable"
    # shellcheck disable=SC2086
    if ! mkfs_for "$fs" > /tmp/mkfs.log 2>&1 || ! mount -t "$fs" $opts /dev/vda /mnt 2>> /tmp/mkfs.log; then
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-RESULT $fs mount: FAILED mkfs or mount"
        continue
    fi
    mkdir -p /mnt/test /mnt/tmp
    chmod 755 /mnt /mnt/test

    ubio probe /mnt/test --json > /tmp/probe.json 2>&1
    say "GUEST-PROBE $fs $(tr -d '\n' < /tmp/probe.json | tr -s ' ')"
    if grep -A1 '"dontcache"' /tmp/probe.json | grep -q '"available": false' &&
        grep -q '"auto": "emulated"' /tmp/probe.json; then
        say "GUEST-RESULT $fs probe: ok (no RWF_DONTCACHE, auto = emulated)"
    else
        say "GUEST-RESULT $fs probe: FAILED (expected no RWF_DONTCACHE and auto = emulated)"
    fi

    for t in /tests/*; do
        name=${t##*/}
        start=$(date +%s)
        say "== $fs $name"
        (
            cd /mnt/test &&
                UBIO_TEST_ONLY_DIR=1 UBIO_TEST_DIR=/mnt/test UBIO_TEST_STREAM_MB=$STREAM_MB \
                    UBIO_NO_SKIP=1 TMPDIR=/mnt/tmp RUST_BACKTRACE=1 \
                    "$t" --test-threads=1 --nocapture
            echo $? > /tmp/rc
        ) 2>&1 | tee /tmp/out > /dev/console
        rc=$(cat /tmp/rc)
        secs=$(($(date +%s) - start))
        summary=$(grep '^test result: ' /tmp/out | tail -1 | sed 's/^test result: //; s/; [0-9]* measured.*//; s/\.//')
        if [ "$rc" = 0 ] && grep -q '^test result: ok' /tmp/out; then
            say "GUEST-RESULT $fs $name: ok, ${summary#ok } (${secs}s)"
        else
            say "GUEST-RESULT $fs $name: FAILED (exit $rc) ${summary} (${secs}s)"
        fi
    done
    rm -rf /mnt/test /mnt/tmp
    umount /mnt || say "GUEST-RESULT $fs umount: FAILED"
done
finish
