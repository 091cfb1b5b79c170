//! The machine's reclaim while the daemon runs, from the kernel's own
//! counters: what `ubio policy status` shows as "machine reclaim since
//! start" and the one line per episode the log gets when kswapd reclaims
//! other processes' pages for high-order allocations.
//!
//! Why: with the policy on, the reclaim seen beside a backup in scope was
//! kswapd woken at order 9 by the backup itself (ext4's 2 MiB readahead
//! folios failing their fast path for want of a free 2 MiB block) while
//! free memory was far above the watermarks; each wake reclaims at least
//! twice the folio whatever the free memory, and with the stream's own
//! pages already dropped kswapd takes other processes' pages
//! (bench/runs/2026-11-26-policy-operator). The daemon cannot stop that;
//! it can say so, with the counts.
//!
//! One place reads ([`Machine`]: /proc/vmstat, /proc/zoneinfo and the
//! trace instance of [`crate::tracefs`]) and one judges ([`Watch`], fed
//! [`Snapshot`]s and instants, so its tests use made-up ones).

use crate::tracefs::{self, Instance};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use ubio::procfs::{self, parse_zoneinfo, Zone};
use ubio::reclaim::above_high;
use ubio::size::human;

/// The /proc/vmstat counters shown (those this kernel has): pages scanned
/// and reclaimed ("stolen") by kswapd and by direct reclaim, direct
/// reclaim's stalls per zone, direct compaction's stalls and outcomes.
pub const COUNTERS: &[&str] = &[
    "pgscan_kswapd",
    "pgsteal_kswapd",
    "pgscan_direct",
    "pgsteal_direct",
    "allocstall_dma",
    "allocstall_dma32",
    "allocstall_normal",
    "allocstall_movable",
    "allocstall_device",
    "compact_stall",
    "compact_fail",
    "compact_success",
];

/// Orders above the kernel's PAGE_ALLOC_COSTLY_ORDER (3): what large folios
/// (order 9: 2 MiB) and huge pages ask, and what reclaim alone often
/// cannot satisfy.
pub const HIGH_ORDER: u32 = 4;

/// How often the daemon looks (the judgement's interval).
pub const TICK: Duration = Duration::from_secs(1);
/// At most one line in the log this often.
pub const SAY_EVERY: Duration = Duration::from_secs(60);
/// An episode ends after this many looks without its reclaim.
const QUIET_LOOKS: u32 = 10;

/// The counters at one moment. `wakes` is None where they are not traced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub vmstat: BTreeMap<String, u64>,
    pub zones: Vec<Zone>,
    pub wakes: Option<BTreeMap<u32, u64>>,
}

/// The [`COUNTERS`] of /proc/vmstat's text.
pub fn parse_vmstat(text: &str) -> BTreeMap<String, u64> {
    procfs::parse_pairs(text, 1)
        .into_iter()
        .filter(|(k, _)| COUNTERS.contains(&k.as_str()))
        .collect()
}

/// What a wake count by order says: all wakes, and those of [`HIGH_ORDER`]
/// or more.
fn wake_totals(w: &BTreeMap<u32, u64>) -> (u64, u64) {
    let all = w.values().sum();
    let high = w.range(HIGH_ORDER..).map(|(_, n)| n).sum();
    (all, high)
}

/// `now - then` per key (a key `then` lacks counts from 0).
fn delta<K: Ord + Clone>(now: &BTreeMap<K, u64>, then: &BTreeMap<K, u64>) -> BTreeMap<K, u64> {
    now.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(then.get(k).copied().unwrap_or(0)),
            )
        })
        .collect()
}

/// The daemon's streams now, from the engine's figures (the status's
/// managed files): for the sentence's last part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streams {
    pub files: usize,
    /// Bytes of their own pages cached now, all files.
    pub own_cached: u64,
    /// The most one file holds, and that file's window.
    pub largest: u64,
    pub largest_window: u64,
}

/// "machine reclaim since start", for the status and the log at exit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineReclaim {
    pub since_s: f64,
    /// The deltas of [`COUNTERS`] this kernel has, since the daemon started.
    pub counters: BTreeMap<String, u64>,
    /// Why /proc/vmstat or /proc/zoneinfo could not be read, if so.
    pub unreadable: Option<String>,
    /// kswapd's wakes by order since start (traced), or None: then
    /// `why_untraced` says why.
    pub kswapd_wakes: Option<BTreeMap<u32, u64>>,
    /// Those of them of order [`HIGH_ORDER`] or more.
    pub kswapd_wakes_high_order: Option<u64>,
    pub trace_instance: Option<String>,
    /// Events the trace's ring buffer lost before they were read.
    pub trace_lost: u64,
    pub why_untraced: Option<String>,
    /// Episodes of kswapd reclaiming with free memory above every zone's
    /// high watermark, and the pages it reclaimed in them.
    pub episodes: u64,
    pub episode_pages_stolen: u64,
    /// The line the log got for the last episode said.
    pub last_said: Option<String>,
}

