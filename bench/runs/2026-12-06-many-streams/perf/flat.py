# flat.py DATA: kernel+user self time of the bench threads by symbol, and lock contention by caller
import subprocess, sys, collections, re
data = sys.argv[1]
out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,event,ip,sym"], capture_output=True, text=True).stdout
samples = collections.Counter(); total = 0; cont = collections.Counter(); ncont = 0
cur = None; stack = []
def flush():
    global total, ncont
    if cur is None: return
    comm, ev = cur
    if not comm.startswith("bench-"): return
    if ev.startswith("cpu-clock"):
        total += 1
        if stack: samples[stack[0]] += 1
    elif "contention_begin" in ev:
        ncont += 1
        # first caller outside the locking primitives
        for s in stack:
            if not re.search(r"spin|lock|mutex|rwsem|down_|up_|__schedule|schedule|contention", s):
                cont[s] += 1; break
for line in out.splitlines():
    if not line.strip(): flush(); cur = None; stack = []; continue
    if re.search(r"(cpu-clock|lock:contention_begin):", line):
        parts = line.split()
        comm = parts[0]; ev = parts[1] if len(parts) > 1 else ""
        cur = (comm, ev); stack = []
    else:
        p = line.split(None, 1)
        if len(p) == 2: stack.append(p[1].split("+")[0].strip())
flush()
print(f"bench threads: {total} cpu samples, {ncont} lock contentions")
for s, n in samples.most_common(18): print(f"  {100*n/max(total,1):5.1f}%  {s}")
print("contended, first caller outside locking:")
for s, n in cont.most_common(10): print(f"  {n:7d}  {s}")
