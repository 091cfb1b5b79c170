#!/usr/bin/env bash
# How this run was made (from the repository's root, at the commit named in
# README.md): build and prepare outside the measurement, then each
# experiment of each round alone on the machine (the balloon of the
# operator's case runs only there; UBIO_BENCH_PREFIX: see
# bench/policy-rounds.sh), the experiments in a new random order each round,
# then the summary. Data on the root ext4 (target/bench-policy/, about
# 14 GiB). bench/policy.py has what each experiment does and measures.
#
#   bench/runs/2026-11-26-policy/run.sh          # ROUNDS=3 by default
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
R=bench/runs/2026-11-26-policy
rm -f $R/runs.jsonl
EXPS="container operator dd cost" PREPARE=1 exec bench/policy-rounds.sh $R "${ROUNDS:-3}"
