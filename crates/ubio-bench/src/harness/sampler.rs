//! The per-second system sampler of a run, in the parent process.
//!
//! Every interval it reads what the machine, the memory cgroup and the
//! dataset files show, and combines it with what the workload last reported
//! (bytes moved, CPU used) into one [`Sample`]: reclaim from /proc/vmstat
//! (pgscan/pgsteal, kswapd and direct), the cgroup's memory.stat (v2 has
//! pgscan/pgsteal; v1 does not: null), the cgroup limit's reclaim (from a
//! tracepoint, [`ubio_testenv::reclaim_trace`]: vmstat leaves it out), kswapd's CPU (utime + stime of every
//! kswapd thread), /proc/meminfo's Cached, Dirty and Writeback, and
//! cachestat() summed over the dataset's files (and copies).
//!
//! The victim's reads per second are filled in after the run
//! ([`fill_victim`]), once its ticks for the whole run have arrived; the live
//! line shows the ticks that were in by then.

use super::schema::Sample;
use crate::cpu::{self, CpuTimes};
use crate::victim::Tick;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use ubio::procfs::{meminfo, vmstat};
use ubio_testenv::cgroup::{CgroupVersion, MemCgroup};
use ubio_testenv::reclaim_trace::MemcgReclaimTrace;

const MB: f64 = 1e6;

/// Counters that samples report as differences.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    pgscan_kswapd: u64,
    pgscan_direct: u64,
    pgsteal_kswapd: u64,
    pgsteal_direct: u64,
    cgroup_pgscan: Option<u64>,
    cgroup_pgsteal: Option<u64>,
    memcg_limit_reclaimed: Option<u64>,
    kswapd_cpu_secs: f64,
}

/// Samples one run; [`SystemSampler::sample`] at the end of each interval.
pub struct SystemSampler<'a> {
    cgroup: Option<&'a MemCgroup>,
    reclaim_trace: Option<&'a MemcgReclaimTrace>,
    files: Vec<PathBuf>,
    kswapd: Vec<u32>,
    start_mono_secs: f64,
    prev_t: f64,
    prev: Counters,
    prev_bytes: u64,
    prev_cpu: CpuTimes,
}

