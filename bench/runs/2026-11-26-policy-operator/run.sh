#!/usr/bin/env bash
# The operator experiment of bench/policy.py (a tar of an 8 GiB tree in scope
# beside a hot 256 MiB reader out of scope, 2 GiB left to the machine) with
# the kernel's reclaim traced in every run (--probe: bench/reclaim_probe.py),
# to find what evicts the out-of-scope hot file with the policy on (issue 28).
# Each round under quiet, its modes in a new random order, each mode REPEAT
# times under the round's one balloon; ROUNDS rounds; EXTRA: more modes
# (on-nice0).
#
#   bench/runs/2026-11-26-policy-operator/run.sh BIN_DIR [ROUNDS] [REPEAT] [EXTRA]
#
# BIN_DIR holds ubio and ubio-bench; the data is made first by
# `python3 bench/policy.py prepare --dir target/bench-policy --ubio BIN_DIR/ubio`.
# The probe's own files (a 250 ms time series and the trace of each run) go
# to target/policy-probe/; their sums are in runs.jsonl ("probe").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
R=bench/runs/2026-11-26-policy-operator
B=$1
rounds=${2:-1}
repeat=${3:-3}
extra=${4:-}
for i in $(seq 1 "$rounds"); do
    echo "== round $i $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg), repeat $repeat ${extra}" | tee -a $R/output.txt
    /work/helpers/bin/quiet python3 bench/policy.py round --dir target/bench-policy --ubio "$B/ubio" \
        --jsonl $R/runs.jsonl --exp operator --probe target/policy-probe --repeat "$repeat" \
        ${extra:+--operator-modes "$extra"} 2>&1 | tee -a $R/output.txt
done
python3 bench/policy.py summary --jsonl $R/runs.jsonl > $R/summary.md
