#!/usr/bin/env bash
# The run committed here: ubio's own commands against the tools they replace,
# side by side in one harness run per table, every round in a new random
# order (one seed for all, printed and kept in every report), medians
# [min-max], CPU and system s/GB, and the memory the VM handed back to its
# host during each run (free page reporting).
#
#   bench/runs/2026-11-24-truth/run.sh [OUT [PART...]]
#
# OUT defaults to this directory; PARTs (default: all, in this order):
#   reads-cgroup    cold 4 GiB reads in a 1 GiB memory cgroup
#   reads-free      cold 4 GiB reads without a memory limit
#   copies          4 GiB single-file copies to durability (copy, then fsync)
#   tree            a tree of 20k small files and 4 x 256 MiB copied to
#                   durability (cp -r, rsync -a, xcp -r, ubio cp -r): tree.py,
#                   since the harness runs one command per file of equal size
# SEED=N repeats the orders of an earlier run (default: from the clock).
# ROUNDS=N (default 5) and SIZE (default 4G) for a smaller trial.
#
# Baselines that go through the page cache (cat, dd, cp, rsync, xcp) run
# twice per round: plainly, and as NAME+backed right after memory of the size
# their pages will take was faulted in (huge pages) and released. On this
# Firecracker VM free memory goes back to the host about 2 s after it is
# freed, and every page taken from it again costs a host fault; the +backed
# figure is the one a bare-metal machine, which has no host faults, would see.
#
# Needs root, ~10 GiB free under DIR (default /var/tmp) and the tools
# (scripts/install-deps.sh: rsync, nocache, xcp). About 35 minutes at 4G x 5.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
shift || true
parts=("${@:-reads-cgroup reads-free copies tree}")
# shellcheck disable=SC2206
parts=(${parts[*]})
cd "$here/../../.."
cargo build --release -p ubio-cli -p ubio-preload -p ubio-bench
ubio="$PWD/target/release/ubio"
seed="${SEED:-$(date +%s)}"
rounds="${ROUNDS:-5}"
size="${SIZE:-4G}"
dir="${DIR:-/var/tmp}"
mkdir -p "$out"
echo "seed $seed, $rounds rounds, $size, in $dir" | tee "$out/seed.txt"
common=(--dir "$dir" --dataset "$size" --block 1M --no-victim --rounds "$rounds" --seed "$seed")
reads=(--workload seq-read --modes cat,cat+backed,dd,dd+backed,ubio-cat,ubio-run-cat)
# No --verify: reading the copies back would leave freshly freed (backed)
# pages for the next run; the copy tests check the contents.
copies=(--workload copy
    --modes cp,cp+backed,xcp,xcp+backed,rsync,rsync+backed,dd-nocache,ubio-cp,ubio-run-cp)

for part in "${parts[@]}"; do
    case "$part" in
    reads-cgroup) "$ubio" bench run "${reads[@]}" "${common[@]}" --limit 1G --out "$out/$part" > "$out/$part.txt" 2> >(tee "$out/$part.log" >&2) ;;
    reads-free) "$ubio" bench run "${reads[@]}" "${common[@]}" --no-limit --out "$out/$part" > "$out/$part.txt" 2> >(tee "$out/$part.log" >&2) ;;
    copies) "$ubio" bench run "${copies[@]}" "${common[@]}" --no-limit --out "$out/$part" > "$out/$part.txt" 2> >(tee "$out/$part.log" >&2) ;;
    tree) python3 "$here/tree.py" "$ubio" "$dir" "$out/tree" --rounds "${TREE_ROUNDS:-4}" --seed "$seed" \
        --large-size 256 > "$out/tree.txt" ;;
    *) echo "run.sh: unknown part '$part' (reads-cgroup, reads-free, copies, tree)" >&2; exit 2 ;;
    esac
done