impl<'a> SystemSampler<'a> {
    /// Starts the counters at `start_mono_secs` (the run's start): `files`
    /// are the dataset files whose page cache is summed; `reclaim_trace`
    /// counts the cgroup limit's reclaim.
    pub fn start(
        cgroup: Option<&'a MemCgroup>,
        reclaim_trace: Option<&'a MemcgReclaimTrace>,
        files: Vec<PathBuf>,
        start_mono_secs: f64,
    ) -> io::Result<SystemSampler<'a>> {
        let kswapd = kswapd_pids();
        let prev = counters(cgroup, reclaim_trace, &kswapd)?;
        Ok(SystemSampler {
            cgroup,
            reclaim_trace,
            files,
            kswapd,
            start_mono_secs,
            prev_t: start_mono_secs,
            prev,
            prev_bytes: 0,
            prev_cpu: CpuTimes::default(),
        })
    }

    /// The interval from the previous sample to `t_mono_secs`, given the
    /// workload's bytes and CPU since the run's start.
    pub fn sample(&mut self, t_mono_secs: f64, bytes: u64, cpu: CpuTimes) -> io::Result<Sample> {
        let now = counters(self.cgroup, self.reclaim_trace, &self.kswapd)?;
        let (p, interval) = (self.prev, (t_mono_secs - self.prev_t).max(1e-6));
        let mem = meminfo()?;
        let (cached, dirty, writeback) = dataset_cache(&self.files);
        let cgroup_cached_bytes = self
            .cgroup
            .map(|c| c.cgroup().memory_stat())
            .transpose()?
            .map(|st| st.file);
        let moved = bytes.saturating_sub(self.prev_bytes);
        let s = Sample {
            t_secs: t_mono_secs - self.start_mono_secs,
            interval_secs: interval,
            bytes: moved,
            mb_per_s: moved as f64 / MB / interval,
            cpu_user_secs: (cpu.user_secs - self.prev_cpu.user_secs).max(0.0),
            cpu_sys_secs: (cpu.sys_secs - self.prev_cpu.sys_secs).max(0.0),
            pgscan_kswapd: now.pgscan_kswapd.saturating_sub(p.pgscan_kswapd),
            pgscan_direct: now.pgscan_direct.saturating_sub(p.pgscan_direct),
            pgsteal_kswapd: now.pgsteal_kswapd.saturating_sub(p.pgsteal_kswapd),
            pgsteal_direct: now.pgsteal_direct.saturating_sub(p.pgsteal_direct),
            cgroup_pgscan: now
                .cgroup_pgscan
                .zip(p.cgroup_pgscan)
                .map(|(a, b)| a.saturating_sub(b)),
            cgroup_pgsteal: now
                .cgroup_pgsteal
                .zip(p.cgroup_pgsteal)
                .map(|(a, b)| a.saturating_sub(b)),
            memcg_limit_reclaimed_pages: now
                .memcg_limit_reclaimed
                .zip(p.memcg_limit_reclaimed)
                .map(|(a, b)| a.saturating_sub(b)),
            kswapd_cpu_secs: (now.kswapd_cpu_secs - p.kswapd_cpu_secs).max(0.0),
            cached_bytes: mem.get("Cached").copied().unwrap_or(0),
            dirty_bytes: mem.get("Dirty").copied().unwrap_or(0),
            writeback_bytes: mem.get("Writeback").copied().unwrap_or(0),
            free_bytes: mem.get("MemFree").copied(),
            cgroup_cached_bytes,
            dataset_cached_bytes: cached,
            dataset_dirty_bytes: dirty,
            dataset_writeback_bytes: writeback,
            victim_ops_per_s: None,
        };
        self.prev = now;
        self.prev_t = t_mono_secs;
        self.prev_bytes = bytes;
        self.prev_cpu = cpu;
        Ok(s)
    }
}

fn counters(
    cgroup: Option<&MemCgroup>,
    reclaim_trace: Option<&MemcgReclaimTrace>,
    kswapd: &[u32],
) -> io::Result<Counters> {
    let vm = vmstat()?;
    let v = |k: &str| vm.get(k).copied().unwrap_or(0);
    let (cgroup_pgscan, cgroup_pgsteal) = match cgroup {
        Some(c) if c.version() == CgroupVersion::V2 => {
            let st = c.memory_stat()?;
            (st.get("pgscan").copied(), st.get("pgsteal").copied())
        }
        _ => (None, None),
    };
    Ok(Counters {
        pgscan_kswapd: v("pgscan_kswapd"),
        pgscan_direct: v("pgscan_direct"),
        pgsteal_kswapd: v("pgsteal_kswapd"),
        pgsteal_direct: v("pgsteal_direct"),
        cgroup_pgscan,
        cgroup_pgsteal,
        memcg_limit_reclaimed: reclaim_trace.map(MemcgReclaimTrace::reclaimed_pages),
        kswapd_cpu_secs: kswapd
            .iter()
            .filter_map(|&p| cpu::pid_times(p))
            .map(CpuTimes::total_secs)
            .sum(),
    })
}

/// The pids of the kswapd kernel threads (one per NUMA node).
pub fn kswapd_pids() -> Vec<u32> {
    ubio::procfs::all_pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|&pid| ubio::procfs::comm(pid).is_some_and(|c| c.starts_with("kswapd")))
        .collect()
}