/// An episode under way.
#[derive(Debug, Clone)]
struct Episode {
    began: Instant,
    stolen: u64,
    wakes: u64,
    wakes_high: u64,
    quiet: u32,
    said: bool,
}

/// The judgement: fed a [`Snapshot`] at each look, it keeps the figures
/// since start and says, once per episode and at most once per
/// [`SAY_EVERY`], when kswapd reclaims while every zone's free memory is
/// above its high watermark and the high-order wakes dominate.
#[derive(Debug)]
pub struct Watch {
    started: Instant,
    first: Snapshot,
    last: Snapshot,
    last_at: Instant,
    episode: Option<Episode>,
    episodes: u64,
    episode_stolen: u64,
    said_at: Option<Instant>,
    last_said: Option<String>,
    /// Why kswapd's wakes are not traced (None: they are).
    why_untraced: Option<String>,
}

impl Watch {
    pub fn new(first: Snapshot, at: Instant, why_untraced: Option<String>) -> Watch {
        Watch {
            started: at,
            last: first.clone(),
            last_at: at,
            first,
            episode: None,
            episodes: 0,
            episode_stolen: 0,
            said_at: None,
            last_said: None,
            why_untraced,
        }
    }

    /// Judge the interval from the last look to `now`; the line for the
    /// log, if this is the moment to say one. `streams` is asked only then.
    pub fn look(
        &mut self,
        now: Snapshot,
        at: Instant,
        streams: impl FnOnce() -> Streams,
    ) -> Option<String> {
        let prev = std::mem::replace(&mut self.last, now);
        let since = at.saturating_duration_since(self.last_at);
        self.last_at = at;
        let now = &self.last;
        let stolen = now.vmstat.get("pgsteal_kswapd").map_or(0, |v| {
            v.saturating_sub(prev.vmstat.get("pgsteal_kswapd").copied().unwrap_or(0))
        });
        let (wakes, wakes_high) = match (&now.wakes, &prev.wakes) {
            (Some(n), Some(p)) => wake_totals(&delta(n, p)),
            _ => (0, 0),
        };
        let above_high = above_high(&prev.zones, &now.zones);
        let high_dominates = now.wakes.is_none() || 2 * wakes_high > wakes;
        if stolen == 0 || !above_high || !high_dominates {
            if let Some(e) = &mut self.episode {
                e.quiet += 1;
                if e.quiet >= QUIET_LOOKS {
                    self.episode = None;
                }
            }
            return None;
        }
        let e = self.episode.get_or_insert_with(|| {
            self.episodes += 1;
            Episode {
                began: at - since,
                stolen: 0,
                wakes: 0,
                wakes_high: 0,
                quiet: 0,
                said: false,
            }
        });
        e.stolen += stolen;
        e.wakes += wakes;
        e.wakes_high += wakes_high;
        e.quiet = 0;
        self.episode_stolen += stolen;
        let may_say = self
            .said_at
            .is_none_or(|t| at.duration_since(t) >= SAY_EVERY);
        if e.said || !may_say {
            return None;
        }
        e.said = true;
        self.said_at = Some(at);
        let line = sentence(e, at, now, self.why_untraced.as_deref(), &streams());
        self.last_said = Some(line.clone());
        Some(line)
    }

    /// The figures since start, up to the last look.
    pub fn figures(&self) -> MachineReclaim {
        let wakes = match (&self.last.wakes, &self.first.wakes) {
            (Some(n), Some(f)) => Some(delta(n, f)),
            _ => None,
        };
        MachineReclaim {
            since_s: self.last_at.duration_since(self.started).as_secs_f64(),
            counters: delta(&self.last.vmstat, &self.first.vmstat),
            kswapd_wakes_high_order: wakes.as_ref().map(|w| wake_totals(w).1),
            kswapd_wakes: wakes,
            why_untraced: self.why_untraced.clone(),
            episodes: self.episodes,
            episode_pages_stolen: self.episode_stolen,
            last_said: self.last_said.clone(),
            ..MachineReclaim::default()
        }
    }
}

