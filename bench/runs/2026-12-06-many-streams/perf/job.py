import json, sys
kind, threads, shared = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "shared"
mode = sys.argv[4] if len(sys.argv) > 4 else "ubio"
print(json.dumps({
 "workload": {"kind": kind, "block_bytes": 1<<20, "threads": threads, "files_per_thread": 1,
   "dataset_bytes": 2<<30, "duration_secs": None, "queue_depth": 1, "seed": 1, "shared_file": shared},
 "mode": mode,
 "layout": {"dir": "/tmp/streams-perf/mnt/b", "threads": threads, "files_per_thread": 1,
   "file_bytes": (2<<30)//threads, "block_bytes": 1<<20, "shared": shared},
 "ubio_exe": None}))
