#!/usr/bin/env bash
# Build and test the whole workspace: the entry point that CI runs (.ci/run).
#
#   scripts/test.sh [extra cargo test arguments, e.g. a test name filter]
#
# 1. scripts/install-deps.sh (mkfs.xfs, mkfs.btrfs, losetup, fio, cargo).
# 2. Beside each other: cargo build --release --workspace --all-targets,
#    then cargo clippy --release --workspace --all-targets -- -D warnings
#    (a lint fails CI, the summary says so first, but the tests still run,
#    so the log stays complete; release, after the build: clippy reuses the
#    build's build scripts and proc-macros, and ubio-cli's check needs the
#    shim's .so that the build makes), and the guests' build
#    (UBIO_GUEST_BUILD_ONLY=1 scripts/guest/run.sh: downloads, kernels,
#    initramfs, the static binaries in target/guest; all cached). Both are
#    CPU work, and the guests' build writes to the disk before the host
#    tests start: its writeback, which no I/O priority holds back, once slowed
#    the disk under the tests that bound a writer's dirty pages "on a device
#    that keeps up" (stop 49: a static Go io.Copy under the policy daemon at
#    66 MiB dirty + writeback against 64, while it ran beside them).
# 3. cargo test --release --workspace --no-fail-fast -- --test-threads=1 --nocapture
#    Release: the contract tests stream and verify several GiB of data.
#    --no-fail-fast: every test binary runs, so the summary is complete.
#    Serial, because tests use loop devices and the page cache and measure
#    residency; --nocapture so that `SKIP <name>: <reason>` lines reach the log
#    and the summary can count them.
#    Beside them from their start, at nice 19: scripts/guest/run.sh, the
#    contract tests again in QEMU guests on Linux 6.12 (cachestat, no
#    RWF_DONTCACHE) and 6.1 (neither), on f2fs, ext4, xfs and btrfs, the
#    policy daemon's tests on cgroup v2, and the power-cut and disk-fault
#    suites; the summary shows one line per kernel and filesystem. The
#    serial tests leave a core idle, which the guests take; at nice 19 they
#    yield the tests' core at once, and their work directory (scratch disks,
#    initramfs, console logs) is on /dev/shm (TMPDIR), so they write nothing
#    to the disk the tests measure.
# 4. After the host tests, one after another at nice 19 (the guests'
#    priority), beside what is left of the guests: scripts/memcheck.sh (Miri
#    on the bounce buffers, valgrind on ubio cp/cat with every backend and on
#    a C program under the shim), scripts/package-test.sh (the packages,
#    built from HEAD in target/package, installed and used in a clean Debian
#    root), then scripts/gnu-cp-tests.sh (GNU coreutils' own cp tests, from
#    Debian's source of the installed coreutils, against ubio invoked as cp;
#    the source and its configure are cached in ~/.cache/ubio after the first
#    run). They write to the disk, so they do not run beside the host tests.
#    Each part's output is printed whole when it ends.
#
# As root, UBIO_NO_SKIP=1 is exported (unless already set): every fixture exists
# here, so a test that would skip fails instead. Exits non-zero if the build,
# any test or the guest run fails, after printing a summary.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

if [ "$(id -u)" -eq 0 ]; then
    export UBIO_NO_SKIP="${UBIO_NO_SKIP:-1}"
fi

log="$(mktemp -t ubio-test.XXXXXX)"
parts_dir="$(mktemp -d -t ubio-test-parts.XXXXXX)"
trap 'rm -rf "$log" "$parts_dir"' EXIT

# The parts beside the host's build and tests. Each writes its own log,
# printed whole when it ends; its exit code and seconds go to the summary.
run_part() { # NAME CMD...: run CMD with its output in NAME.log, then print it
    local name=$1 start=$SECONDS rc=0
    shift
    "$@" >"$parts_dir/$name.log" 2>&1 || rc=$?
    echo "$rc $((SECONDS - start))" >"$parts_dir/$name.rc"
    { echo "== $name ($*): exit $rc after $((SECONDS - start))s"; cat "$parts_dir/$name.log"; } |
        flock "$parts_dir" cat
}
part_rc() { cut -d' ' -f1 "$parts_dir/$1.rc" 2>/dev/null || echo 1; }
part_secs() { cut -d' ' -f2 "$parts_dir/$1.rc" 2>/dev/null || echo 0; }

