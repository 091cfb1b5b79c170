#!/usr/bin/env bash
# The operator experiment of bench/policy.py (a tar of an 8 GiB tree in scope
# beside a hot 256 MiB reader out of scope, 2 GiB left to the machine) with
# the kernel's reclaim traced in every run (--probe: bench/reclaim_probe.py),
# to find what evicts the out-of-scope hot file with the policy on (issue 28).
# Each round alone on the machine, its modes in a new random order, each mode
# REPEAT times under the round's one balloon; ROUNDS rounds; EXTRA: more modes
# (on-nice0). Through bench/policy-rounds.sh.
#
#   bench/runs/2026-11-26-policy-operator/run.sh BIN_DIR [ROUNDS] [REPEAT] [EXTRA]
#
# BIN_DIR holds ubio and ubio-bench; the data is made first by
# `python3 bench/policy.py prepare --dir target/bench-policy --ubio BIN_DIR/ubio`.
# The probe's own files (a 250 ms time series and the trace of each run) go
# to target/policy-probe/; their sums are in runs.jsonl ("probe").
set -euo pipefail
extra=${4:-}
UBIO_BIN_DIR=$1 exec "$(dirname "$0")/../../policy-rounds.sh" "$(dirname "$0")" "${2:-1}" \
    --exp operator --probe target/policy-probe --repeat "${3:-3}" ${extra:+--operator-modes "$extra"}
