#!/usr/bin/env bash
# What `ubio policy` cannot see, checked by hand (residency, not timing):
# programs in scope that move no file position (mmap readers and writers,
# pread-only readers) on a cold 256 MiB file, each with the file held open
# for a moment after its I/O and then closed; cached pages (cachestat, via
# `ubio stat`) while still open and once the daemon had 3 s after the
# close. A `cat` is the control. Run as root from the repository's root:
#
#   bench/runs/2026-11-26-policy/limits.sh [UBIO]     # > limits.txt
set -euo pipefail
UBIO=$(realpath "${1:-target/release/ubio}")
D=$(realpath -m target/policy-limits)
mkdir -p "$D/run" && chmod 755 "$D" "$D/run"
own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
CG=/sys/fs/cgroup/memory$own/ubio-policy-limits
mkdir -p "$CG"
daemon=
cleanup() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    # Move ourselves back out before removing the cgroup.
    rmdir "$CG" 2>/dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT
cat > "$D/policy.toml" <<EOF
[daemon]
socket = "$D/run/policy.sock"
[[scope]]
name = "limits"
cgroups = ["memory:$own/ubio-policy-limits"]
EOF
chmod 644 "$D/policy.toml"
"$UBIO" policy run --config "$D/policy.toml" 2> "$D/daemon.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$D/run/policy.sock" ] && break; sleep 0.1; done
head -c $((256 << 20)) /dev/urandom > "$D/in"
sync "$D/in"
cached() { "$UBIO" stat --json "$1" | python3 -c 'import json,sys; t=json.load(sys.stdin)["total"]; print(round(t["cached"]*4096/2**20,1), "dirty", round(t["dirty"]*4096/2**20,1))'; }
# CASE NAME PROGRAM: runs PROGRAM (python) in the scope's cgroup; it prints
# nothing, holds the file 1 s after its I/O, then closes it.
case_() {
    local name=$1 prog=$2
    "$UBIO" evict --sync "$D/in" > /dev/null
    rm -f "$D/out"
    sh -c "echo \$\$ > $CG/cgroup.procs; exec python3 -c '$prog'" &
    local pid=$!
    while [ ! -e "$D/held" ]; do sleep 0.05; done
    local f=in; [[ $name == *writer* ]] && f=out
    local open; open=$(cached "$D/$f")
    rm -f "$D/held"
    wait $pid
    sleep 3
    printf '%-36s cached while open %7s MiB   3 s after close %7s MiB\n' "$name" "$open" "$(cached "$D/$f")"
}
cd "$D"
HOLD='open("held","w").close(); import time; time.sleep(1)'
case_ "control: read() loop (cat-like)" "f=open(\"in\",\"rb\",buffering=0)
while f.read(1<<20): pass
$HOLD
f.close()"
case_ "mmap reader" "import mmap
f=open(\"in\",\"rb\"); m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ)
s=0
for i in range(0,len(m),4096): s+=m[i]
$HOLD
m.close(); f.close()"
case_ "pread-only reader" "import os
fd=os.open(\"in\",os.O_RDONLY); o=0
while True:
    b=os.pread(fd,1<<20,o)
    if not b: break
    o+=len(b)
$HOLD
os.close(fd)"
case_ "mmap writer (256 MiB, no msync)" "import mmap,os
fd=os.open(\"out\",os.O_RDWR|os.O_CREAT,0o644); os.ftruncate(fd,256<<20)
m=mmap.mmap(fd,256<<20); b=b\"x\"*(1<<20)
for i in range(256): m[i<<20:(i+1)<<20]=b
$HOLD
m.close(); os.close(fd)"
echo "daemon log:"; kill "$daemon"; wait "$daemon" || true; daemon=
cat "$D/daemon.log"
