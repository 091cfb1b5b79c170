#!/usr/bin/env python3
"""ubio cp -r --jobs 4/8/16 against xcp -r on the tree of tree.py (20k small files,
4 x 256 MiB), to durability (sync -f), 3 rounds in random order: how the
default of --jobs was chosen.  jobs.py [UBIO] (needs root and /var/tmp)."""
import os, random, subprocess, sys, time, shutil
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree
U = sys.argv[1] if len(sys.argv) > 1 else "target/release/ubio"
w = "/var/tmp/ubio-jobs"
shutil.rmtree(w, ignore_errors=True); os.makedirs(w)
src = os.path.join(w, "src")
total = tree.make_tree(src, 20000, 4, 256, 7)
modes = {"j4": [U, "cp", "-r", "--jobs", "4"], "j8": [U, "cp", "-r", "--jobs", "8"], "j16": [U, "cp", "-r", "--jobs", "16"], "xcp": ["xcp", "-r"]}
res = {m: [] for m in modes}
rng = random.Random(1)
for r in range(3):
    order = list(modes); rng.shuffle(order)
    for m in order:
        dst = os.path.join(w, "dst")
        shutil.rmtree(dst, ignore_errors=True); subprocess.run(["sync", "-f", w])
        subprocess.run([U, "evict", "-r", src], stdout=subprocess.DEVNULL, check=True)
        t = time.monotonic()
        subprocess.run(modes[m] + [src, dst], check=True)
        subprocess.run(["sync", "-f", dst], check=True)
        res[m].append(total / 1e6 / (time.monotonic() - t))
for m, v in res.items():
    v.sort(); print(m, " ".join(f"{x:.0f}" for x in v))
shutil.rmtree(w)
