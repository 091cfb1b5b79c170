#!/usr/bin/env bash
# Run `ubio demo` from a fresh checkout: install what is missing, build the
# release binary, run it. Arguments go to `ubio demo` (try --help).
#
#   scripts/demo.sh                 # defaults: 512M cgroup, 2G dataset, 2 rounds
#   scripts/demo.sh --json --dir /mnt/scratch
#
# Needs root (the demo makes a memory cgroup) and about 2.3 GiB free under
# --dir (default: the current directory). Installs only what is missing, with
# scripts/install-deps.sh: a C linker from Debian's packages, and Rust.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A C linker (gcc, libc headers) and Rust, if missing.
"$repo/scripts/install-deps.sh" gcc libc6-dev >&2
if ! command -v cargo >/dev/null 2>&1; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

cd "$repo"
echo "demo.sh: building (cargo build --release -p ubio-cli)" >&2
cargo build --release --quiet -p ubio-cli
cd - >/dev/null
exec "$repo/target/release/ubio" demo "$@"