/// Cached, dirty and writeback bytes of `files` (cachestat, summed; a file
/// that does not exist yet counts 0). Dirty and writeback are None where
/// the kernel cannot tell them (no cachestat: mincore counts only cached).
pub fn dataset_cache(files: &[PathBuf]) -> (u64, Option<u64>, Option<u64>) {
    let page = ubio::sys::page_size();
    let mut sum = (0, Some(0), Some(0));
    for p in files {
        let Ok(f) = File::open(p) else { continue };
        if let Ok(c) = ubio::residency::count(f.as_fd(), ubio::sys::FileRange::WHOLE) {
            sum.0 += c.cached * page;
            sum.1 = sum.1.zip(c.dirty).map(|(s, d)| s + d * page);
            sum.2 = sum.2.zip(c.writeback).map(|(s, w)| s + w * page);
        }
    }
    sum
}

/// The victim's reads per second in each sample: over the parts of its
/// ticks that overlap the sample's interval, each tick's reads prorated to
/// its overlap (`run_start_mono` is the run's start, which the samples'
/// times count from). A sample shorter than a tick (a run of 45 ms: 256 MiB
/// read at 6 GB/s) gets the rate of the tick it falls in.
pub fn fill_victim(samples: &mut [Sample], ticks: &[Tick], run_start_mono: f64) {
    for s in samples {
        let (from, to) = (
            run_start_mono + s.t_secs - s.interval_secs,
            run_start_mono + s.t_secs,
        );
        let (reads, secs) = ticks
            .iter()
            .filter(|t| t.t1 > t.t0)
            .map(|t| {
                let overlap = (t.t1.min(to) - t.t0.max(from)).max(0.0);
                (t.reads as f64 * overlap / (t.t1 - t.t0), overlap)
            })
            .fold((0.0, 0.0), |(r, d), (tr, td)| (r + tr, d + td));
        s.victim_ops_per_s = (secs > 0.0).then(|| reads / secs);
    }
}

/// The live line of a sample, like seed 000's uncached_io_test ("1s:
/// 1856MB/sec") with its pidstat and sar columns beside it:
/// `  3s: 1234 MB/s  kswapd  40%  pgscan/s k 120000 d 0  pgsteal/s k 118000 d 0  free 90M cached 1.2G
/// dirty 16M  dataset 1.0G  cpu 12%usr 80%sys  victim 5123/s`.
pub fn live_line(s: &Sample) -> String {
    let pct = |secs: f64| secs / s.interval_secs * 100.0;
    let rate = |pages: u64| pages as f64 / s.interval_secs;
    let mut line = format!(
        "{:>4.0}s: {:>6.0} MB/s  kswapd {:>3.0}%  pgscan/s k {:>7.0} d {:>7.0}  pgsteal/s k {:>7.0} d {:>7.0}  \
         free {} cached {} dirty {}  dataset {}  cpu {:>3.0}%usr {:>3.0}%sys",
        s.t_secs,
        s.mb_per_s,
        pct(s.kswapd_cpu_secs),
        rate(s.pgscan_kswapd),
        rate(s.pgscan_direct),
        rate(s.pgsteal_kswapd),
        rate(s.pgsteal_direct),
        s.free_bytes.map_or("-".into(), short_bytes),
        short_bytes(s.cached_bytes),
        short_bytes(s.dirty_bytes + s.writeback_bytes),
        short_bytes(s.dataset_cached_bytes),
        pct(s.cpu_user_secs),
        pct(s.cpu_sys_secs),
    );
    if let Some(v) = s.victim_ops_per_s {
        line.push_str(&format!("  victim {v:.0}/s"));
    }
    line
}

/// 1.2G, 16M, 512K.
pub fn short_bytes(b: u64) -> String {
    let b = b as f64;
    match b {
        _ if b >= 1e9 => format!("{:.1}G", b / (1u64 << 30) as f64),
        _ if b >= 1e6 => format!("{:.0}M", b / (1u64 << 20) as f64),
        _ => format!("{:.0}K", b / 1024.0),
    }
}

