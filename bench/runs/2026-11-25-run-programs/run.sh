#!/usr/bin/env bash
# How output.txt was made (from the repository's root, at the commit named in
# README.md): prepare outside the measurement, then one round per
# /work/bin/measure call, then the summary. 4 GiB input on the root ext4
# (target/bench-run-programs/). Modes plain, backed (plain after its pages
# were backed: what bare metal would see) and ubio, each round in a new
# random order (bench/run_programs.py).
set -euo pipefail
R=bench/runs/2026-11-25-run-programs
D=target/bench-run-programs
ROUNDS="${ROUNDS:-3}"
/work/bin/build cargo build --release -p ubio-cli -p ubio-preload --bins
/work/bin/build python3 bench/run_programs.py prepare --dir $D --size-gib 4 --ubio target/release/ubio
# A copy of the binaries, so that builds between rounds cannot change them.
mkdir -p $D/bin && cp target/release/ubio target/release/libubio_preload.so $D/bin/
rm -f $R/runs.jsonl
for round in $(seq "$ROUNDS"); do
    echo "== round $round $(date -u +%H:%M:%S)"
    /work/bin/measure python3 bench/run_programs.py round --dir $D --ubio $D/bin/ubio --jsonl $R/runs.jsonl
done
python3 bench/run_programs.py summary --jsonl $R/runs.jsonl
