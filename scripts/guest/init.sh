#!/bin/sh
# /init of the test guest that scripts/guest/run.sh boots (busybox sh, PID 1).
#
# For each filesystem named by ubio.fs= on the kernel command line: mkfs on
# the scratch disk /dev/vda, mount it at /mnt (for nfs: an ext4 at /srv,
# exported by the kernel NFS server over loopback and mounted by the kernel
# NFS client at /mnt), `ubio probe --json`, then
# every test of every contract test binary in /tests, one process per test
# (so each has its own time and verdict), in guest mode
# (UBIO_TEST_ONLY_DIR=1) against it; unmount. With ubio.cgroup=v2 (the
# kernel booted with cgroup_no_v1=all) the unified hierarchy is mounted at
# /sys/fs/cgroup first, its memory controller enabled for children. Then
# the command's test binaries named by ubio.cli_tests= (in /cli-tests: the
# policy daemon's) on an ext4. Prints on the serial console:
#   GUEST-KERNEL <uname -r> ...
#   GUEST-CGROUP <v2 and the controllers enabled>
#   GUEST-PROBE <fs> <probe JSON on one line>
#   GUEST-TEST <fs> <binary>::<test>: ok|FAILED ... (<seconds>s)
#   GUEST-TEST cli <binary>::<test>: ok|FAILED ... (<seconds>s)
#   GUEST-FS <fs>: FAILED <what> (mkfs, mount or umount)
#   GUEST-CLI: FAILED <what> (the command's tests' filesystem)
#   GUEST-MATRIX: ok|FAILED ... (scripts/guest/matrix.sh, when run.sh put one in)
#   GUEST-DONE <seconds>s
# The host judges them. Powers off at the end.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/

/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /tmp /mnt
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o size=64m tmpfs /tmp

say() { echo "$*" > /dev/console; }
booted=$(date +%s)
finish() {
    say "GUEST-DONE $(($(date +%s) - booted))s"
    sync
    poweroff -f
    echo o > /proc/sysrq-trigger
    sleep 30
}

arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^ubio\.$1=//p"; }
FILESYSTEMS=$(arg fs | tr , ' ')
STREAM_MB=$(arg stream_mb)
ONLY=$(arg only)     # binary::test: that test alone (run.sh's UBIO_GUEST_ONLY)
REPEAT=$(arg repeat) # times each test runs (UBIO_GUEST_REPEAT)
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

# cgroup v2 alone, as systemd mounts it (nsdelegate), with the memory,
# io and pids controllers enabled for children (memory must be; the others
# where this kernel has them).
if [ "$(arg cgroup)" = v2 ]; then
    if mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup &&
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control; then
        for c in io pids cpu; do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; done
        say "GUEST-CGROUP v2 ($(cat /sys/fs/cgroup/cgroup.subtree_control))"
    else
        say "GUEST-CGROUP v2: FAILED (no cgroup2 mount with the memory controller)"
    fi
fi

for _ in $(seq 50); do
    [ -b /dev/vda ] && break
    sleep 0.1
done
if [ ! -b /dev/vda ]; then
    for fs in $FILESYSTEMS; do say "GUEST-FS $fs: FAILED no /dev/vda"; done
    finish
fi

# The kernel NFS server, NFSv4 only (so neither rpcbind nor statd): nfsd
# and mountd (which answers nfsd's export upcalls) from Debian's
# nfs-kernel-server. Started at boot, so that its grace period (no OPEN
# before it ends; 10 s, the least) passes while other filesystems are tested.
nfs_server_start() {
    ip link set lo up
    mkdir -p /proc/fs/nfsd /var/lib/nfs/v4recovery /srv /run
    mount -t nfsd nfsd /proc/fs/nfsd &&
        echo 10 > /proc/fs/nfsd/nfsv4leasetime &&
        echo 10 > /proc/fs/nfsd/nfsv4gracetime &&
        : > /etc/exports && : > /var/lib/nfs/etab && : > /var/lib/nfs/rmtab &&
        /usr/sbin/rpc.mountd -N 2 -N 3 --no-udp &&
        /usr/sbin/rpc.nfsd -N 3 --no-udp -p 2049 4
}
case ",$(arg fs)," in
*,nfs,*)
    nfs_server_start > /tmp/nfsd.log 2>&1 || { cat /tmp/nfsd.log > /dev/console; say "GUEST-FS nfs: FAILED nfsd did not start"; }
    ;;
esac

# Full paths: busybox sh runs its own applets (mke2fs, mount) before $PATH.
mkfs_for() {
    case "$1" in
    f2fs) /usr/sbin/mkfs.f2fs -q -f /dev/vda ;;
    ext4 | nfs) /usr/sbin/mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda ;;
    xfs) /usr/sbin/mkfs.xfs -q -f /dev/vda ;;
    btrfs) /usr/sbin/mkfs.btrfs -q -f /dev/vda ;;
    *) echo "unknown filesystem $1"; return 1 ;;
    esac
}

