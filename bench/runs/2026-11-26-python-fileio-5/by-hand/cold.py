import json, os, random, statistics, subprocess, sys
import ubio
p = sys.argv[1]; rounds = int(sys.argv[2]); configs = sys.argv[3:]
CHILD = r'''
import io, os, resource, sys, time, json
p, lib, op, buffering = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if lib.startswith("ubio"):
    import functools, ubio
    backend = lib[5:] or None  # "ubio-kernel": that backend
    opener = functools.partial(ubio.open, backend=backend)
    rawio = functools.partial(ubio.FileIO, backend=backend)
else:
    opener, rawio = open, io.FileIO
r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
got = 0
if op == "readall":
    with rawio(p) as f:
        got = len(f.readall())
elif op == "line":
    with opener(p, "rb", buffering=buffering) as f:
        for line in f: got += len(line)
elif op.startswith("read"):
    n = int(op[4:])
    with opener(p, "rb", buffering=buffering) as f:
        while (b := f.read(n)): got += len(b)
elif op.startswith("into"):
    buf = bytearray(int(op[4:]))
    with opener(p, "rb", buffering=buffering) as f:
        while (k := f.readinto(buf)): got += k
t = time.perf_counter() - t0; r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": t, "user": r1.ru_utime - r0.ru_utime, "sys": r1.ru_stime - r0.ru_stime, "got": got}))
'''
res = {c: [] for c in configs}
rng = random.Random(1)
for r in range(rounds):
    order = list(configs); rng.shuffle(order)
    for c in order:
        lib, op, buf = c.split(":")
        ubio.evict(p, sync=True)
        out = subprocess.run([sys.executable, "-c", CHILD, p, lib, op, buf], check=True, capture_output=True, text=True).stdout
        res[c].append(json.loads(out))
size = os.path.getsize(p)
for c, rs in res.items():
    mbs = [size / x["wall"] / 1e6 for x in rs]
    print(f"{c:28s} {statistics.median(mbs):6.0f} MB/s [{min(mbs):.0f}-{max(mbs):.0f}]  user {statistics.median(x['user'] for x in rs)*1e3:5.1f} ms sys {statistics.median(x['sys'] for x in rs)*1e3:5.1f} ms")
