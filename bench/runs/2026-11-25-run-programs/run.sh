#!/usr/bin/env bash
# How output.txt was made (at the commit named in README.md): bench/run-programs.sh
# with this run's parameters: 4 GiB input on the root ext4 (target/bench-run-programs/),
# modes plain, backed (plain after its pages were backed: what bare metal would see)
# and ubio, each round in a new random order, ROUNDS rounds (default 3), every run
# into this directory's runs.jsonl. The rounds ran one at a time on a machine
# otherwise idle (UBIO_BENCH_PREFIX: see bench/run-programs.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
JSONL=bench/runs/2026-11-25-run-programs/runs.jsonl exec bench/run-programs.sh 4 "${ROUNDS:-3}"
