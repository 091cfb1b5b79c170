# under.py DATA SYSCALL: what the bench threads' samples inside SYSCALL spend their time in (frames right below it, and leaves)
import subprocess, sys, collections, re
out = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,event,ip,sym"], capture_output=True, text=True).stdout
want = sys.argv[2]; below = collections.Counter(); leaf = collections.Counter(); n = 0
def handle(comm, ev, st):
    global n
    if not comm.startswith("bench-") or not ev.startswith("cpu-clock") or want not in st: return
    n += 1; i = st.index(want)
    below[" < ".join(st[max(0,i-3):i])] += 1; leaf[st[0]] += 1
cur=None; st=[]
for line in out.splitlines():
    if not line.strip():
        if cur: handle(*cur, st)
        cur=None; st=[]; continue
    if re.search(r"(cpu-clock|lock:contention_begin):", line):
        p=line.split(); cur=(p[0], p[1]); st=[]
    else:
        p=line.split(None,1)
        if len(p)==2: st.append(p[1].split("+")[0].strip())
if cur: handle(*cur, st)
print(n, "samples in", want)
for s,c in below.most_common(8): print(f"  {c:5d}  {s}")
print(" leaves:")
for s,c in leaf.most_common(8): print(f"  {c:5d}  {s}")
