#!/usr/bin/env bash
# Interleaved A/B of the policy test programs_in_scope: BASE (a clone of main
# before the chunked drain, built with `cargo test --release -p ubio-cli
# --test policy --no-run`) against NEW (the change), each round both test
# binaries in a random order, one at a time. Usage:
#   N=10 ab.sh BASE_DIR NEW_DIR OUT_DIR
set -u
base_dir=$1 new_dir=$2 out=$3
N=${N:-8}
mkdir -p "$out"
bin() { ls -t "$1"/target/release/deps/policy-* | grep -v '\.d$' | head -1; }
for i in $(seq 1 "$N"); do
    order="base new"; [ $((RANDOM % 2)) = 0 ] && order="new base"
    for v in $order; do
        dir=$base_dir; [ "$v" = new ] && dir=$new_dir
        (cd "$dir/crates/ubio-cli" && UBIO_NO_SKIP=1 "$(bin "$dir")" programs_in_scope --nocapture --test-threads=1) \
            > "$out/$v-$i.log" 2>&1
        echo "$i $v rc=$? $(grep -E '^(in scope: +python3|.*in scope: +cp )' "$out/$v-$i.log" | tr -s ' ' | tr '\n' '|')"
    done
done
