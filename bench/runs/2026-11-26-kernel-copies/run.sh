#!/usr/bin/env bash
# How output.txt was made (at the commit named in README.md): the kernel copies
# of bench/run_programs.py (a static Go io.Copy, static musl copy_file_range,
# sendfile and splice with offsets) on a 4 GiB input on the root ext4, modes
# plain, backed and ubio, each round in a new random order (bench/run-programs.sh,
# every round alone on the machine); then the same programs under the ubio of
# main before the engine followed such copies (BEFORE: its binary, with this
# branch's shim, which the static programs never load), ubio mode only. BEFORE
# was built from main's tree at 2779eda, e.g. `git worktree add ../main-2779eda
# 2779eda && (cd ../main-2779eda && cargo build --release -p ubio-cli
# --target-dir "$PWD/target/main-target")` from this repository's root.
# This run: ROUNDS=3, then the 2 'before' rounds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
R=bench/runs/2026-11-26-kernel-copies
D=target/bench-run-programs
BEFORE="${BEFORE:-target/main-target/release/ubio}"
ONLY="kernel copy" JSONL=$R/runs.jsonl bench/run-programs.sh 4 "${ROUNDS:-5}"
# A copy of the 'before' binary, with this tree's shim beside it.
mkdir -p $D/main-bin
cp "$BEFORE" $D/main-bin/ && cp target/release/libubio_preload.so $D/main-bin/
ONLY="kernel copy" MODES=ubio UBIO=$D/main-bin/ubio NO_BUILD=1 NO_PREPARE=1 \
    JSONL=$R/before.jsonl bench/run-programs.sh 4 2
