#!/usr/bin/env bash
# Every 0.5 s, one line: the time (s since the epoch), the Normal zone's free
# blocks by order 0-10 (/proc/buddyinfo), its watermark boost in pages
# (/proc/zoneinfo), and /proc/vmstat's free pages, reclaim, compaction and
# kswapd counters (cumulative). The header names the columns.
set -euo pipefail
counters="nr_free_pages pgsteal_kswapd pgsteal_direct pgscan_kswapd compact_stall compact_fail compact_success compact_daemon_wake kswapd_low_wmark_hit_quickly kswapd_high_wmark_hit_quickly allocstall_movable"
printf 't'
for o in $(seq 0 10); do printf '\torder%s' "$o"; done
printf '\tboost'
for c in $counters; do printf '\t%s' "$c"; done
printf '\n'
while :; do
    line=$(date +%s.%N)
    line+=$(awk '$4 == "Normal" { for (i = 5; i <= 15; i++) printf "\t%s", $i }' /proc/buddyinfo)
    line+=$(awk '/^Node .* zone +Normal/ { z = 1; next } /^Node/ { z = 0 } z && $1 == "boost" { printf "\t%s", $2 }' /proc/zoneinfo)
    line+=$(awk -v want="$counters" 'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) idx[w[i]] = i }
        $1 in idx { v[idx[$1]] = $2 } END { for (i = 1; i <= n; i++) printf "\t%s", v[i] }' /proc/vmstat)
    printf '%s\n' "$line"
    sleep 0.5
done
