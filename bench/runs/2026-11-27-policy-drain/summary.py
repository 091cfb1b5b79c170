"""Per variant: runs, failed runs; per program: the outputs' cached peak (MiB), median and max.
Usage: python3 summary.py LOG_DIR"""
import collections, glob, gzip, re, statistics, sys
d = collections.defaultdict(list); fails = collections.Counter(); runs = collections.Counter()
# The committed logs are gzip-compressed (2026-12-06); a new run's (ab.sh) are plain.
for f in sorted(glob.glob(sys.argv[1] + '/*.log') + glob.glob(sys.argv[1] + '/*.log.gz')):
    v = f.split('/')[-1].split('-')[0]
    s = gzip.open(f, 'rt').read() if f.endswith('.gz') else open(f).read()
    runs[v] += 1
    if 'test result: FAILED' in s or 'panicked' in s:
        fails[v] += 1
    for m in re.finditer(r'in scope: +(.+?) +[\d.]+ s: .*?dirty\+writeback peak +([\d.]+) MiB \(cached +([\d.]+)\)', s):
        d[(v, m.group(1))].append(float(m.group(3)))
for v in sorted(runs):
    print(v, 'runs', runs[v], 'failed', fails[v])
for k in sorted(d):
    x = d[k]
    print(k, 'n', len(x), 'median %.1f max %.1f over64 %d' % (statistics.median(x), max(x), sum(1 for y in x if y > 64)))