/// The log's line for an episode.
fn sentence(
    e: &Episode,
    at: Instant,
    now: &Snapshot,
    why_untraced: Option<&str>,
    s: &Streams,
) -> String {
    let page = ubio::sys::page_size();
    let zones: Vec<String> = now
        .zones
        .iter()
        .filter(|z| z.managed > 0)
        .map(|z| {
            format!(
                "{} {} (high {})",
                z.name,
                human(z.free * page),
                human(z.high * page)
            )
        })
        .collect();
    let mut out = format!(
        "kswapd reclaimed {} pages ({}) in {:.0} s while every zone's free memory was above its high watermark ({})",
        e.stolen,
        human(e.stolen * page),
        at.duration_since(e.began).as_secs_f64().max(1.0),
        zones.join(", ")
    );
    match why_untraced {
        None => out.push_str(&format!(
            ", and {} of its {} wakes asked for order {HIGH_ORDER} or more: high-order allocations \
             (such as the 2 MiB readahead folios of a program in scope) that find no free block \
             of their size make the kernel reclaim other processes' pages",
            e.wakes_high, e.wakes
        )),
        Some(why) => out.push_str(&format!(
            ": not for the watermarks, so likely for high-order allocations (such as the 2 MiB \
             readahead folios of a program in scope), taking other processes' pages \
             (kswapd's wakes by order are not traced: {why})"
        )),
    }
    let within = if s.largest <= s.largest_window {
        "within"
    } else {
        "beyond"
    };
    match s.files {
        0 => out.push_str("; the daemon manages no file now"),
        1 => out.push_str(&format!(
            "; the daemon's one stream holds {} of its own pages now ({within} its window of {})",
            human(s.own_cached),
            human(s.largest_window)
        )),
        n => out.push_str(&format!(
            "; the daemon's {n} streams hold {} of their own pages now, {} at most in one file ({within} its window of {})",
            human(s.own_cached),
            human(s.largest),
            human(s.largest_window)
        )),
    }
    out
}

/// kswapd's wakes by order, counted in a trace instance of the daemon's.
struct WakeTrace {
    instance: Instance,
    wakes: BTreeMap<u32, u64>,
}

/// The event, below a tracefs root's `events/`.
const WAKE_EVENT: &str = "vmscan/mm_vmscan_kswapd_wake";
/// The instances' names: this prefix, the daemon's pid and a count.
const WAKE_PREFIX: &str = "ubio-policy-";
/// The ring buffer per CPU: a wake is about 40 bytes, so some 1,600 wakes
/// a second per CPU between two reads (the daemon reads every second;
/// the busiest traced run woke kswapd 955 times in 16 s).
const WAKE_BUFFER_KB: u32 = 64;

impl WakeTrace {
    /// The instance in the system's tracefs, or why not (one line).
    fn start(notes: &mut Vec<String>) -> Result<WakeTrace, String> {
        let root = tracefs::system_root()?;
        let instance = Instance::create(&root, WAKE_PREFIX, WAKE_EVENT, WAKE_BUFFER_KB, notes)?;
        Ok(WakeTrace {
            instance,
            wakes: BTreeMap::new(),
        })
    }

    /// The wakes since the start, by order, with what was traced since
    /// the last call.
    fn wakes(&mut self) -> std::io::Result<&BTreeMap<u32, u64>> {
        let wakes = &mut self.wakes;
        self.instance.read_lines(|line| {
            if let Some(order) = wake_order(line) {
                *wakes.entry(order).or_default() += 1;
            }
        })?;
        Ok(&self.wakes)
    }
}

/// The order of a `mm_vmscan_kswapd_wake` line of trace_pipe
/// (`kswapd0-90 [001] d..1. 1234.5: mm_vmscan_kswapd_wake: nid=0 order=9`:
/// the event's print fmt is "nid=%d order=%d"), None for any other line,
/// a line written to trace_marker that looks like one too (the event's
/// name must follow the timestamp).
pub fn wake_order(line: &str) -> Option<u32> {
    let (head, fields) = line.split_once(": mm_vmscan_kswapd_wake: ")?;
    let stamp = head.rsplit(' ').next()?;
    if stamp.is_empty() || !stamp.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    fields
        .split_whitespace()
        .find_map(|f| f.strip_prefix("order="))?
        .parse()
        .ok()
}

