#!/bin/bash
# prof.sh KIND THREADS own|shared MODE: one worker run under perf record -a -g (and the lock contention tracepoints)
set -e
KIND=$1; T=$2; SH=$3; MODE=${4:-ubio}
BIN=${UBIO_BENCH:-target/release/ubio-bench}
name=$KIND-$T-$SH-$MODE
python3 /tmp/streams-perf/drop.py
JOB=$(python3 /tmp/streams-perf/job.py $KIND $T $SH $MODE)
perf record -q -o /tmp/streams-perf/$name.data -a -g -F 1999 -e cpu-clock -e lock:contention_begin -- $BIN __worker bench "$JOB" | tail -1 | python3 -c "
import json,sys; r=json.loads(sys.stdin.read()); s=r['end_mono_secs']-r['start_mono_secs']
print('$name', round(r['bytes']/s/1e6), 'MB/s', 'cpu s/GB', round((r['cpu_user_secs']+r['cpu_sys_secs'])/(r['bytes']/1e9),3))"
