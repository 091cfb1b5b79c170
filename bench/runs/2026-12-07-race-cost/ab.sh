#!/usr/bin/env bash
# The release matrix's /dev/shm points (seq-read and seq-write, 1, 2 and 4
# streams, ext4 and xfs; 1 GiB under global pressure) with ubio on each of
# its data paths in turn: `default` (the race between the page cache and
# O_DIRECT), `direct` (UBIO_DIRECT_READS=always UBIO_DIRECT_WRITES=always:
# every aligned call direct, no race) and `cache` (both `never`: the page
# cache alone). One whole matrix per label and turn, the labels of a turn
# in a random order, TURNS turns (default 3), of WORKLOADS (default
# seq-read,seq-write; a matrix of both takes about 10 minutes here, each
# point 50 s with its target and balloon); each matrix has its own
# buffered, dontcache and odirect runs, so each label is compared with the
# modes run beside it. Run it again to go on with what is not done. Root.
# Then compare.py.
#
#   [FIRST_TURN=N] bench/runs/2026-12-07-race-cost/ab.sh [TURNS [WORKLOADS]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a prefix <<< "${UBIO_BENCH_PREFIX:-}"
cd "$here/../../.."
settings_of() { # label -> the environment of its ubio modes
    case "$1" in
    default) ;;
    direct) echo UBIO_DIRECT_READS=always UBIO_DIRECT_WRITES=always ;;
    cache) echo UBIO_DIRECT_READS=never UBIO_DIRECT_WRITES=never ;;
    esac
}
for turn in $(seq "${FIRST_TURN:-1}" "${1:-3}"); do
    for label in $(printf 'default\ndirect\ncache\n' | shuf); do
        echo "== turn $turn: $label ($(settings_of "$label")) $(date -u +%T)"
        # A point the balloon could not set up fails; the matrix, run again,
        # goes on with the points not done.
        for try in 1 2 3; do
            # shellcheck disable=SC2046
            env $(settings_of "$label") "${prefix[@]}" bench/matrix.sh "$here/$label/turn$turn" \
                --preset release --targets ext4/shm,xfs/shm --threads 1,2,4 --rounds 1 \
                --workloads "${2:-seq-read,seq-write}" && break
            echo "== turn $turn: $label: try $try left points not done"
        done
    done
done