# Mount the filesystem to test at /mnt. nfs: an ext4 at /srv, exported to
# 127.0.0.1 and mounted over NFSv4.2 (the kernel parses the options itself:
# no mount.nfs helper, so the address is given). No fsid=0 export: the
# NFSv4 pseudo-root is /, so tests can export more (stackfs::NfsMount).
mount_fs() {
    case "$1" in
    nfs)
        mount -t ext4 -o noinit_itable /dev/vda /srv &&
            /usr/sbin/exportfs -o rw,sync,no_root_squash,no_subtree_check,insecure 127.0.0.1:/srv &&
            /usr/sbin/mount -i -t nfs4 -o vers=4.2,addr=127.0.0.1,clientaddr=127.0.0.1 127.0.0.1:/srv /mnt
        ;;
    ext4) mount -t ext4 -o noinit_itable /dev/vda /mnt ;;
    *) mount -t "$1" /dev/vda /mnt ;;
    esac
}
umount_fs() {
    umount /mnt || return 1
    if [ "$1" = nfs ]; then
        /usr/sbin/exportfs -u 127.0.0.1:/srv && umount /srv
    fi
}

# Every test of binary $2, one process per test, run in directory $3 with
# what the caller exported, each verdict a `GUEST-TEST $1 <binary>::<test>`
# line (ubio.only= picks one, ubio.repeat= runs each that many times).
run_binary() {
    label=$1 t=$2 dir=$3 bin=${2##*/}
    "$t" --list --format terse 2> /dev/console | sed -n 's/: test$//p' > /tmp/list
    if [ -n "$ONLY" ]; then grep -x "${ONLY#*::}" /tmp/list > /tmp/list.only; mv /tmp/list.only /tmp/list; fi
    [ -s /tmp/list ] || say "GUEST-TEST $label $bin::list: FAILED (no tests listed)"
    for _ in $(seq "${REPEAT:-1}"); do cat /tmp/list; done > /tmp/list.all
    while read -r name; do
        start=$(date +%s)
        say "== $label $bin::$name"
        (
            cd "$dir" &&
                UBIO_NO_SKIP=1 TMPDIR=/mnt/tmp RUST_BACKTRACE=1 \
                    "$t" --exact "$name" --test-threads=1 --nocapture
            echo $? > /tmp/rc
        ) 2>&1 < /dev/null | tee /tmp/out > /dev/console
        rc=$(cat /tmp/rc)
        secs=$(($(date +%s) - start))
        if [ "$rc" = 0 ] && grep -q '^test result: ok. 1 passed' /tmp/out; then
            say "GUEST-TEST $label $bin::$name: ok (${secs}s)"
        elif [ "$rc" = 0 ] && grep -q '^test result: ok. 0 passed; 0 failed; 1 ignored' /tmp/out; then
            say "GUEST-TEST $label $bin::$name: ok, ignored (${secs}s)"
        else
            say "GUEST-TEST $label $bin::$name: FAILED (exit $rc) (${secs}s)"
        fi
    done < /tmp/list.all
}

for fs in $FILESYSTEMS; do
    if ! mkfs_for "$fs" > /tmp/mkfs.log 2>&1 || ! mount_fs "$fs" >> /tmp/mkfs.log 2>&1; then
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-FS $fs: FAILED mkfs or mount"
        continue
    fi
    mkdir -p /mnt/test /mnt/tmp
    chmod 755 /mnt /mnt/test

    ubio probe /mnt/test --json > /tmp/probe.json 2>&1
    say "GUEST-PROBE $fs $(tr -d '\n' < /tmp/probe.json | tr -s ' ')"

    for t in /tests/*; do
        [ -n "$ONLY" ] && [ "${t##*/}" != "${ONLY%%::*}" ] && continue
        (
            export UBIO_TEST_ONLY_DIR=1 UBIO_TEST_DIR=/mnt/test UBIO_TEST_STREAM_MB=$STREAM_MB
            run_binary "$fs" "$t" /mnt/test
        )
    done
    rm -rf /mnt/test /mnt/tmp
    umount_fs "$fs" || say "GUEST-FS $fs: FAILED umount"
done

