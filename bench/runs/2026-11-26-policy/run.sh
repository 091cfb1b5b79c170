#!/usr/bin/env bash
# How this run was made (from the repository's root, at the commit named in
# README.md): build and prepare outside the measurement, then each
# experiment of each round under /work/helpers/bin/quiet (the machine idle
# and held for it; the balloon of the operator's case runs only there),
# then the summary. Data on the root ext4 (target/bench-policy/, about
# 14 GiB). bench/policy.py has what each experiment does and measures.
#
#   bench/runs/2026-11-26-policy/run.sh          # ROUNDS=3 by default
set -euo pipefail
R=bench/runs/2026-11-26-policy
D=target/bench-policy
ROUNDS="${ROUNDS:-3}"
QUIET=/work/helpers/bin/quiet
HEAVY=/work/helpers/bin/heavy
[ -x "$QUIET" ] || QUIET=
[ -x "$HEAVY" ] || HEAVY=
$HEAVY cargo build --release -p ubio-cli -p ubio-bench --bins
# A copy of the binaries, so that builds between rounds cannot change them.
mkdir -p $D/bin && cp target/release/ubio target/release/ubio-bench $D/bin/
$HEAVY python3 bench/policy.py prepare --dir $D --ubio $D/bin/ubio
rm -f $R/runs.jsonl
for round in $(seq "$ROUNDS"); do
    for exp in $(printf '%s\n' container operator dd cost | shuf); do
        echo "== round $round: $exp $(date -u +%H:%M:%S)"
        $QUIET python3 bench/policy.py round --dir $D --ubio $D/bin/ubio --jsonl $R/runs.jsonl --exp "$exp"
    done
done
python3 bench/policy.py summary --jsonl $R/runs.jsonl | tee $R/summary.md