/// Adds the CPU times of two readings.
pub fn cpu(user_secs: f64, sys_secs: f64) -> CpuTimes {
    CpuTimes {
        user_secs,
        sys_secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_differences() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, vec![1u8; 1 << 20]).unwrap();
        let mut s =
            SystemSampler::start(None, None, vec![f, dir.path().join("absent")], 100.0).unwrap();
        let a = s.sample(101.0, 5_000_000, cpu(0.5, 0.25)).unwrap();
        assert_eq!(
            (a.t_secs, a.interval_secs, a.bytes, a.mb_per_s),
            (1.0, 1.0, 5_000_000, 5.0)
        );
        assert_eq!((a.cpu_user_secs, a.cpu_sys_secs), (0.5, 0.25));
        assert!(a.dataset_cached_bytes >= 1 << 20, "{a:?}");
        assert_eq!((a.cgroup_pgscan, a.cgroup_cached_bytes), (None, None));
        let b = s.sample(101.5, 6_000_000, cpu(0.75, 0.25)).unwrap();
        assert_eq!((b.t_secs, b.interval_secs, b.bytes), (1.5, 0.5, 1_000_000));
        assert_eq!(
            (b.mb_per_s, b.cpu_user_secs, b.cpu_sys_secs),
            (2.0, 0.25, 0.0)
        );
        assert!(live_line(&b).contains("2 MB/s"), "{}", live_line(&b));
    }

    #[test]
    fn victim_rates_come_from_the_ticks_inside() {
        let mut s = SystemSampler::start(None, None, Vec::new(), 10.0).unwrap();
        let mut v = vec![
            s.sample(11.0, 0, cpu(0.0, 0.0)).unwrap(),
            s.sample(12.0, 0, cpu(0.0, 0.0)).unwrap(),
        ];
        let ticks: Vec<Tick> = (0..20)
            .map(|i| Tick {
                t0: 10.0 + i as f64 * 0.1,
                t1: 10.1 + i as f64 * 0.1,
                reads: if i < 10 { 100 } else { 10 },
            })
            .collect();
        fill_victim(&mut v, &ticks, 10.0);
        assert!(
            (v[0].victim_ops_per_s.unwrap() - 1000.0).abs() < 1e-6,
            "{v:?}"
        );
        assert!((v[1].victim_ops_per_s.unwrap() - 100.0).abs() < 1e-6);
        fill_victim(&mut v, &[], 10.0);
        assert_eq!(v[0].victim_ops_per_s, None);
    }

    #[test]
    fn a_sample_shorter_than_a_tick_gets_the_rate_of_the_ticks_it_overlaps() {
        let mut s = SystemSampler::start(None, None, Vec::new(), 10.0).unwrap();
        // A run of 45 ms, from 10.055 s, inside a tick of 100 ms (whose
        // midpoint it does not hold).
        let mut v = vec![s.sample(10.1, 0, cpu(0.0, 0.0)).unwrap()];
        v[0].interval_secs = 0.045;
        let tick = |t0: f64, reads| Tick {
            t0,
            t1: t0 + 0.1,
            reads,
        };
        fill_victim(&mut v, &[tick(10.0, 50)], 10.0);
        assert!(
            (v[0].victim_ops_per_s.unwrap() - 500.0).abs() < 1e-6,
            "{v:?}"
        );
        // Across two ticks: 25 ms of one at 500/s, 20 ms of the next at 100/s.
        let mut w = vec![s.sample(10.12, 0, cpu(0.0, 0.0)).unwrap()];
        w[0].interval_secs = 0.045;
        fill_victim(&mut w, &[tick(10.0, 50), tick(10.1, 10)], 10.0);
        let want = (500.0 * 0.025 + 100.0 * 0.020) / 0.045;
        assert!(
            (w[0].victim_ops_per_s.unwrap() - want).abs() < 1e-6,
            "{w:?}"
        );
    }

    #[test]
    fn finds_kswapd() {
        assert!(!kswapd_pids().is_empty(), "no kswapd thread in /proc");
    }
}
