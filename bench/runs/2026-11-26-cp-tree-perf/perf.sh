#!/usr/bin/env bash
# perf of `ubio cp -r` right after `rm -rf` of the previous copy (issue 24's
# after-rm case: 20,000 files of 1-63 KiB in 200 directories and 4 of 256 MiB),
# builds alternated: BEFORE MAIN BEFORE MAIN, each run `perf record -g` of the
# copy, then `sync -f`; the tree is made once with tree.py's make_tree (seed 2622).
#
#   perf.sh BEFORE MAIN [DIR]      (alone on the machine)
#
# Needs perf (Debian: linux-perf, for the running kernel), which
# scripts/install-deps.sh does not install.
set -euo pipefail
command -v perf >/dev/null || { echo "perf.sh: needs perf (Debian: linux-perf)" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
before=$(realpath "$1") main=$(realpath "$2") dir=${3:-target/bench-cp24-perf}
mkdir -p "$dir" && cd "$dir"
if [ ! -d src ]; then
    python3 -c "import sys; sys.path.insert(0, '$here/../2026-11-24-truth'); import tree; tree.make_tree('src', 20000, 4, 256, 2622)"
fi
run() { # NAME BINARY N
    rm -rf dst && sync -f .
    "$2" evict -r src >/dev/null
    perf record -q -g -F 499 -o "$1-$3.data" -- "$2" cp -r src dst 2>/dev/null
    local TIMEFORMAT="$1 run $3: sync %R s"
    time sync -f dst
}
"$main" cp -r src dst   # so that the first measured run is after a removal too
for n in 1 2; do
    for b in before main; do
        bin=$main; [ $b = before ] && bin=$before
        TIMEFORMAT="$b run $n: %R s, user %U s, sys %S s"
        time bash -c "$(declare -f run); run $b $bin $n"
    done
done
rm -rf dst
