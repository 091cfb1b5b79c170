#!/usr/bin/env bash
# How output.txt was made (at the commit named in README.md): bench/run-programs.sh
# with this run's parameters: 4 GiB input on the root ext4 (target/bench-run-programs/),
# every run into this directory's runs.jsonl. 3 rounds were planned; 2 ran (README.md).
# The rounds ran one at a time on a machine otherwise idle (UBIO_BENCH_PREFIX: see
# bench/run-programs.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
JSONL=bench/runs/2026-11-24-run-programs/runs.jsonl exec bench/run-programs.sh 4 2
