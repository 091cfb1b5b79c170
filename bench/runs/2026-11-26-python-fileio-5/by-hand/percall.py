import io, os, sys, time
import ubio
p = sys.argv[1]
N = 200_000
def best(fn, reps=5):
    xs=[]
    for _ in range(reps):
        t0=time.perf_counter(); fn(); xs.append(time.perf_counter()-t0)
    return min(xs)/N*1e6
buf = bytearray(64)
def loop_into(ri):
    def f():
        for _ in range(N): ri(buf)
    return f
res = {}
fd = os.open(p, os.O_RDONLY)
res["os.read(fd,64)"] = best(lambda: [os.read(fd, 64) for _ in range(N)])
res["os.readv(fd,[buf])"] = best(lambda: [os.readv(fd, [buf]) for _ in range(N)])
res["os.preadv(fd,[buf],0)"] = best(lambda: [os.preadv(fd, [buf], 0) for _ in range(N)])
res["os.lseek(fd,0,CUR)"] = best(lambda: [os.lseek(fd, 0, 1) for _ in range(N)])
os.close(fd)
f = io.FileIO(p); res["io.FileIO.readinto"] = best(loop_into(f.readinto)); f.close()
for b in ("emulated", "buffered", "kernel"):
    f = ubio.FileIO(p, backend=b)
    res[f"ubio.FileIO.readinto {b}"] = best(loop_into(f.readinto))
    res[f"ubio _stream.readinto {b}"] = best(loop_into(f._stream.readinto))
    f.close()
def nop(x): return 0
res["python def call"] = best(loop_into(nop))
for k, v in res.items():
    print(f"{k:32s} {v:6.2f} us/call")