/// The reading side: /proc/vmstat, /proc/zoneinfo and, where it could be
/// made, the trace instance; and the judgement over what they say.
pub struct Machine {
    trace: Option<WakeTrace>,
    watch: Watch,
    /// Why the first reading of /proc failed, if it did.
    unreadable: Option<String>,
    next: Instant,
}

impl Machine {
    /// Read the counters once (the figures count from here) and make the
    /// trace instance, or note why not. `notes` gets lines for the log.
    pub fn start(notes: &mut Vec<String>) -> Machine {
        let (trace, why_untraced) = match WakeTrace::start(notes) {
            Ok(t) => {
                notes.push(format!(
                    "kswapd's wakes are counted in the trace instance {}",
                    t.instance.dir().display()
                ));
                (Some(t), None)
            }
            Err(why) => {
                notes.push(format!("kswapd's wakes by order are not counted: {why}"));
                (None, Some(why))
            }
        };
        let mut m = Machine {
            trace,
            watch: Watch::new(Snapshot::default(), Instant::now(), why_untraced),
            unreadable: None,
            next: Instant::now() + TICK,
        };
        let first = m.snapshot();
        if let Some(why) = &m.unreadable {
            notes.push(format!("the machine's reclaim is not counted: {why}"));
        }
        m.watch = Watch::new(first, Instant::now(), m.watch.why_untraced.take());
        m
    }

    /// The counters now (the trace drained).
    fn snapshot(&mut self) -> Snapshot {
        let read = |p: &str| procfs::read(p).map_err(|e| e.to_string());
        let (vmstat, zones) = match (read("/proc/vmstat"), read("/proc/zoneinfo")) {
            (Ok(v), Ok(z)) => (parse_vmstat(&v), parse_zoneinfo(&z)),
            (Err(e), _) | (_, Err(e)) => {
                self.unreadable = Some(e);
                Default::default()
            }
        };
        let wakes = match self.trace.as_mut().map(|t| t.wakes().cloned()) {
            None => None,
            Some(Ok(w)) => Some(w),
            Some(Err(e)) => {
                // Stop tracing (the instance is removed) and say why.
                self.trace = None;
                self.watch.why_untraced = Some(e.to_string());
                None
            }
        };
        Snapshot {
            vmstat,
            zones,
            wakes,
        }
    }

