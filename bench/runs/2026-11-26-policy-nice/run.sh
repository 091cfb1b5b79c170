#!/usr/bin/env bash
# The operator experiment of bench/policy.py (a tar of an 8 GiB tree in
# scope beside a hot 256 MiB reader out of scope, 2 GiB left to the machine)
# with a third mode: the daemon at nice 0 instead of its own -10 (issue 28:
# was the hot reader slower with the policy because the writeback and page
# freeing the daemon does in its own context run at -10?). Each round alone
# on the machine, the three modes in a new random order; ROUNDS rounds
# (default 3), through bench/policy-rounds.sh.
#
#   bench/runs/2026-11-26-policy-nice/run.sh BIN_DIR [ROUNDS]
#
# BIN_DIR holds ubio and ubio-bench (the balloon and the victim); the data is
# made first by `python3 bench/policy.py prepare --dir target/bench-policy
# --ubio BIN_DIR/ubio`.
set -euo pipefail
UBIO_BIN_DIR=$1 exec "$(dirname "$0")/../../policy-rounds.sh" "$(dirname "$0")" "${2:-3}" \
    --exp operator --operator-modes on-nice0
