#!/usr/bin/env bash
# Run `ubio demo` from a fresh checkout: install what is missing, build the
# release binary, run it. Arguments go to `ubio demo` (try --help).
#
#   scripts/demo.sh                 # defaults: 512M cgroup, 2G dataset, 2 rounds
#   scripts/demo.sh --json --dir /mnt/scratch
#
# Needs root (the demo makes a memory cgroup) and about 2.3 GiB free under
# --dir (default: the current directory). Installs only what is missing: a C
# linker from Debian's packages, and Rust with rustup if cargo is not there.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DEBIAN_FRONTEND=noninteractive

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo --preserve-env=DEBIAN_FRONTEND "$@"
    else
        echo "demo.sh: need root to run: $*" >&2
        return 1
    fi
}

apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "demo.sh: please install $* (not a Debian system, no apt-get)" >&2
        exit 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        as_root apt-get update -q
        apt_updated=1
    fi
    echo "demo.sh: installing $*" >&2
    as_root apt-get install -y -q --no-install-recommends "$@"
}

# A C toolchain for linking (cc) and libc headers.
command -v cc >/dev/null 2>&1 || apt_install gcc libc6-dev

# Rust: a rustup install in ~/.cargo first, then rustup itself.
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null 2>&1; then
    if ! command -v rustup >/dev/null 2>&1; then
        command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
        echo "demo.sh: cargo missing, installing Rust with rustup (minimal profile)" >&2
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
            | sh -s -- -y --profile minimal --default-toolchain stable --no-modify-path
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    else
        rustup toolchain install stable --profile minimal
        rustup default stable
    fi
fi

cd "$repo"
echo "demo.sh: building (cargo build --release -p ubio-cli)" >&2
cargo build --release --quiet -p ubio-cli
cd - >/dev/null
exec "$repo/target/release/ubio" demo "$@"
