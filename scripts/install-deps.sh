#!/usr/bin/env bash
# Install what ubio's tests and benchmarks need, and nothing that is already there.
#
#   scripts/install-deps.sh            # everything the test suite and benchmarks use
#   scripts/install-deps.sh PKG...     # only these Debian packages (scripts/demo.sh), plus Rust
#   scripts/install-deps.sh --pyenv    # only Rust and the Python venv (scripts/package.sh)
#
# Idempotent: a second run installs nothing and does not touch the network. Debian
# packages: xfsprogs (mkfs.xfs), btrfs-progs (mkfs.btrfs), e2fsprogs (mkfs.ext4),
# util-linux (losetup, mount), fio (reference numbers for the benchmarks), rsync,
# gcc, libc6-dev (programs the LD_PRELOAD shim tests run or build), nocache (the
# copy benchmark of `ubio demo --copy` compares with it), valgrind
# (scripts/memcheck.sh), man-db (the install test renders the man pages with
# `man -l`), make, pkg-config (the C API's install and tests), python3,
# python3-venv (the Python package's tests), bindfs (the FUSE contract
# tests), zstd, xz-utils, musl-tools (programs the `ubio run` tests run or
# build: crates/ubio-cli/tests/run_programs.rs), acl, attr, libacl1-dev,
# libattr1-dev, libcap-dev, perl (GNU coreutils' cp tests,
# scripts/gnu-cp-tests.sh: getfacl/setfacl and getfattr/setfattr, the
# headers its configure looks for ACL, xattr and libcap support with),
# dpkg-dev (dpkg-source unpacks Debian's coreutils source for those tests;
# with debhelper, lintian and mmdebstrap, scripts/package.sh builds and
# checks the packages, scripts/package-test.sh tests them in a clean Debian
# root), prometheus (its server and promtool: the policy daemon's metrics
# endpoint scraped for real), podman and runc (the daemon in a container:
# scripts/container.sh and its test), postgresql, nginx, wrk and restic
# (`ubio-bench neighbours`: a database and a web server of its own beside a
# restic backup; installing them starts no service, see policy-rc.d below),
# and golang-go and nodejs where no go
# or node is on the PATH already. Runs
# `apt-get update` only when something is missing. Also makes sure cargo exists
# (rustup's stable toolchain; Debian's own cargo is too old for this project),
# with clippy (scripts/test.sh runs it).
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(xfsprogs btrfs-progs e2fsprogs util-linux fio rsync gcc libc6-dev nocache valgrind man-db
    make pkg-config python3 python3-venv bindfs zstd xz-utils musl-tools
    acl attr libacl1-dev libattr1-dev libcap-dev perl dpkg-dev debhelper lintian mmdebstrap
    strace prometheus podman runc postgresql nginx wrk restic)
command -v go >/dev/null 2>&1 || PACKAGES+=(golang-go)
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
pyenv_only=
if [ "${1:-}" = --pyenv ]; then
    pyenv_only=1
    shift
    PACKAGES=(python3 python3-venv)
elif [ "$#" -gt 0 ]; then
    PACKAGES=("$@")
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo --preserve-env=DEBIAN_FRONTEND "$@"
    else
        echo "install-deps: need root to run: $*" >&2
        return 1
    fi
}

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for pkg in "${PACKAGES[@]}"; do
        is_installed "$pkg" || missing+=("$pkg")
    done
else
    echo "install-deps: not a Debian system (no dpkg-query); install ${PACKAGES[*]} yourself" >&2
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    # Debian's postgresql and nginx start their service when installed
    # (invoke-rc.d, deb-systemd-invoke); the benchmarks start their own in a
    # scratch directory and must not find the system's running. A
    # policy-rc.d that refuses every action (invoke-rc.d(8)) keeps this
    # install from starting any; one the machine already has stays as it is.
    policy_rc=/usr/sbin/policy-rc.d
    if [ ! -e "$policy_rc" ]; then
        printf '#!/bin/sh\n# ubio scripts/install-deps.sh, for one apt-get run: start no service.\nexit 101\n' |
            as_root tee "$policy_rc" >/dev/null
        as_root chmod 755 "$policy_rc"
        trap 'as_root rm -f "$policy_rc"' EXIT
    fi
    as_root apt-get update -q
    as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
    if [ -n "$(trap -p EXIT)" ]; then
        as_root rm -f "$policy_rc"
        trap - EXIT
    fi
else
    echo "install-deps: system packages present (${PACKAGES[*]})"
fi

# The Rust toolchain: prefer rustup's, fall back to Debian's.
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
        echo "install-deps: cargo missing, installing the stable toolchain with rustup"
        rustup toolchain install stable --profile minimal --component clippy
        rustup default stable
    else
        echo "install-deps: cargo missing, installing Rust with rustup (minimal profile)"
        if ! command -v curl >/dev/null 2>&1; then
            as_root apt-get update -q
            as_root apt-get install -y -q --no-install-recommends curl ca-certificates
        fi
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
            sh -s -- -y --profile minimal --component clippy --default-toolchain stable --no-modify-path
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
fi
# clippy: not in rustup's minimal profile, which an existing toolchain may have.
if ! cargo clippy --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
    echo "install-deps: clippy missing, adding rustup's clippy component"
    rustup component add clippy
fi
echo "install-deps: $(cargo --version); $(cargo clippy --version 2>/dev/null || echo 'no clippy')"

# maturin (builds the Python wheel), pytest (python/tests) and
# kubernetes-validate (Kubernetes' schemas, offline: the DaemonSet of
# dist/kubernetes), from PyPI into a venv of their own (Debian's Python
# refuses pip installs, PEP 668); the tests look for it in the same place
# (ubio_testenv::pyenv).
if [ "$#" -eq 0 ] || [ -n "$pyenv_only" ]; then
    pyenv="${UBIO_PYENV:-$HOME/.cache/ubio/pyenv}"
    if [ -x "$pyenv/bin/maturin" ] && [ -x "$pyenv/bin/kubernetes-validate" ] &&
        "$pyenv/bin/python" -c 'import pytest' 2>/dev/null; then
        echo "install-deps: maturin, pytest and kubernetes-validate present in $pyenv"
    else
        echo "install-deps: installing maturin, pytest and kubernetes-validate into $pyenv"
        python3 -m venv "$pyenv"
        "$pyenv/bin/python" -m pip install --quiet --upgrade 'maturin>=1.5,<2' 'pytest>=7' \
            'kubernetes-validate>=1.31'
    fi
fi

# xcp (a parallel cp in Rust, from crates.io): a copy tool the benchmark
# compares with (`ubio bench run --modes xcp`); a run without it leaves it out
# with a warning.
if [ "$#" -eq 0 ] && [ -z "$pyenv_only" ]; then
    if command -v xcp >/dev/null 2>&1; then
        echo "install-deps: $(xcp --version 2>/dev/null || echo xcp) present"
    else
        echo "install-deps: installing xcp with cargo install"
        cargo install --locked xcp
    fi
fi
