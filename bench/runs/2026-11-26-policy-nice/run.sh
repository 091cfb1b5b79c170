#!/usr/bin/env bash
# The operator experiment of bench/policy.py (a tar of an 8 GiB tree in
# scope beside a hot 256 MiB reader out of scope, 2 GiB left to the machine)
# with a third mode: the daemon at nice 0 instead of its own -10 (issue 28:
# was the hot reader slower with the policy because the writeback and page
# freeing the daemon does in its own context run at -10?). Each round under
# quiet, the three modes in a new random order; ROUNDS rounds (default 3).
#
#   bench/runs/2026-11-26-policy-nice/run.sh BIN_DIR [ROUNDS]
#
# BIN_DIR holds ubio and ubio-bench (the balloon and the victim); the data is
# made first by `python3 bench/policy.py prepare --dir target/bench-policy
# --ubio BIN_DIR/ubio`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
R=bench/runs/2026-11-26-policy-nice
B=$1
rounds=${2:-3}
for i in $(seq 1 "$rounds"); do
    echo "== round $i $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $R/output.txt
    /work/helpers/bin/quiet python3 bench/policy.py round --dir target/bench-policy --ubio "$B/ubio" \
        --jsonl $R/runs.jsonl --exp operator --operator-modes on-nice0 2>&1 | tee -a $R/output.txt
done
python3 bench/policy.py summary --jsonl $R/runs.jsonl > $R/summary.md
