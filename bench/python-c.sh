#!/usr/bin/env bash
# Read a big file from Python (builtin open() vs ubio.open()) and from C
# (read(2) vs ubio_read, the ubio-sum example): speed, CPU, peak page cache
# of the file; 3 rounds in random order, medians. See bench/python_c.py.
#
#   bench/python-c.sh [SIZE_GIB=4] [ROUNDS=3]
#
# Needs the venv of scripts/install-deps.sh (maturin) and SIZE_GIB free in target/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size="${1:-4}"
rounds="${2:-3}"
pyenv="${UBIO_PYENV:-$HOME/.cache/ubio/pyenv}"
site=target/bench-python-c/site
rm -rf target/bench-python-c && mkdir -p target/bench-python-c/wheels
make -s -C crates/ubio-capi example
"$pyenv/bin/maturin" build --release --quiet --interpreter "$pyenv/bin/python" \
    --manifest-path python/Cargo.toml --target-dir target/maturin --out target/bench-python-c/wheels
"$pyenv/bin/python" -m pip install --quiet --no-deps --no-index --target "$site" target/bench-python-c/wheels/*.whl
PYTHONPATH="$site" "$pyenv/bin/python" bench/python_c.py --file target/bench-python-c/data \
    --size-gib "$size" --rounds "$rounds" --summer target/release/ubio-sum \
    --json target/bench-python-c/runs.json