# The guests' build (downloads, kernels, initramfs, static binaries in
# target/guest) beside the host's: both are CPU work, and its disk writes
# end before the host tests start.
echo "== beside the build: UBIO_GUEST_BUILD_ONLY=1 scripts/guest/run.sh"
run_part guest-build env UBIO_GUEST_BUILD_ONLY=1 scripts/guest/run.sh &
guest_build_pid=$!

started=$SECONDS
build_rc=0
echo "== cargo build --release --workspace --all-targets"
cargo build --release --workspace --all-targets || build_rc=$?
build_secs=$((SECONDS - started))

clippy_rc=0
clippy_secs=0
if [ "$build_rc" -eq 0 ]; then
    echo "== cargo clippy --release --workspace --all-targets -- -D warnings"
    started=$SECONDS
    cargo clippy --release --workspace --all-targets -- -D warnings || clippy_rc=$?
    clippy_secs=$((SECONDS - started))
    if [ "$clippy_rc" -ne 0 ]; then
        echo "== clippy: FAILED (exit $clippy_rc): the lints above fail CI; the tests run anyway"
    fi
fi
wait "$guest_build_pid"

# The guests run from the host tests' start to the end, at nice 19: they
# take the core the serial tests leave idle and yield the other at once,
# and with their work directory on /dev/shm (scratch disks, initramfs,
# consoles) they write nothing to the disk the tests measure.
guest_pid=
if [ "$build_rc" -eq 0 ]; then
    if [ "$(part_rc guest-build)" -eq 0 ]; then
        echo "== beside the host tests, at nice 19: TMPDIR=/dev/shm scripts/guest/run.sh"
        run_part guest env TMPDIR=/dev/shm nice -n 19 scripts/guest/run.sh &
        guest_pid=$!
    else
        echo "== guest: not run, its build failed (above)"
        echo "$(part_rc guest-build) 0" >"$parts_dir/guest.rc"
    fi
fi

test_rc=0
test_secs=0
if [ "$build_rc" -eq 0 ]; then
    echo "== cargo test --release --workspace --no-fail-fast -- --test-threads=1 --nocapture $*"
    started=$SECONDS
    set +e
    cargo test --release --workspace --no-fail-fast -- --test-threads=1 --nocapture "$@" 2>&1 | tee "$log"
    test_rc=${PIPESTATUS[0]}
    set -e
    test_secs=$((SECONDS - started))
fi

# After the host tests (they write to the disk), one after another, beside
# what is left of the guests and at their priority.
side_parts=(
    "memcheck|scripts/memcheck.sh"
    "packages|scripts/package-test.sh"
    "gnu-cp|scripts/gnu-cp-tests.sh"
)
if [ "$build_rc" -eq 0 ]; then
    echo "== after the host tests, one after another at nice 19: ${side_parts[*]}"
    for part in "${side_parts[@]}"; do
        run_part "${part%%|*}" nice -n 19 ${part#*|}
    done
fi
[ -n "$guest_pid" ] && wait "$guest_pid"

# Sum cargo's "test result: ok. 20 passed; 0 failed; 1 ignored; ..." lines.
# (No match is not an error here: `|| true` keeps pipefail from ending the script.)
sum_field() {
    { grep -E '^test result: ' "$log" || true; } | { grep -oE "[0-9]+ $1" || true; } |
        awk '{s += $1} END {print s + 0}'
}
passed=$(sum_field passed)
failed=$(sum_field failed)
ignored=$(sum_field ignored)
skipped=$({ grep -oE '(^|[^A-Za-z_])SKIP [A-Za-z0-9_:/.-]+: ' "$log" || true; } | wc -l | tr -d ' ')
# A skipped test returns early and counts as passed for cargo.
passed=$((passed - skipped))

# Fixtures must not outlive the tests (they clean up on drop, panic and signal).
leftovers="$(
    { losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null || true; } | grep -E 'ubio-(scratch|eio)' || true
    grep -E ' /tmp/ubio-(mnt|tmpfs)-' /proc/self/mountinfo 2>/dev/null | awk '{print $5}' || true
)"

