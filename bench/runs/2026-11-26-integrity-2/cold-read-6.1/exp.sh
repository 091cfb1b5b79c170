#!/bin/bash
# The experiment of the README: N reads of a cold 128 MiB file on ext4 with
# `ubio cat --backend B`, each with (MODE=hammer) or without (none) a
# concurrent mincore() loop over the file (hammer.c, what the residency
# sampler does before Linux 6.5); the file's pages still cached after each
# (fincore: mincore).
#   cc -O2 -o hammer hammer.c; UBIO=target/release/ubio ./exp.sh 200 hammer emulated /path/on/ext4/cold
set -eu
n=$1 mode=$2 backend=$3 f=$4
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$f" ] || { head -c $((128 << 20)) /dev/urandom > "$f"; sync "$f"; }
left=0 runs_left=0
for i in $(seq "$n"); do
    "$UBIO" evict "$f" > /dev/null
    if [ "$mode" = hammer ]; then "$here/hammer" "$f" & hp=$!; fi
    "$UBIO" cat --backend "$backend" "$f" > /dev/null
    if [ "$mode" = hammer ]; then kill -TERM $hp; wait $hp; fi
    c=$(fincore -nb -o PAGES "$f" | tr -d ' ')
    left=$((left + c))
    if [ "$c" -gt 0 ]; then runs_left=$((runs_left + 1)); echo "run $i: $c pages left"; fi
done
echo "$mode $backend: $runs_left of $n runs left pages, $left pages in all"
