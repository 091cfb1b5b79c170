#!/usr/bin/env bash
# What the policy daemon costs a busy process out of its scope: a Python
# process opens, reads and closes cached 64 KiB files (neighbour.py) for SECS
# seconds, with no daemon and beside a daemon whose only scope is a cgroup
# that does not exist, ROUNDS rounds in a random order each; prints the opens
# per second and the daemon's share of a CPU (utime + stime of
# /proc/PID/stat). Needs root and target/release/ubio.
#
#   ROUNDS=4 SECS=6 bench/runs/2026-12-07-neighbours-policy/daemon-cost.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
UBIO=${UBIO:-$repo/target/release/ubio}
ROUNDS=${ROUNDS:-4}
SECS=${SECS:-6}
dir=$repo/target/daemon-cost
daemon=
cleanup() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/files"
for i in $(seq 0 1999); do head -c 65536 /dev/urandom > "$dir/files/$i"; done
cat "$dir"/files/* > /dev/null
cat > "$dir/policy.toml" <<EOT
[daemon]
socket = "$dir/policy.sock"
[[scope]]
name = "nobody"
cgroups = ["/ubio-daemon-cost-nothing-here"]
EOT
for r in $(seq 1 "$ROUNDS"); do
    for mode in $(printf "none\ndaemon\n" | shuf); do
        if [ "$mode" = daemon ]; then
            "$UBIO" policy run --config "$dir/policy.toml" > "$dir/daemon.log" 2>&1 &
            daemon=$!
            for _ in $(seq 100); do [ -S "$dir/policy.sock" ] && break; sleep 0.05; done
            sleep 0.5
            c0=$(awk '{print $14 + $15}' "/proc/$daemon/stat")
        fi
        ops=$(python3 "$here/neighbour.py" "$dir/files" "$SECS")
        if [ "$mode" = daemon ]; then
            c1=$(awk '{print $14 + $15}' "/proc/$daemon/stat")
            kill "$daemon"; wait "$daemon" || true; daemon=
            hz=$(getconf CLK_TCK)
            echo "round $r daemon: $ops opens/s, daemon $(awk -v a="$c0" -v b="$c1" -v s="$SECS" -v hz="$hz" 'BEGIN { printf "%.0f", (b - a) / hz / s * 100 }')% of a CPU"
        else
            echo "round $r none: $ops opens/s"
        fi
    done
done
