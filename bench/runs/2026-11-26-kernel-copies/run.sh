#!/usr/bin/env bash
# How output.txt was made (from the repository's root, at the commit named in
# README.md): the kernel copies of bench/run_programs.py (a static Go io.Copy,
# static musl copy_file_range, sendfile and splice with offsets) on a 4 GiB
# input on the root ext4, modes plain, backed and ubio, each round in a new
# random order, one round per /work/helpers/bin/quiet call (nothing else ran);
# then the same programs under the ubio of main before the engine followed
# such copies (BEFORE: its binary, with this branch's shim, which the static
# programs never load), ubio mode only. BEFORE was built from main's tree at
# 2779eda, e.g. `git worktree add /tmp/main-2779eda 2779eda && (cd
# /tmp/main-2779eda && cargo build --release -p ubio-cli --target-dir
# $PWD/target/main-target)`. This run: ROUNDS=3, then the 2 'before' rounds.
set -euo pipefail
R=bench/runs/2026-11-26-kernel-copies
D=target/bench-run-programs
ROUNDS="${ROUNDS:-5}"
BEFORE="${BEFORE:-target/main-target/release/ubio}"
/work/helpers/bin/heavy cargo build --release -p ubio-cli -p ubio-preload
/work/helpers/bin/heavy python3 bench/run_programs.py prepare --dir $D --size-gib 4 --ubio target/release/ubio
# Copies of the binaries, so that builds between rounds cannot change them.
mkdir -p $D/bin $D/main-bin
cp target/release/ubio target/release/libubio_preload.so $D/bin/
cp "$BEFORE" $D/main-bin/ && cp target/release/libubio_preload.so $D/main-bin/
rm -f $R/runs.jsonl $R/before.jsonl
for round in $(seq "$ROUNDS"); do
    echo "== round $round $(date -u +%H:%M:%S)"
    /work/helpers/bin/quiet python3 bench/run_programs.py round --only "kernel copy" \
        --dir $D --ubio $D/bin/ubio --jsonl $R/runs.jsonl
done
python3 bench/run_programs.py summary --jsonl $R/runs.jsonl
for round in 1 2; do
    echo "== before, round $round $(date -u +%H:%M:%S)"
    /work/helpers/bin/quiet python3 bench/run_programs.py round --only "kernel copy" --modes ubio \
        --dir $D --ubio $D/main-bin/ubio --jsonl $R/before.jsonl
done