# The command's tests (run.sh's UBIO_GUEST_POLICY): on an ext4 at /mnt, where
# the paths cargo compiled into them lead (the host checkout's target
# directory: their scratch directories, and `ubio` in it), with GNU's
# programs first on the PATH.
CLI_TESTS=$(arg cli_tests | tr , ' ')
if [ -n "$CLI_TESTS" ]; then
    . /usr/share/ubio/guest.env
    if mkfs_for ext4 > /tmp/mkfs.log 2>&1 && mount_fs ext4 >> /tmp/mkfs.log 2>&1; then
        mkdir -p /mnt/tmp /mnt/target && ln -s /mnt/target "$UBIO_HOST_TARGET" &&
            mkdir -p "$UBIO_BIN_DIR" && cp /usr/bin/ubio "$UBIO_BIN_DIR/ubio" && chmod 755 /mnt /mnt/target ||
            say "GUEST-CLI: FAILED (the tests' paths under $UBIO_HOST_TARGET)"
        for bin in $CLI_TESTS; do
            (
                export PATH=/opt/gnu/bin:$PATH UBIO_TEST_GOCOPY=/usr/bin/gocopy
                [ -n "$(arg log)" ] && export UBIO_LOG="$(arg log)"
                run_binary cli "/cli-tests/$bin" /mnt/tmp
            )
        done
        rm -f "$UBIO_HOST_TARGET"
        umount_fs ext4 || say "GUEST-CLI: FAILED (umount)"
    else
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-CLI: FAILED (mkfs or mount of the ext4)"
    fi
fi

# The power-cut suite (run.sh's UBIO_GUEST_POWERCUT), then the disk-fault
# suite (UBIO_GUEST_DISKFAULT): images on an xfs on the scratch disk (a
# replay point's copy is a reflink); what fails a power cut is kept and
# written to the second disk as a tar, for run.sh to keep.
PC_FS=$(arg powercut | tr , ' ')
DF_FS=$(arg diskfault | tr , ' ')
if [ -n "$PC_FS$DF_FS" ]; then
    if /usr/sbin/mkfs.xfs -q -f /dev/vda > /tmp/mkfs.log 2>&1 && mkdir -p /scratch && mount -t xfs /dev/vda /scratch; then
        for fs in $PC_FS; do
            start=$(date +%s)
            /usr/bin/ubio-powercut --fs "$fs" --backends "$(arg pc_backends)" --workloads "$(arg pc_workloads)" \
                --mib "$(arg pc_mib)" --direct-writes "$(arg direct_writes)" \
                --work /scratch --keep /scratch/kept --ubio /usr/bin/ubio --cp /opt/gnu/bin/cp \
                > /dev/console 2>&1 ||
                say "GUEST-POWERCUT: FAILED on $fs (exit $?, $(($(date +%s) - start))s)"
        done
        if [ -d /scratch/kept ] && [ -b /dev/vdb ]; then
            tar -cf /dev/vdb -C /scratch kept && say "GUEST-POWERCUT: kept images written to the second disk"
        fi
        for fs in $DF_FS; do
            start=$(date +%s)
            /usr/bin/ubio-diskfault --fs "$fs" --backends "$(arg df_backends)" --mib "$(arg df_mib)" \
                --direct-writes "$(arg direct_writes)" \
                --work /scratch --ubio /usr/bin/ubio > /dev/console 2>&1 ||
                say "GUEST-DISKFAULT: FAILED on $fs (exit $?, $(($(date +%s) - start))s)"
        done
        umount /scratch
    else
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-POWERCUT: FAILED (no xfs for the images)"
    fi
fi

# The ext4 tail detector (run.sh's UBIO_GUEST_TAILDETECT: its arguments,
# '+' for spaces): its scratch ext4's backing file on an xfs on the scratch
# disk, as the power-cut suite's images.
TD_ARGS=$(arg taildetect | tr + ' ')
if [ -n "$TD_ARGS" ]; then
    if /usr/sbin/mkfs.xfs -q -f /dev/vda > /tmp/mkfs.log 2>&1 && mkdir -p /scratch && mount -t xfs /dev/vda /scratch; then
        # shellcheck disable=SC2086
        /usr/bin/ubio-taildetect --backing-dir /scratch $TD_ARGS > /dev/console 2>&1 ||
            say "GUEST-TAILDETECT: exit $?"
        umount /scratch
    else
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-TAILDETECT: FAILED (no xfs for the backing file)"
    fi
fi

# A Python script of the project's (run.sh's UBIO_GUEST_PYTHON), on an ext4.
if [ -f /usr/share/ubio/script.py ]; then
    if mkfs_for ext4 > /tmp/mkfs.log 2>&1 && mount_fs ext4 >> /tmp/mkfs.log 2>&1; then
        mkdir -p /mnt/data
        start=$(date +%s)
        # shellcheck disable=SC2046
        (cd /mnt && PATH=/opt/gnu/bin:$PATH python3 /usr/share/ubio/script.py --dir /mnt/data \
            $(cat /usr/share/ubio/script.args) 2> /tmp/script.err; echo $? > /tmp/script.rc) |
            sed 's/^/GUEST-SCRIPT /' > /dev/console
        sed 's/^/script: /' /tmp/script.err > /dev/console
        say "GUEST-SCRIPT-DONE exit $(cat /tmp/script.rc) ($(($(date +%s) - start))s)"
        umount_fs ext4
    else
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-SCRIPT-DONE FAILED (no ext4 on the scratch disk)"
    fi
fi

# A benchmark matrix (run.sh's UBIO_GUEST_MATRIX).
[ -f /usr/share/ubio/matrix.sh ] && . /usr/share/ubio/matrix.sh
finish
