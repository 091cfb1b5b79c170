"""What the kernel reclaimed during a run, when, for whom, and from which list.

A Probe samples every 250 ms /proc/meminfo, the reclaim counters of
/proc/vmstat, each zone's free pages, watermarks and boost (/proc/zoneinfo),
the free blocks per order (/proc/buddyinfo), one file's residency
(cachestat: cached, evicted) and a process's RSS; and it traces, in a trace
instance of its own (never the global buffer), who woke kswapd and with
which order, kswapd's wakes and sleeps, direct reclaim, compaction, the
fallbacks of the page allocator (which boost the watermarks), each LRU
shrink (scanned, reclaimed, deactivated) and every page of the watched file
that left the page cache, with the kernel stack that removed it.
stop() writes the time series and the trace to files and returns a summary.
"""

import json
import os
import re
import threading
import time

from run_programs import cachestat

TRACEFS = "/sys/kernel/tracing"
EVERY = 0.25
MEMINFO = ("MemFree", "Active(file)", "Inactive(file)", "Dirty", "Writeback", "Slab",
           "SReclaimable", "SUnreclaim", "Mlocked", "AnonPages", "PageTables", "Cached")
VMSTAT = re.compile(r"^(pgscan_|pgsteal_|pgdeactivate|pgrefill|pgactivate|workingset_(refault|activate|restore)_file"
                    r"|compact_|kswapd_|allocstall_|thp_|pageoutrun|slabs_scanned|pgrotated|nr_free_pages$)")
# Traced events (tracefs here has no hist triggers: CONFIG_HIST_TRIGGERS
# is off, so every event is read whole from trace_pipe and summed here).
EVENTS = ("vmscan/mm_vmscan_kswapd_wake", "vmscan/mm_vmscan_kswapd_sleep",
          "vmscan/mm_vmscan_wakeup_kswapd", "vmscan/mm_vmscan_direct_reclaim_begin",
          "vmscan/mm_vmscan_lru_shrink_inactive", "vmscan/mm_vmscan_lru_shrink_active",
          "vmscan/mm_vmscan_reclaim_pages", "kmem/mm_page_alloc_extfrag",
          "compaction/mm_compaction_wakeup_kcompactd", "compaction/mm_compaction_begin")
# Stacks of at most this many removals of the watched file's pages.
STACKS = 400
DELETE = "filemap/mm_filemap_delete_from_page_cache"


def meminfo_all():
    """The MEMINFO fields, in 4 KiB pages."""
    out = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":")
        if k in MEMINFO:
            out[k] = int(v.split()[0]) // 4
    return out


def vmstat_sel():
    return {k: int(v) for k, v in (line.split() for line in open("/proc/vmstat")) if VMSTAT.match(k)}


def zones():
    """DMA32 and Normal -> their free pages, watermarks (min, low, high),
    boost and file LRU sizes (pages)."""
    out, z = {}, None
    for line in open("/proc/zoneinfo"):
        f = line.split()
        if line.startswith("Node"):
            z = f[3]
            out[z] = {}
        elif z and len(f) == 2 and f[0] in ("min", "low", "high", "boost", "nr_free_pages",
                                           "nr_zone_inactive_file", "nr_zone_active_file"):
            out[z].setdefault(f[0], int(f[1]))
        elif z and len(f) == 3 and f[0] == "pages" and f[1] == "free":
            out[z]["free"] = int(f[2])
    return {k: v for k, v in out.items() if v.get("free") is not None and k in ("DMA32", "Normal")}


def buddy():
    return {f[3]: [int(x) for x in f[4:]] for f in (l.split() for l in open("/proc/buddyinfo"))
            if f[3] in ("DMA32", "Normal")}


