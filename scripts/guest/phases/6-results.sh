# shellcheck shell=bash
# A phase of scripts/guest/run.sh, which sources the phases in order: the
# settings, helpers and variables used here are run.sh's (not run alone).

# 6. Results: one line per kernel and filesystem.
failures=0
echo
echo "== guest summary"
echo "host: $(uname -r); accelerator: $accel; streams of $STREAM_MB MiB;" \
    "the scratch disks held at most $disk_peak_mib MiB at once (on $(df --output=fstype "$work" | tail -1))"
for k in $KERNELS; do
    log="$work/console-$k.log.txt"
    tr -d '\r' < "$work/console-$k.log" > "$log"
    read -r want_cs want_dc want_auto < <(expect_of "$k")
    kline=$(grep -m1 '^GUEST-KERNEL ' "$log" || true)
    secs=$(sed -n 's/^GUEST-DONE \([0-9]*\)s$/\1/p' "$log" | tail -1)
    p=${kpid[$k]}
    echo "guest kernel: ${kline#GUEST-KERNEL }${kline:+; }${kpkg[$k]} ${kver[$k]}; ${secs:-?}s from /init to power-off, qemu ${qemu_wall[$p]:-?}s wall, ${qemu_cpu[$p]:-?}s CPU"
    kfail=0
    if [ -z "$kline" ]; then
        echo "GUEST-RESULT $k all: FAILED (the guest never started /init)"
        kfail=1
    fi
    for fs in $(fs_of "$k"); do
        why=()
        probe=$(grep -m1 "^GUEST-PROBE $fs " "$log" || true)
        cs=$(echo "$probe" | sed -nE 's/.*"cachestat": \{ "available": ([a-z]+).*/\1/p')
        dc=$(echo "$probe" | sed -nE 's/.*"dontcache": \{ "available": ([a-z]+).*/\1/p')
        auto=$(echo "$probe" | sed -nE 's/.*"auto": "([a-z]+)".*/\1/p')
        if [ -z "$probe" ]; then
            why+=("no probe")
        elif [ "$cs" != "$want_cs" ] || [ "$dc" != "$want_dc" ] || [ "$auto" != "$want_auto" ]; then
            why+=("probe: expected cachestat=$want_cs, RWF_DONTCACHE=$want_dc, auto=$want_auto")
        fi
        grep -E "^GUEST-FS $fs: FAILED" "$log" | sed 's/^GUEST-FS [a-z0-9]*: FAILED //' > "$work/fsfail" || true
        while read -r l; do why+=("$l"); done < "$work/fsfail"
        parts=()
        fs_secs=0
        for t in $TESTS; do
            tests=$(grep -c "^GUEST-TEST $fs $t::" "$log" || true)
            ok=$(grep -cE "^GUEST-TEST $fs $t::[^ ]+: ok" "$log" || true)
            bad=$({ grep -E "^GUEST-TEST $fs $t::[^ ]+: FAILED" "$log" || true; } | sed -E 's/^GUEST-TEST [^ ]+ [^:]+::([^:]+):.*/\1/')
            s=$({ grep -E "^GUEST-TEST $fs $t::" "$log" || true; } | sed -nE 's/.*\(([0-9]+)s\)$/\1/p' | awk '{s += $1} END {print s + 0}')
            fs_secs=$((fs_secs + s))
            if [ "$tests" -eq 0 ]; then
                why+=("$t: no test ran")
            elif [ -n "$bad" ]; then
                why+=("$t: $((tests - ok)) of $tests failed: $(echo $bad)")
                for name in $(echo "$bad" | sort -u); do
                    msg=$(panic_message "$fs" "$t::$name" "$log")
                    [ -n "$msg" ] && why+=("$name: $msg")
                done
            fi
            parts+=("$t $ok/$tests")
        done
        if [ -z "$probe" ] && ! grep -q "^GUEST-TEST $fs " "$log"; then
            why=("not reached: the guest stopped before this filesystem")
        fi
        yn() { case "$1" in true) echo yes ;; false) echo no ;; *) echo "?" ;; esac; }
        what="cachestat $(yn "$cs"), RWF_DONTCACHE $(yn "$dc"), auto ${auto:-?}; $(IFS=,; echo "${parts[*]}" | sed 's/,/, /g') passed; ${fs_secs}s"
        # Cases that ran but could not inject their fault on this filesystem.
        n=$(grep -c ": device faults are injected under local filesystems only, not under $fs\$" "$log" || true)
        [ "$n" -gt 0 ] && what+="; $n device-fault cases inject nothing under $fs"
        if [ "${#why[@]}" -eq 0 ]; then
            echo "GUEST-RESULT $k $fs: ok ($what)"
        else
            echo "GUEST-RESULT $k $fs: FAILED ($(printf '%s; ' "${why[@]}")$what)"
            kfail=1
        fi
    done
    if runs_policy "$k"; then
        # The command's tests, reported as GUEST-TEST cli <binary>::<test>.
        why=() parts=() cli_secs=0
        cg=$(sed -n 's/^GUEST-CGROUP //p' "$log" | head -1)
        for t in $CLI_TESTS; do
            tests=$(grep -c "^GUEST-TEST cli $t::" "$log" || true)
            ok=$(grep -cE "^GUEST-TEST cli $t::[^ ]+: ok" "$log" || true)
            bad=$({ grep -E "^GUEST-TEST cli $t::[^ ]+: FAILED" "$log" || true; } | sed -E 's/^GUEST-TEST cli [^:]+::([^:]+):.*/\1/')
            s=$({ grep -E "^GUEST-TEST cli $t::" "$log" || true; } | sed -nE 's/.*\(([0-9]+)s\)$/\1/p' | awk '{s += $1} END {print s + 0}')
            cli_secs=$((cli_secs + s))
            if [ "$tests" -eq 0 ]; then
                why+=("$t: no test ran")
            elif [ -n "$bad" ]; then
                why+=("$t: $((tests - ok)) of $tests failed: $(echo $bad)")
                for name in $(echo "$bad" | sort -u); do
                    msg=$(panic_message cli "$t::$name" "$log")
                    [ -n "$msg" ] && why+=("$name: $msg")
                done
            fi
            parts+=("$t $ok/$tests")
        done
        grep -E '^GUEST-CLI: FAILED' "$log" | sed 's/^GUEST-CLI: FAILED //' > "$work/clifail" || true
        while read -r l; do why+=("$l"); done < "$work/clifail"
        what="ext4, cgroup ${cg:-?}; $(IFS=,; echo "${parts[*]}" | sed 's/,/, /g') passed; ${cli_secs}s"
        if [ "${#why[@]}" -eq 0 ]; then
            echo "GUEST-RESULT $k policy: ok ($what)"
        else
            echo "GUEST-RESULT $k policy: FAILED ($(printf '%s; ' "${why[@]}")$what)"
            kfail=1
        fi
    fi
    if runs_powercut "$k"; then
        grep -E '^POWERCUT(-NOTE|-WIDER|-EXAMPLE)? ' "$log" | sed 's/^/  /' || true
        cells=$(grep -c '^POWERCUT ' "$log" || true)
        bad=$(grep -cE '^POWERCUT [^:]+: FAILED|^POWERCUT-WIDER |^GUEST-POWERCUT: FAILED' "$log" || true)
        points=$(sed -nE 's/^POWERCUT .*: ok \(([0-9]+) replay points.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
        if [ "$cells" -eq 0 ] || [ "$bad" -gt 0 ]; then
            echo "GUEST-RESULT $k powercut: FAILED ($cells cells, $bad failed or wider than buffered)"
            kfail=1
            if [ -s "$work/outbox-$k.img" ] && [ "$(head -c 5 "$work/outbox-$k.img" | tr -d '\0')" != "" ]; then
                mkdir -p "$FAILED_LOGS"
                cp --sparse=always "$work/outbox-$k.img" "$FAILED_LOGS/powercut-$k-$(date +%Y%m%d-%H%M%S).tar"
                echo "guest: the failing replay images and log excerpts kept in $FAILED_LOGS (a tar)"
            fi
        else
            case ",$POWERCUT_BACKENDS," in
            *,buffered,*) wider="no state wider than buffered's" ;;
            *) wider="states not compared: buffered not run" ;;
            esac
            echo "GUEST-RESULT $k powercut: ok ($cells cells on $(pc_fs_of "$k"), $points replay points checked, none failed; $wider)"
        fi
    fi
    if runs_diskfault "$k"; then
        grep -E '^DISKFAULT(-NOTE|-DONE)? ' "$log" | sed 's/^/  /' || true
        cases=$(grep -c '^DISKFAULT [^:]*: ' "$log" || true)
        bad=$(grep -cE '^DISKFAULT [^:]+: FAILED' "$log" || true)
        crashed=$(grep -c '^GUEST-DISKFAULT: FAILED' "$log" || true)
        done_fs=$(grep -c '^DISKFAULT-DONE ' "$log" || true)
        secs=$(sed -nE 's/^DISKFAULT-DONE .*\(([0-9]+)s\)$/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
        notes=$(grep -c '^DISKFAULT-NOTE ' "$log" || true)
        if [ "$cases" -eq 0 ] || [ "$bad" -gt 0 ] || [ "$crashed" -gt 0 ] || [ "$done_fs" -ne "$(df_fs_of "$k" | wc -w)" ]; then
            echo "GUEST-RESULT $k diskfault: FAILED ($cases cases, $bad failed, $done_fs of $(df_fs_of "$k" | wc -w) filesystems done)"
            kfail=1
        else
            echo "GUEST-RESULT $k diskfault: ok ($cases cases on $(df_fs_of "$k"), none failed, ${secs}s; $notes backend(s) that cannot run there noted)"
        fi
    fi
    if [ -n "$TAILDETECT" ]; then
        grep -E '^TAILDETECT-(SETUP|SYSCTL|START|RESULT|DONE|FAILED|ERROR)|^GUEST-TAILDETECT' "$log" | sed 's/^/  /' || true
        n=$(grep -c '^TAILDETECT-MISMATCH ' "$log" || true)
        if grep -q '^TAILDETECT-DONE .* 0 mismatches$' "$log" && ! grep -q '^GUEST-TAILDETECT' "$log"; then
            echo "GUEST-RESULT $k taildetect: ok ($(sed -n 's/^TAILDETECT-DONE [^:]*: //p' "$log"))"
        else
            echo "GUEST-RESULT $k taildetect: FAILED ($n mismatches printed; see the console log)"
            kfail=1
        fi
    fi
    if ! grep -q '^GUEST-DONE' "$log"; then
        echo "GUEST-RESULT $k all: FAILED (the guest did not reach the end)"
        kfail=1
    fi
    if [ "$kfail" -ne 0 ]; then
        failures=$((failures + 1))
        keep_failed_log "$k" "$log"
    fi
done
echo "timings: ${timings[*]}; total $((SECONDS - started))s"
if [ "$failures" -gt 0 ]; then
    echo "guest: FAILED"
    exit 1
fi
echo "guest: ok"
