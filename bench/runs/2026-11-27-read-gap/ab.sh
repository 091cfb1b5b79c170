#!/usr/bin/env bash
# One A/B of the 2 GiB point: `ubio` (auto) with DirectReads::UnderReclaim beside
# `ubio:emulated` with the library's default of the binaries (Never, before the switch
# became the default), buffered and odirect; built with experiment.patch.
#   ab.sh BIN_DIR OUT SEED ROUNDS
set -euo pipefail
bin=$1 out=$2 seed=$3 rounds=$4
mkdir -p "$out"
UBIO_EXP_DIRECT_READS=1 UBIO_EXE=$bin/ubio "$bin/ubio-bench" run --workload seq-read \
  --fs ext4 --backing disk --pressure global --limit 512M --dataset 2G --no-victim \
  --modes buffered,odirect,ubio,ubio:emulated --rounds "$rounds" --seed "$seed" \
  --out "$out" > "$out/run.txt" 2>&1
