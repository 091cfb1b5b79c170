#!/usr/bin/env bash
# `cp -r` of a tree by several ubio builds (and GNU cp) side by side, to
# durability, every round in a new random order: bench/runs/2026-11-24-truth's
# tree.py with a mode per build. The driver of the runs of issue 24
# (bench/runs/2026-11-26-cp-before-after, -cp-tree, -cp-tree-lookahead,
# -cp-tree-journal), each of which gives its builds and tree.py's arguments in
# its run.sh.
#
#   bench/cp-tree.sh DIR OUT NAME=UBIO... [-- tree.py ARGS...]
#
# Each UBIO binary is copied to DIR/NAME/ubio (the mode's name: ubio-cp@NAME/ubio);
# DIR (on the filesystem to measure) holds the tree and the copies. OUT is
# tree.py's output directory (OUT/tree.json, OUT/tree.md), its output also in
# OUT.txt; the builds' `ubio --version` go to VERSIONS.
#
# Environment:
#   MODES=a,b,...  tree.py's modes (default: cp, then ubio-cp@NAME/ubio for each NAME)
#   TREE_UBIO=NAME the build tree.py itself uses (ubio evict of the source; default the
#                  last NAME)
#   VERSIONS=FILE  default OUT's directory/versions.txt
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: bench/cp-tree.sh DIR OUT NAME=UBIO... [-- tree.py ARGS...]" >&2; exit 2; }
tree=$(realpath "$(dirname "${BASH_SOURCE[0]}")/runs/2026-11-24-truth/tree.py")
dir=$1 out=$(realpath -m "$2")
shift 2
names=() bins=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    names+=("${1%%=*}") bins+=("$(realpath "${1#*=}")")
    shift
done
[ $# -eq 0 ] || shift
versions=$(realpath -m "${VERSIONS:-$(dirname "$out")/versions.txt}")
mkdir -p "$dir"
modes=cp
for i in "${!names[@]}"; do
    n=${names[$i]}
    mkdir -p "$dir/$n"
    [ "${bins[$i]}" = "$(realpath -m "$dir/$n/ubio")" ] || cp "${bins[$i]}" "$dir/$n/ubio"
    modes+=",ubio-cp@$n/ubio"
done
cd "$dir"
for n in "${names[@]}"; do echo "$n: $("$n/ubio" --version)"; done | tee "$versions"
python3 "$tree" "${TREE_UBIO:-${names[-1]}}/ubio" . "$out" --modes "${MODES:-$modes}" "$@" | tee "$out.txt"
