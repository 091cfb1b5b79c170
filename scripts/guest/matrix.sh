# Sourced by scripts/guest/init.sh when run.sh put a matrix into the guest
# (UBIO_GUEST_MATRIX): runs `ubio-bench matrix` with the arguments in
# /usr/share/ubio/matrix.args on an ext4 on the scratch disk (its loop
# devices' disk backing files go there, its /dev/shm ones in a tmpfs of
# the guest's memory), in a memory cgroup of cgroup v2, and prints the
# matrix (matrix.json and each point's report.json, as a gzipped tar in
# base64) between GUEST-MATRIX-BEGIN and GUEST-MATRIX-END on the console
# for the host to take (bench/kernel-ab.sh). Prints GUEST-MATRIX: ok or
# FAILED.
matrix_run() {
    local start rc
    start=$(date +%s)
    mkdir -p /sys/fs/cgroup /dev/shm /scratch
    mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
    mount -t tmpfs -o size=80% tmpfs /dev/shm
    mount -t tracefs none /sys/kernel/tracing 2>/dev/null
    if ! /usr/sbin/mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda > /tmp/mkfs.log 2>&1 ||
        ! mount -t ext4 -o noinit_itable /dev/vda /scratch; then
        cat /tmp/mkfs.log > /dev/console
        say "GUEST-MATRIX: FAILED (no ext4 on the scratch disk)"
        return
    fi
    mkdir -p /scratch/tmp
    # shellcheck disable=SC2046
    (cd /scratch && TMPDIR=/scratch/tmp UBIO_EXE=/usr/bin/ubio /usr/bin/ubio-bench matrix \
        $(cat /usr/share/ubio/matrix.args) --out /scratch/matrix; echo $? > /tmp/matrix.rc) 2>&1 |
        sed 's/^/matrix: /' > /dev/console
    rc=$(cat /tmp/matrix.rc)
    if [ -f /scratch/matrix/matrix.json ]; then
        say "GUEST-MATRIX-BEGIN"
        (cd /scratch/matrix && tar -cf - matrix.json points/*/report.json) | gzip -c | base64 > /dev/console
        say "GUEST-MATRIX-END"
    fi
    if [ "$rc" = 0 ]; then
        say "GUEST-MATRIX: ok ($(($(date +%s) - start))s)"
    else
        say "GUEST-MATRIX: FAILED (ubio-bench matrix exited $rc after $(($(date +%s) - start))s)"
    fi
    umount /scratch
}
matrix_run
