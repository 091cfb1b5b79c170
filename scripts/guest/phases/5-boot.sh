# shellcheck shell=bash
# A phase of scripts/guest/run.sh, which sources the phases in order: the
# settings, helpers and variables used here are run.sh's (not run alone).

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
        -drive "file=$work/disk-$k.img,format=raw,if=virtio,cache=unsafe,discard=unmap" \
        ${5:+-drive "file=$5,format=raw,if=virtio,cache=unsafe,discard=unmap"} \
        > "$log.qemu" 2>&1 &
    qemu_pid=$!
    qemu_pids+=("$qemu_pid")
}
# Each qemu's CPU seconds (user + system, last seen) and wall seconds until
# it exited: CPU time does not depend on what else the host is running.
# And the most its disks held at once (MiB allocated in the sparse images,
# the memory they take where TMPDIR is a tmpfs).
declare -A qemu_cpu qemu_wall
disk_peak_mib=0
tck=$(getconf CLK_TCK)
qemu_wait() { # limit pid...: wait for all, stop those past the limit
    local limit=$1 p alive t t0=$SECONDS held
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
        held=$(du -cm "$work"/*.img 2>/dev/null | awk 'END {print $1 + 0}')
        [ "$held" -gt "$disk_peak_mib" ] && disk_peak_mib=$held
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
