#!/usr/bin/env bash
# Memory checks of ubio's unsafe code (run by scripts/test.sh after the cargo
# tests; about a minute once built):
#
# 1. Miri (nightly): the unit tests of crates/ubio/src/buffer.rs, the aligned
#    bounce buffers, the one piece of unsafe code that is pure memory. The
#    syscall wrappers (sys/) and the shim's fdtable cannot run under Miri
#    (foreign calls; the shim is a cdylib with no unit-test harness).
# 2. valgrind memcheck on the syscall paths: `ubio cp` and `ubio cat` with
#    every backend on files with unaligned sizes (the direct backend's
#    bounce-buffer heads and tails), and a C program doing unaligned
#    write/pread/fread/fwrite under `ubio run` (the LD_PRELOAD shim inside
#    valgrind, --trace-children=yes). Any error, or a definite leak, fails.
#    valgrind does not know cachestat() (syscall 451): the library sees
#    ENOSYS there and uses its mincore() fallback, which is thus covered too.
#
#   scripts/memcheck.sh            # both
#   UBIO_MEMCHECK_MIRI=0 scripts/memcheck.sh   # valgrind only
#
# Needs: valgrind (scripts/install-deps.sh), gcc, the release build of the
# workspace (target/release/ubio and libubio_preload.so), and for Miri the
# nightly toolchain with the miri component (installed here with rustup when
# missing: a network download the first time).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

failures=0
fail() {
    echo "memcheck: FAILED: $*" >&2
    failures=$((failures + 1))
}

if [ "${UBIO_MEMCHECK_MIRI:-1}" != 0 ]; then
    echo "== miri: crates/ubio buffer.rs"
    if ! cargo +nightly miri --version >/dev/null 2>&1; then
        rustup toolchain install nightly --profile minimal --component miri,rust-src
    fi
    cargo +nightly miri setup >/dev/null
    # Not `tee /dev/stderr`: tee opens it with O_TRUNC, and when stderr is
    # a file (a CI log) that empties the log written so far.
    miri_out="$(cargo +nightly miri test -p ubio --lib -- buffer:: 2>&1 || true)"
    printf '%s\n' "$miri_out" >&2
    if grep -q '^test result: ok' <<<"$miri_out"; then
        echo "MEMCHECK miri buffer.rs: 0 errors"
    else
        fail "miri on crates/ubio/src/buffer.rs"
    fi
fi

echo "== valgrind: ubio cp, ubio cat (every backend), a C program under ubio run"
ubio="$root/target/release/ubio"
[ -x "$ubio" ] || cargo build --release -p ubio-cli -p ubio-preload
work="$(mktemp -d "$root/target/memcheck.XXXXXX")"
trap 'rm -rf "$work"' EXIT

runs=0
# vg NAME CMD...: run CMD under memcheck; its log is shown only on failure.
vg() {
    local name=$1
    shift
    runs=$((runs + 1))
    if valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \
        --errors-for-leak-kinds=definite --trace-children=yes \
        --log-file="$work/vg.$runs.%p.log" "$@" >"$work/out.$runs" 2>"$work/err.$runs"; then
        :
    else
        fail "$name (exit $?)"
        cat "$work"/vg."$runs".*.log "$work/err.$runs" >&2 || true
        return 0
    fi
    # Errors reported by a child that exited 0 anyway.
    if grep -h '^==[0-9]*== ' "$work"/vg."$runs".*.log | grep -qE 'ERROR SUMMARY: [1-9]|Invalid|uninitialised|definitely lost'; then
        fail "$name (valgrind errors)"
        cat "$work"/vg."$runs".*.log >&2
    fi
}

# 4 MiB + 3 bytes, not block-aligned anywhere.
head -c $((4 * 1024 * 1024 + 3)) /dev/urandom >"$work/src"
for backend in auto kernel emulated direct buffered; do
    vg "ubio cp --backend $backend" "$ubio" cp --backend "$backend" --block 777K "$work/src" "$work/cp-$backend"
    cmp -s "$work/src" "$work/cp-$backend" || fail "ubio cp --backend $backend: copy differs"
    vg "ubio cat --backend $backend" "$ubio" cat --backend "$backend" "$work/src"
    cmp -s "$work/src" "$work/out.$runs" || fail "ubio cat --backend $backend: output differs"
done

cat >"$work/rw.c" <<'C'
/* Unaligned writes, positional reads and stdio through the shim. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const size_t n = 3 * 1024 * 1024 + 17;
    unsigned char *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(i * 31 + (i >> 12));
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 2;
    for (size_t off = 0; off < n;) {
        size_t k = n - off < 4099 * 13 ? n - off : 4099 * 13;
        if (write(fd, a + off, k) != (ssize_t)k) return 3;
        off += k;
    }
    if (fsync(fd) != 0) return 4;
    for (size_t off = 0; off < n; off += 100003) {
        size_t k = n - off < 5001 ? n - off : 5001;
        if (pread(fd, b + off, k, off + 0) != (ssize_t)k) return 5;
        if (memcmp(a + off, b + off, k) != 0) return 6;
    }
    close(fd);
    FILE *f = fopen(argv[1], "r");
    if (!f || fread(b, 1, n, f) != n || memcmp(a, b, n) != 0) return 7;
    fclose(f);
    FILE *g = fopen(argv[2], "w");
    if (!g || fwrite(a, 1, n, g) != n || fclose(g) != 0) return 8;
    free(a);
    free(b);
    return 0;
}
C
gcc -O1 -o "$work/rw" "$work/rw.c"
for backend in auto emulated direct; do
    vg "ubio run --backend $backend -- rw" "$ubio" run --backend "$backend" -- "$work/rw" "$work/rw-a-$backend" "$work/rw-b-$backend"
    cmp -s "$work/rw-a-$backend" "$work/rw-b-$backend" || fail "ubio run --backend $backend -- rw: files differ"
done

if [ "$failures" -gt 0 ]; then
    echo "memcheck: $failures failure(s) in $runs valgrind runs" >&2
    exit 1
fi
echo "MEMCHECK valgrind runs=$runs errors=0"