def rss_pages(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 4
    except OSError:
        pass
    return None


class Probe:
    """Samples and traces from its start to stop(); `watched` is the file
    whose residency and removals are followed, `daemon_pid` (set after)
    the process whose RSS is sampled."""

    def __init__(self, name, watched):
        self.watched = watched
        self.inst = os.path.join(TRACEFS, "instances", f"{name}-{os.getpid()}")
        os.mkdir(self.inst)
        self.trigger = None
        try:
            self._w("buffer_size_kb", "16384")
            self._w("trace_clock", "mono")
            for e in EVENTS:
                self._w(f"events/{e}/enable", "1")
            ino = os.stat(watched).st_ino
            self._w(f"events/{DELETE}/filter", f"i_ino == {ino}")
            self.trigger = f"stacktrace:{STACKS} if i_ino == {ino}"
            self._w(f"events/{DELETE}/trigger", self.trigger)
            self._w(f"events/{DELETE}/enable", "1")
            self.pipe = open(os.path.join(self.inst, "trace_pipe"), "rb", buffering=0)
            os.set_blocking(self.pipe.fileno(), False)
        except BaseException:
            self.close()
            raise
        self.series, self.daemon_pid = [], None
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        self.raw = bytearray()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        self._p = threading.Thread(target=self._drain, daemon=True)
        self._p.start()

    def _drain(self):
        while True:
            try:
                b = self.pipe.read(1 << 20)
            except BlockingIOError:
                b = None
            if b:
                self.raw += b
            elif self._stop.is_set():
                return
            else:
                time.sleep(0.02)

    def _w(self, f, v):
        with open(os.path.join(self.inst, f), "w") as fh:
            fh.write(v)

    def _r(self, f):
        with open(os.path.join(self.inst, f)) as fh:
            return fh.read()

    def _run(self):
        while not self._stop.is_set():
            s = {"t": round(time.monotonic() - self.t0, 3), "mem": meminfo_all(), "vm": vmstat_sel(),
                 "zones": zones(), "buddy": buddy()}
            cs = cachestat(self.watched)
            if cs:
                # (cached, evicted, recently evicted) pages
                s["hot"] = (cs.cache, cs.evicted, cs.recently_evicted)
            if self.daemon_pid:
                s["daemon_rss"] = rss_pages(self.daemon_pid)
            self.series.append(s)
            self._stop.wait(EVERY)

    def stop(self, out_prefix):
        """Write OUT.series.jsonl and OUT.trace; the summary."""
        for e in EVENTS + (DELETE,):
            self._w(f"events/{e}/enable", "0")
        time.sleep(0.1)
        self._stop.set()
        self._t.join()
        self._p.join()
        raw = self.raw.decode(errors="replace")
        with open(out_prefix + ".series.jsonl", "w") as f:
            f.write(json.dumps({"t0_mono": self.t0}) + "\n")
            for s in self.series:
                f.write(json.dumps(s) + "\n")
        with open(out_prefix + ".trace", "w") as f:
            f.write(raw)
        self.close()
        return summarize(self.series, raw, self.t0)

    def close(self):
        for e in EVENTS + (DELETE,):
            try:
                self._w(f"events/{e}/enable", "0")
            except OSError:
                pass
        try:
            if self.trigger:
                self._w(f"events/{DELETE}/trigger", "!" + self.trigger.split(" if")[0])
            self._w(f"events/{DELETE}/filter", "0")
        except OSError:
            pass
        if getattr(self, "pipe", None):
            self.pipe.close()
        for _ in range(50):
            try:
                os.rmdir(self.inst)
                return
            except OSError:
                time.sleep(0.1)


LINE = re.compile(r"^\s*(\S.*?)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\w+|<stack trace>):? ?(.*)$")


def summarize(series, raw, t0):
    """Sums of the trace per run: who woke kswapd with which order, what
    kswapd and direct reclaim scanned and took from which list, the
    allocator's fallbacks, and who removed the watched file's pages (with
    the stacks). Times are seconds from the start of the run."""
    out = {"kswapd_wake": {}, "wakeup_kswapd": {}, "direct": {}, "inactive": {}, "active": {},
           "reclaim_pages": {}, "extfrag": {}, "kcompactd_wake": {}, "compaction_begin": {},
           "hot_removed": {}, "hot_stacks": {}, "first": {},
           "inactive_by_priority": {}, "deactivated_by_priority": {}}
    hot_times = []
    lines = raw.splitlines()
    k = 0
    while k < len(lines):
        m = LINE.match(lines[k])
        k += 1
        if not m:
            continue
        comm, t, ev, rest = m.group(1).strip(), float(m.group(3)) - t0, m.group(4), m.group(5)
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        add = lambda d, key, n=1: d.__setitem__(key, d.get(key, 0) + n)
        out["first"].setdefault(ev, round(t, 2))
        if ev == "mm_vmscan_kswapd_wake":
            add(out["kswapd_wake"], f["order"])
        elif ev == "mm_vmscan_wakeup_kswapd":
            add(out["wakeup_kswapd"], f"{comm} order={f['order']} {f['gfp_flags']}")
        elif ev == "mm_vmscan_direct_reclaim_begin":
            add(out["direct"], f"{comm} order={f['order']} {f['gfp_flags']}")
        elif ev == "mm_vmscan_lru_shrink_inactive":
            key = f"{'kswapd' if comm.startswith('kswapd') else 'direct:' + comm} {f['flags']}"
            d = out["inactive"].setdefault(key, {})
            for n in ("nr_scanned", "nr_reclaimed", "nr_dirty", "nr_writeback", "nr_activate_file", "nr_ref_keep"):
                add(d, n, int(f[n]))
            add(d, "calls")
            add(out["inactive_by_priority"], f"{key.split()[0]} prio={f['priority']}", int(f["nr_reclaimed"]))
        elif ev == "mm_vmscan_lru_shrink_active":
            key = f"{'kswapd' if comm.startswith('kswapd') else 'direct:' + comm} {f['flags']}"
            d = out["active"].setdefault(key, {})
            for n in ("nr_taken", "nr_active", "nr_deactivated", "nr_referenced"):
                add(d, n, int(f[n]))
            add(out["deactivated_by_priority"], f"{key.split()[0]} prio={f['priority']}", int(f["nr_deactivated"]))
        elif ev == "mm_vmscan_reclaim_pages":
            d = out["reclaim_pages"].setdefault(comm, {})
            for n in ("nr_scanned", "nr_reclaimed"):
                add(d, n, int(f[n]))
        elif ev == "mm_page_alloc_extfrag":
            add(out["extfrag"], f"order={f['alloc_order']} mt {f['alloc_migratetype']}<-{f['fallback_migratetype']} "
                                f"fragmenting={f['fragmenting']} own={f['change_ownership']}")
        elif ev == "mm_compaction_wakeup_kcompactd":
            add(out["kcompactd_wake"], f.get("order", "?"))
        elif ev == "mm_compaction_begin":
            add(out["compaction_begin"], comm)
        elif ev == "mm_filemap_delete_from_page_cache":
            add(out["hot_removed"], comm, 1 << int(f["order"]))
            hot_times.append((round(t, 1), 1 << int(f["order"])))
        elif ev == "<stack trace>":
            stack = []
            while k < len(lines) and lines[k].startswith(" =>"):
                stack.append(lines[k][4:].split("+")[0])
                k += 1
            add(out["hot_stacks"], " < ".join(stack[:12]))
    # The removals of the watched file per second of the run.
    per_s = {}
    for t, n in hot_times:
        per_s[int(t)] = per_s.get(int(t), 0) + n
    out["hot_removed_per_s"] = per_s
    zmin = {}
    for s in series:
        for z, v in s["zones"].items():
            d = zmin.setdefault(z, {"free_min": v["free"], "boost_max": v.get("boost", 0),
                                    "min": v.get("min"), "low": v.get("low"), "high": v.get("high")})
            d["free_min"] = min(d["free_min"], v["free"])
            d["boost_max"] = max(d["boost_max"], v.get("boost", 0))
    # Free blocks of order 9 and up (what a 2 MiB folio needs) per zone:
    # the lowest and the median over the run.
    for z in zmin:
        big = sorted(sum(s["buddy"][z][9:]) for s in series if z in s.get("buddy", {}))
        if big:
            zmin[z]["order9_free_min"], zmin[z]["order9_free_median"] = big[0], big[len(big) // 2]
    out["zones"] = zmin
    hot = [s["hot"] for s in series if "hot" in s]
    out["hot_evicted_pages"] = hot[-1][1] - hot[0][1] if hot else None
    return out
