#!/usr/bin/env bash
# Issue 36's pod run: bench/pods.py in the Linux 6.12 guest of
# scripts/guest/run.sh (cgroup v2 alone, TCG), ROUNDS rounds (default 3) of
# the six configurations (no daemon, the daemon, the daemon with a 512 MiB
# budget; MGLRU on and off) copying SIZE GiB (default 4); writes pods.jsonl.gz,
# summary.md and the plots (matplotlib, in a venv of its own under target/)
# here, and keeps the guest's console log in console/.
#
#   bench/runs/2026-12-06-pods/run.sh [ROUNDS] [SIZE_GIB]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
rounds=${1:-3}
size=${2:-4}
cd "$repo"
UBIO_GUEST_KERNELS=6.12 UBIO_GUEST_FS=none UBIO_GUEST_NFS= UBIO_GUEST_POWERCUT= UBIO_GUEST_DISKFAULT= \
    UBIO_GUEST_POLICY= UBIO_GUEST_DISK_GB=$((2 * size + 4)) UBIO_GUEST_TIMEOUT=14400 \
    UBIO_GUEST_KEEP_LOG="$here/console" \
    UBIO_GUEST_PYTHON="bench/pods.py --rounds $rounds --size-gib $size" \
    scripts/guest/run.sh
grep -a '^GUEST-SCRIPT ' "$here/console/console-6.12.log" | sed 's/^GUEST-SCRIPT //' | tr -d '\r' > "$here/pods.jsonl"
venv=$repo/target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import matplotlib' 2>/dev/null || "$venv/bin/pip" install --quiet matplotlib
gzip -9f "$here/pods.jsonl" "$here/console/console-6.12.log"
"$venv/bin/python" bench/pods_report.py "$here/pods.jsonl.gz" "$here"
