#!/usr/bin/env bash
# The release matrix: a small fixed `ubio-bench matrix --preset release`
# (seq-write and seq-read, 1 and 2 threads, twice the memory the run may
# use, buffered, dontcache, odirect and ubio, ext4 over /dev/shm), kept in
# bench/runs/release/<date>-<commit>/, and the history table of
# docs/results.md rewritten from every run kept there, so that a regression of ubio (or of
# the kernel under it) shows in the row of the release where it landed.
#
#   bench/release.sh [MATRIX-ARGS...]    (extra arguments go to the matrix)
#
# Run it on a quiet machine (it takes about 3 minutes here); needs root.
# An interrupted run goes on where it stopped when run again the same day
# from the same commit.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
cargo build -q --release -p ubio-bench -p ubio-cli
bench=$PWD/target/release/ubio-bench
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
out=bench/runs/release/$(date -u +%Y-%m-%d)-$commit
UBIO_EXE=$PWD/target/release/ubio "$bench" matrix --preset release --out "$out" "$@"

# docs/results.md's table, between its markers.
table=$("$bench" matrix --history bench/runs/release)
python3 - "$table" <<'PY'
import re, sys
table = sys.argv[1].strip()
readme = open("docs/results.md").read()
begin, end = "<!-- release-history: begin -->", "<!-- release-history: end -->"
if begin not in readme or end not in readme:
    sys.exit("docs/results.md has no release-history markers")
head, rest = readme.split(begin, 1)
_, tail = rest.split(end, 1)
open("docs/results.md", "w").write(f"{head}{begin}\n{table}\n{end}{tail}")
PY
echo "release matrix in $out; docs/results.md's history table rewritten"
