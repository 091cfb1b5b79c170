# bysys.py DATA: the bench threads' cpu samples by system call (and by caller of the irq-off unlocks)
import subprocess, sys, collections, re
out = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,event,ip,sym"], capture_output=True, text=True).stdout
sysc = collections.Counter(); unl = collections.Counter(); total = 0
def handle(comm, ev, stack):
    global total
    if not comm.startswith("bench-") or not ev.startswith("cpu-clock"): return
    total += 1
    s = None
    if "do_syscall_64" in stack:
        i = stack.index("do_syscall_64"); s = stack[i-1] if i > 0 else "do_syscall_64"
    elif "exc_page_fault" in stack:
        s = "page fault"
    if s is None:
        s = "user" if stack and not stack[0].startswith(("_", "x")) and "::" in "".join(stack[:3]) else ("(no syscall) " + (stack[0] if stack else "?"))
    s = re.sub(r"^(__x64_sys_|__do_sys_|__se_sys_|ksys_)", "", s)
    sysc[s] += 1
    if stack and stack[0].startswith("_raw_spin_unlock_irq"):
        c = next((f for f in stack[1:] if not re.search(r"spin|unlock", f)), "?")
        unl[(s, c)] += 1
cur=None; stack=[]
for line in out.splitlines():
    if not line.strip():
        if cur: handle(*cur, stack)
        cur=None; stack=[]; continue
    if re.search(r"(cpu-clock|lock:contention_begin):", line):
        p=line.split(); cur=(p[0], p[1] if len(p)>1 else ""); stack=[]
    else:
        p=line.split(None,1)
        if len(p)==2: stack.append(p[1].split("+")[0].strip())
if cur: handle(*cur, stack)
print(f"{total} samples of the bench threads")
for s,n in sysc.most_common(12): print(f"  {100*n/total:5.1f}%  {s}")
print("irq-off unlocks (time under an irq-disabling lock lands there), by syscall and caller:")
for (s,c),n in unl.most_common(12): print(f"  {100*n/total:5.1f}%  {s}: {c}")
