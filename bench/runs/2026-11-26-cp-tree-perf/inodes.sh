#!/usr/bin/env bash
set -e
# inodes.sh BEFORE MAIN [DIR]: where ext4 puts the copies' inodes (group = inode / 8192), after a removal,
# builds alternated BEFORE MAIN BEFORE MAIN (not timed alone on the machine: the times are indicative).
before=$(realpath "$1") main=$(realpath "$2") here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "${3:-target/bench-cp24-perf}" && cd "${3:-target/bench-cp24-perf}"
[ -d src ] || python3 -c "import sys; sys.path.insert(0, '$here/../2026-11-24-truth'); import tree; tree.make_tree('src', 20000, 4, 256, 2622)"
$main cp -r src dst
for b in before main before main; do
  rm -rf dst; sync -f .
  bin=$main; [ $b = before ] && bin=$before
  s=$(date +%s%N); $bin cp -r src dst; sync -f dst; e=$(date +%s%N)
  echo "$b $(awk -v ns=$((e - s)) 'BEGIN {printf "%.9f", ns / 1e9}') s"
  find dst -type d -printf '%i\n' | sort -n > inodes-$b-dirs.txt
  find dst -type f -printf '%i\n' | sort -n > inodes-$b-files.txt
  awk '{print int($1/8192)}' inodes-$b-dirs.txt | sort -n | uniq -c | awk '{printf "%s:%s ", $2, $1}' | cut -c1-300; echo
  awk '{print int($1/8192)}' inodes-$b-files.txt | sort -n | uniq -c | awk '{printf "%s:%s ", $2, $1}' | cut -c1-300; echo
done
rm -rf dst
