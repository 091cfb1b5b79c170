#!/usr/bin/env bash
# Run `ubio demo` from a fresh checkout: install what is missing, build the
# release binary, ubio-bench (the harness `ubio demo` runs) and the shim (for
# the ubio-run-cp copy mode), run it.
# Arguments go to `ubio demo` (try --help). The demo is a short `ubio bench
# run`: seq-write then seq-read of buffered and ubio (or --copy: cp, nocache
# cp, dd nocache, rsync, ubio cp, ubio run -- cp), next to a hot-file reader;
# it prints a side-by-side table and what it shows.
#
#   scripts/demo.sh                 # defaults: 512M cgroup, 2G dataset, 256M hot file, 2 rounds
#   scripts/demo.sh --copy --verify # the copy commands, each copy checked
#   scripts/demo.sh --json --dir /mnt/scratch --out demo-report
#                                   # --out keeps the bench report files (JSON, CSV, Markdown, HTML)
#
# Needs root (the demo makes a memory cgroup) and about 2.3 GiB free under
# --dir (default: the current directory; twice the dataset with --copy).
# Installs only what is missing, with scripts/install-deps.sh: a C linker (and
# with --copy nocache and rsync) from Debian's packages, and Rust.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A C linker (gcc, libc headers) and Rust, if missing; for --copy also the
# tools it compares (nocache, rsync).
deps=(gcc libc6-dev)
for arg in "$@"; do
    if [ "$arg" = --copy ]; then deps+=(nocache rsync); fi
done
"$repo/scripts/install-deps.sh" "${deps[@]}" >&2
if ! command -v cargo >/dev/null 2>&1; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

cd "$repo"
echo "demo.sh: building (cargo build --release -p ubio-cli -p ubio-preload -p ubio-bench)" >&2
cargo build --release --quiet -p ubio-cli -p ubio-preload -p ubio-bench
cd - >/dev/null
exec "$repo/target/release/ubio" demo "$@"