    /// How long until the next look is due.
    pub fn due_in(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Look if due: the line for the log, if one is to be said.
    pub fn tick(&mut self, streams: impl FnOnce() -> Streams) -> Option<String> {
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        self.next = now + TICK;
        self.look(streams)
    }

    /// Look now (a status is asked, or the daemon stops).
    pub fn look(&mut self, streams: impl FnOnce() -> Streams) -> Option<String> {
        let snap = self.snapshot();
        self.watch.look(snap, Instant::now(), streams)
    }

    /// The figures since start, as of the last look.
    pub fn figures(&self) -> MachineReclaim {
        let mut f = self.watch.figures();
        f.unreadable = self.unreadable.clone();
        if let Some(t) = &self.trace {
            f.trace_instance = Some(t.instance.dir().display().to_string());
            f.trace_lost = t.instance.lost();
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_lines_give_their_order_and_others_nothing() {
        let l = "         kswapd0-90      [001] d..1.  1234.567890: mm_vmscan_kswapd_wake: nid=0 order=9";
        assert_eq!(wake_order(l), Some(9));
        assert_eq!(
            wake_order("kswapd0-90 [000] ..... 5.0: mm_vmscan_kswapd_wake: nid=1 zid=2 order=0"),
            Some(0)
        );
        assert_eq!(
            wake_order(
                "tar-7 [001] ..... 5.0: mm_vmscan_wakeup_kswapd: nid=0 order=9 gfp_flags=GFP_NOFS"
            ),
            None
        );
        assert_eq!(wake_order("CPU:1 [LOST 12 EVENTS]"), None);
        assert_eq!(
            wake_order(
                "sh-5 [000] ..... 9.1: tracing_mark_write: mm_vmscan_kswapd_wake: nid=0 order=9"
            ),
            None,
            "a marker is no wake"
        );
        assert_eq!(wake_order(""), None);
    }

    /// The event's print format on this kernel is what [`wake_order`]
    /// reads (where tracefs can be read).
    #[test]
    fn this_kernels_event_prints_what_wake_order_reads() {
        let name = "this_kernels_event_prints_what_wake_order_reads";
        let _mounted = match ubio_testenv::tracefs::system() {
            Ok(m) => m,
            Err(e) => return ubio_testenv::skip(name, &format!("no tracefs: {e}")),
        };
        let root = match tracefs::system_root() {
            Ok(r) => r,
            Err(e) => return ubio_testenv::skip(name, &e),
        };
        let format = root.join("events").join(WAKE_EVENT).join("format");
        let Ok(text) = std::fs::read_to_string(&format) else {
            return ubio_testenv::skip(name, &format!("no {}", format.display()));
        };
        assert!(text.contains("print fmt: \"nid=%d order=%d\""), "{text}");
    }

    const ZONEINFO: &str = "\
Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 1
  pages free     3840
        boost    0
        min      10
        low      13
        high     16
        spanned  4095
        present  3998
        managed  3840
        cma      0
        protection: (0, 2988, 23939, 23939, 23939)
  pagesets
    cpu: 0
              count:    0
              high:     0
Node 0, zone   Normal
  pages free     300000
        boost    0
        min      14769
        low      20163
        high     25557
        managed  5394266
  pagesets
    cpu: 0
              count:    12
              high:     10081
Node 0, zone  Movable
  pages free     0
        min      0
        low      0
        high     0
        managed  0
";

    #[test]
    fn zoneinfo_gives_each_zones_free_pages_and_high_watermark() {
        let z = parse_zoneinfo(ZONEINFO);
        assert_eq!(z.len(), 3);
        assert_eq!(
            z[1],
            Zone {
                name: "Normal".into(),
                free: 300000,
                high: 25557,
                managed: 5394266
            }
        );
        // The per-CPU lists' "high:" is not the watermark.
        assert_eq!(z[0].high, 16);
        let other =
            parse_zoneinfo("Node 1, zone   Normal\n  pages free     5\n        high     3\n");
        assert_eq!(other[0].name, "Normal (node 1)");
    }

    #[test]
    fn vmstat_gives_the_counters_this_kernel_has() {
        let v = parse_vmstat(
            "nr_free_pages 5\npgscan_kswapd 10\npgsteal_kswapd 7\ncompact_stall 2\npgsteal_khugepaged 4\n",
        );
        assert_eq!(v.len(), 3);
        assert_eq!(v["pgsteal_kswapd"], 7);
        assert!(
            !v.contains_key("pgscan_direct"),
            "a counter the kernel lacks is left out"
        );
    }

    /// A machine whose Normal zone has `free` pages (high 25557), kswapd
    /// having stolen `stolen` pages and woken `wakes` times by order.
    fn snap(free: u64, stolen: u64, wakes: &[(u32, u64)]) -> Snapshot {
        let mut zones = parse_zoneinfo(ZONEINFO);
        zones[1].free = free;
        Snapshot {
            vmstat: [("pgsteal_kswapd", stolen), ("pgscan_kswapd", stolen * 2)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            zones,
            wakes: Some(wakes.iter().copied().collect()),
        }
    }

    fn streams() -> Streams {
        Streams {
            files: 2,
            own_cached: 20 << 20,
            largest: 12 << 20,
            largest_window: 16 << 20,
        }
    }

    const FREE: u64 = 300_000;

    #[test]
    fn a_quiet_machine_gives_no_line_and_the_figures_are_deltas() {
        let t = Instant::now();
        let mut w = Watch::new(snap(FREE, 1000, &[(0, 5)]), t, None);
        for i in 1..5 {
            let line = w.look(snap(FREE, 1000, &[(0, 5)]), t + TICK * i, || unreachable!());
            assert_eq!(line, None);
        }
        let f = w.figures();
        assert_eq!(f.counters["pgsteal_kswapd"], 0);
        assert_eq!(f.kswapd_wakes, Some(BTreeMap::from([(0, 0)])));
        assert_eq!(f.episodes, 0);
        assert_eq!(f.since_s, 4.0);
    }

    #[test]
    fn high_order_wakes_above_the_watermarks_are_said_once_per_episode() {
        let t = Instant::now();
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        let line = w
            .look(snap(FREE, 29503, &[(9, 89), (0, 3)]), t + TICK, streams)
            .expect("an episode is said");
        for part in [
            "kswapd reclaimed 29503 pages",
            "89 of its 92 wakes asked for order 4 or more",
            "readahead folios of a program in scope",
            "Normal",
            "2 streams hold 20.0 MiB of their own pages now, 12.0 MiB at most in one file (within its window of 16.0 MiB)",
        ] {
            assert!(line.contains(part), "{part:?} not in {line:?}");
        }
        // The same episode goes on: nothing more.
        let more = w.look(
            snap(FREE, 40000, &[(9, 120), (0, 3)]),
            t + TICK * 2,
            || unreachable!(),
        );
        assert_eq!(more, None);
        let f = w.figures();
        assert_eq!((f.episodes, f.episode_pages_stolen), (1, 40000));
        assert_eq!(f.kswapd_wakes_high_order, Some(120));
        assert_eq!(f.counters["pgscan_kswapd"], 80000);
        assert_eq!(f.last_said.as_deref(), Some(line.as_str()));
    }

    #[test]
    fn a_new_episode_within_a_minute_is_said_once_the_minute_is_over() {
        let t = Instant::now();
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        let mut at = t + TICK;
        assert!(w.look(snap(FREE, 100, &[(9, 1)]), at, streams).is_some());
        // Quiet long enough to end the episode.
        for _ in 0..QUIET_LOOKS {
            at += TICK;
            assert_eq!(
                w.look(snap(FREE, 100, &[(9, 1)]), at, || unreachable!()),
                None
            );
        }
        // A second episode 12 s after the first line: not yet.
        at += TICK;
        assert_eq!(
            w.look(snap(FREE, 200, &[(9, 2)]), at, || unreachable!()),
            None
        );
        assert_eq!(w.figures().episodes, 2);
        // It lasts: said once the minute since the last line is over.
        let mut n = 200;
        let mut said = Vec::new();
        while at < t + TICK + SAY_EVERY * 2 {
            at += TICK;
            n += 100;
            if w.look(snap(FREE, n, &[(9, n / 100)]), at, streams)
                .is_some()
            {
                said.push(at - t);
            }
        }
        assert_eq!(
            said,
            vec![TICK + SAY_EVERY],
            "once, a minute after the first"
        );
    }

    #[test]
    fn order_0_wakes_or_free_memory_at_the_watermark_are_no_episode() {
        let t = Instant::now();
        // kswapd's ordinary work: woken at order 0, free memory low.
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        assert_eq!(
            w.look(
                snap(FREE, 5000, &[(0, 10), (9, 2)]),
                t + TICK,
                || unreachable!()
            ),
            None
        );
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        assert_eq!(
            w.look(snap(25557, 5000, &[(9, 10)]), t + TICK, || unreachable!()),
            None
        );
        // Free memory at the watermark at the start of the interval only.
        let mut w = Watch::new(snap(20000, 0, &[]), t, None);
        assert_eq!(
            w.look(snap(FREE, 5000, &[(9, 10)]), t + TICK, || unreachable!()),
            None
        );
        // Nothing reclaimed: high-order wakes alone are no episode.
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        assert_eq!(
            w.look(snap(FREE, 0, &[(9, 10)]), t + TICK, || unreachable!()),
            None
        );
        assert_eq!(w.figures().episodes, 0);
    }

    #[test]
    fn without_the_trace_the_line_says_the_orders_are_not_known_and_why() {
        let t = Instant::now();
        let untraced = |s: Snapshot| Snapshot { wakes: None, ..s };
        let why = "tracefs is not mounted";
        let mut w = Watch::new(untraced(snap(FREE, 0, &[])), t, Some(why.into()));
        let line = w
            .look(untraced(snap(FREE, 700, &[])), t + TICK, Streams::default)
            .unwrap();
        assert!(
            line.contains("not traced: tracefs is not mounted"),
            "{line}"
        );
        assert!(line.contains("manages no file now"), "{line}");
        let f = w.figures();
        assert_eq!(
            (f.kswapd_wakes, f.why_untraced.as_deref()),
            (None, Some(why))
        );
    }

    #[test]
    fn a_stream_beyond_its_window_is_named_so() {
        let t = Instant::now();
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        let big = Streams {
            largest: 40 << 20,
            ..streams()
        };
        let line = w.look(snap(FREE, 10, &[(9, 1)]), t + TICK, || big).unwrap();
        assert!(line.contains("beyond its window of 16.0 MiB"), "{line}");
        let mut w = Watch::new(snap(FREE, 0, &[]), t, None);
        let one = Streams {
            files: 1,
            own_cached: 12 << 20,
            largest: 12 << 20,
            largest_window: 16 << 20,
        };
        let line = w.look(snap(FREE, 10, &[(9, 1)]), t + TICK, || one).unwrap();
        assert!(
            line.ends_with("the daemon's one stream holds 12.0 MiB of its own pages now (within its window of 16.0 MiB)"),
            "{line}"
        );
    }
}