echo
echo "== summary"
if [ "$build_rc" -ne 0 ]; then
    echo "build: FAILED (exit $build_rc) after ${build_secs}s; tests not run"
else
    echo "build: ok (${build_secs}s)"
    if [ "$clippy_rc" -ne 0 ]; then
        echo "clippy: FAILED (exit $clippy_rc) after ${clippy_secs}s: fix the lints printed after the build"
    else
        echo "clippy: ok (${clippy_secs}s)"
    fi
    echo "tests: exit $test_rc after ${test_secs}s; $ignored ignored"
    for part in "${side_parts[@]}"; do
        echo "${part%%|*} (${part#*|}): exit $(part_rc "${part%%|*}") after $(part_secs "${part%%|*}")s"
    done
    echo "guest-build (scripts/guest/run.sh, UBIO_GUEST_BUILD_ONLY=1): exit $(part_rc guest-build) after $(part_secs guest-build)s"
    echo "guest (scripts/guest/run.sh): exit $(part_rc guest) after $(part_secs guest)s"
    grep -E '^(host: |guest kernel:|GUEST-RESULT )' "$parts_dir/guest.log" 2>/dev/null | sed 's/^/  /' || true
    if [ "$failed" -gt 0 ]; then
        echo "failed tests:"
        # cargo lists them after "failures:" per binary, and the binaries
        # after "error: N targets failed:".
        awk '/^failures:$|targets? failed:$/ {f = 1; next}
             f && /^    [`A-Za-z0-9_:. -]+$/ {print "  " substr($0, 5); next}
             /^test result:/ {f = 0}' "$log" | sort -u
        # Why, here at the end where CI's excerpt of the log shows it: each
        # failed test's panic (its message, at most 15 lines, no backtrace).
        echo "their panics:"
        awk 'FNR == NR && /^failures:$/ {f = 1; next}
             FNR == NR && f && /^    [^ ]+$/ {failed[substr($0, 5)] = 1; next}
             FNR == NR {if (/^test result:/) f = 0; next}
             # (libtest may have printed "test NAME ... " on the same line.)
             p && /^(stack backtrace:|note: run with|thread |failures:$|test .* \.\.\. )/ {p = 0}
             match($0, /thread \047[^\047]+\047.* panicked at /) {
                 name = substr($0, RSTART + 8)
                 name = substr(name, 1, index(name, "\047") - 1)
                 if (name in failed) {p = 15; print "  " substr($0, RSTART); next}
             }
             p {print "    " $0; p--}' "$log" "$log"
    fi
fi
if [ "$skipped" -gt 0 ]; then
    echo "skipped tests:"
    grep -oE 'SKIP [A-Za-z0-9_:/.-]+: .*' "$log" | sed 's/^/  /'
fi
if [ -n "$leftovers" ]; then
    echo "warning: ubio loop devices or mounts still present (from these tests, or from another run in progress):"
    printf '%s\n' "$leftovers" | sed 's/^/  /'
fi
if [ "$build_rc" -ne 0 ]; then
    exit "$build_rc"
fi
echo "summary: $passed passed, $failed failed, $skipped skipped; guest: $([ "$(part_rc guest)" -eq 0 ] && echo ok || echo FAILED); total $((SECONDS))s"
[ "$test_rc" -ne 0 ] && exit "$test_rc"
[ "$clippy_rc" -ne 0 ] && exit "$clippy_rc"
for part in "${side_parts[@]}" "guest|"; do
    rc=$(part_rc "${part%%|*}")
    [ "$rc" -ne 0 ] && exit "$rc"
done
exit 0
