#!/usr/bin/env bash
# Build and test the whole workspace: the entry point that CI runs (.ci/run).
#
#   scripts/test.sh [extra cargo test arguments, e.g. a test name filter]
#
# 1. scripts/install-deps.sh (mkfs.xfs, mkfs.btrfs, losetup, fio, cargo).
# 2. cargo build --release --workspace --all-targets
# 3. cargo test --release --workspace --no-fail-fast -- --test-threads=1 --nocapture
#    Release: the contract tests stream and verify several GiB of data.
#    --no-fail-fast: every test binary runs, so the summary is complete.
#    Serial, because tests use loop devices and the page cache and measure
#    residency; --nocapture so that `SKIP <name>: <reason>` lines reach the log
#    and the summary can count them.
# 4. scripts/memcheck.sh: Miri on the bounce buffers, valgrind on ubio cp/cat
#    with every backend and on a C program under the shim (about a minute).
# 5. scripts/gnu-cp-tests.sh: GNU coreutils' own cp tests (from Debian's
#    source of the installed coreutils) against ubio invoked as cp; the
#    source and its configure are cached in ~/.cache/ubio after the first run.
# 6. scripts/guest/run.sh: the contract tests again in QEMU guests on Linux
#    6.12 (cachestat, no RWF_DONTCACHE) and 6.1 (neither), on f2fs, ext4,
#    xfs and btrfs; the summary shows one line per kernel and filesystem.
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
trap 'rm -f "$log" "$log.guest" "$log.gnucp"' EXIT

started=$SECONDS
build_rc=0
echo "== cargo build --release --workspace --all-targets"
cargo build --release --workspace --all-targets || build_rc=$?
build_secs=$((SECONDS - started))

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

memcheck_rc=0
memcheck_secs=0
if [ "$build_rc" -eq 0 ]; then
    echo "== scripts/memcheck.sh (Miri on the bounce buffers, valgrind on cp, cat and the shim)"
    started=$SECONDS
    scripts/memcheck.sh || memcheck_rc=$?
    memcheck_secs=$((SECONDS - started))
fi

gnucp_rc=0
gnucp_secs=0
if [ "$build_rc" -eq 0 ]; then
    echo "== scripts/gnu-cp-tests.sh (GNU coreutils' own cp tests against ubio as cp)"
    started=$SECONDS
    set +e
    scripts/gnu-cp-tests.sh 2>&1 | tee "$log.gnucp"
    gnucp_rc=${PIPESTATUS[0]}
    set -e
    gnucp_secs=$((SECONDS - started))
fi

guest_rc=0
guest_secs=0
if [ "$build_rc" -eq 0 ]; then
    echo "== scripts/guest/run.sh"
    started=$SECONDS
    set +e
    scripts/guest/run.sh 2>&1 | tee "$log.guest"
    guest_rc=${PIPESTATUS[0]}
    set -e
    guest_secs=$((SECONDS - started))
fi

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
    echo "tests: exit $test_rc after ${test_secs}s; $ignored ignored"
    echo "memcheck (scripts/memcheck.sh): exit $memcheck_rc after ${memcheck_secs}s"
    echo "GNU cp tests (scripts/gnu-cp-tests.sh): exit $gnucp_rc after ${gnucp_secs}s"
    grep -E '^(gnu-cp-tests: [0-9]|SKIP gnu_cp_tests)' "$log.gnucp" | sed 's/^/  /' || true
    echo "guest (scripts/guest/run.sh): exit $guest_rc after ${guest_secs}s"
    grep -E '^(guest kernel:|GUEST-RESULT )' "$log.guest" | sed 's/^/  /' || true
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
echo "summary: $passed passed, $failed failed, $skipped skipped; guest: $([ "$guest_rc" -eq 0 ] && echo ok || echo FAILED)"
[ "$test_rc" -ne 0 ] && exit "$test_rc"
[ "$memcheck_rc" -ne 0 ] && exit "$memcheck_rc"
[ "$gnucp_rc" -ne 0 ] && exit "$gnucp_rc"
exit "$guest_rc"
