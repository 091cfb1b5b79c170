#!/usr/bin/env bash
# Rounds of bench/policy.py's experiments into a run directory: the driver of
# bench/runs/2026-11-26-policy, -policy-nice and -policy-operator, each of which
# gives its own parameters in its run.sh.
#
#   bench/policy-rounds.sh OUT ROUNDS [policy.py round ARGS...]
#
# Each round appends its runs to OUT/runs.jsonl and its output to OUT/output.txt;
# at the end OUT/summary.md is `policy.py summary` of OUT/runs.jsonl. The data
# is in target/bench-policy (made by `policy.py prepare` when PREPARE=1).
#
# Environment:
#   EXPS="container operator dd cost"  each round runs these experiments, each in a
#                 call of its own, in a new random order (`--exp E` is added); without
#                 EXPS one call per round, the ARGS naming the experiment
#   UBIO_BIN_DIR  where ubio and ubio-bench are; default: this tree's release build,
#                 copied to target/bench-policy/bin (so that builds between rounds
#                 cannot change them)
#   PREPARE=1     make the data first
#   UBIO_BENCH_PREFIX="CMD ARGS"  a command each experiment-round runs under (for
#                 example a lock that keeps a shared machine quiet); default none
# Needs root.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/policy-rounds.sh OUT ROUNDS [policy.py round ARGS...]" >&2; exit 2; }
out=$1 rounds=$2
shift 2
mkdir -p "$out"; out=$(cd "$out" && pwd)
bin=
[ -z "${UBIO_BIN_DIR:-}" ] || bin=$(cd "$UBIO_BIN_DIR" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D=target/bench-policy
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
if [ -z "$bin" ]; then
    cargo build --release -p ubio-cli -p ubio-bench --bins
    mkdir -p $D/bin && cp target/release/ubio target/release/ubio-bench $D/bin/
    bin=$PWD/$D/bin
fi
[ -z "${PREPARE:-}" ] || python3 bench/policy.py prepare --dir $D --ubio "$bin/ubio"
one() { # LABEL ARGS...
    echo "== round $1 $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/output.txt"
    shift
    "${prefix[@]}" python3 bench/policy.py round --dir $D --ubio "$bin/ubio" --jsonl "$out/runs.jsonl" "$@" \
        2>&1 | tee -a "$out/output.txt"
}
for i in $(seq 1 "$rounds"); do
    if [ -n "${EXPS:-}" ]; then
        # shellcheck disable=SC2086
        for exp in $(printf '%s\n' $EXPS | shuf); do one "$i: $exp" --exp "$exp" "$@"; done
    else
        one "$i" "$@"
    fi
done
python3 bench/policy.py summary --jsonl "$out/runs.jsonl" > "$out/summary.md"
