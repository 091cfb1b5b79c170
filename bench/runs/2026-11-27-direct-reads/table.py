"""The seq-read runs of each demo: MB/s, pages reclaimed per GB, the hot-file reader's
median % of alone, and bytes read through O_DIRECT. Usage: python3 table.py g1 g2 g3"""
import gzip, json, os, sys
for g in sys.argv[1:]:
    p = f'{g}/report/seq-read/report.json'
    # As committed, gzip-compressed (2026-12-06); a new run's is plain.
    r = json.load(open(p) if os.path.exists(p) else gzip.open(p + '.gz', 'rt'))
    for run in sorted(r['runs'], key=lambda x: (x['mode'], x['round'])):
        s = run['summary']; st = (run.get('ubio_stats') or [{}])[0]
        print(f"{g} {run['mode']:14} round {run['round']} {s['mb_per_s']:6.0f} MB/s "
              f"reclaimed {s['reclaimed_pages_per_gb']:7.0f} pages/GB, reader {s['victim']['median_pct_of_solo']:5.1f}% of alone, "
              f"read direct {st.get('bytes_read_direct', 0) or 0} B")
