# A process out of scope: opens, reads (64 KiB) and closes random files of DIR
# in a loop for SECS seconds; prints the opens per second.
#   python3 neighbour.py DIR SECS
import os, random, sys, time
d, secs = sys.argv[1], float(sys.argv[2])
names = [os.path.join(d, n) for n in os.listdir(d)]
rnd = random.Random(1)
n = 0
t0 = time.monotonic(); end = t0 + secs
while True:
    for _ in range(100):
        fd = os.open(rnd.choice(names), os.O_RDONLY)
        os.read(fd, 65536)
        os.close(fd)
    n += 100
    if time.monotonic() >= end:
        break
print(f"{n / (time.monotonic() - t0):.0f}")
