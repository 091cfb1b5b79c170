//! From samples to figures: [`summarize_run`] condenses one run,
//! [`summarize_modes`] condenses every mode of a report over its rounds.
//!
//! Both are pure functions of what the report holds, so the exporters and
//! `ubio bench compare` can recompute them from the JSON alone.
//!
//! Units: MB and GB are 10^6 and 10^9 bytes; pages are the kernel's
//! counters (4 KiB on x86-64). A run that moved no bytes has 0 for its
//! per-GB figures (JSON cannot carry infinity, and nothing was moved to
//! charge the cost to).

use super::mode::{Backable, BenchMode, Tool, WorkloadKind};
use super::schema::{ModeSummary, Report, Run, RunSummary, Sample, VictimEffect};
use crate::stats::{self, Summary};

const MB: f64 = 1e6;
const GB: f64 = 1e9;

/// What the engine knows about one finished run besides its samples.
///
/// The engine calls, once a run has ended (also a failed one):
///
/// ```ignore
/// let summary = summarize_run(&RunInput {
///     samples: &samples,
///     bytes,                          // moved, counted once
///     secs,                           // first request .. last (writes: .. fsync returned)
///     time_to_durable_secs,           // writes: Some(first write .. fsync returned); reads: None
///     final_dataset_cached_bytes,     // cachestat after the run (writes: after fsync + close), or None
///     victim_solo_ops_per_s: report.victim_solo.as_ref().map(|v| v.ops_per_s.median),
///     fast_peaks: None,
/// });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RunInput<'a> {
    /// One per interval, in order; the last may be shorter.
    pub samples: &'a [Sample],
    /// Bytes moved (read, written, or copied: counted once).
    pub bytes: u64,
    /// The run's length (to durability for writes).
    pub secs: f64,
    /// Writes: from the first write to fsync returning. Reads: None.
    pub time_to_durable_secs: Option<f64>,
    /// The dataset's page cache measured after the run; None: take the last
    /// sample's.
    pub final_dataset_cached_bytes: Option<u64>,
    /// The victim's solo median reads per second, for the % of solo.
    pub victim_solo_ops_per_s: Option<f64>,
    /// Peaks of the dataset's page cache and dirty + writeback seen by a
    /// sampler faster than the per-second samples (which see levels only at
    /// each second's end); None: the samples' highest.
    pub fast_peaks: Option<FastPeaks>,
    /// Memory handed back to the host during the run (free page
    /// reporting), if the kernel counts it.
    pub reported_to_host_bytes: Option<u64>,
}

impl RunInput<'static> {
    /// A run that moved nothing (it failed before its first byte).
    pub const NOTHING_MOVED: RunInput<'static> = RunInput {
        samples: &[],
        bytes: 0,
        secs: 0.0,
        time_to_durable_secs: None,
        final_dataset_cached_bytes: None,
        victim_solo_ops_per_s: None,
        fast_peaks: None,
        reported_to_host_bytes: None,
    };
}

/// Dataset peaks from a fast sampler, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastPeaks {
    pub cached_bytes: u64,
    /// None where the sampler cannot tell dirty pages (no cachestat).
    pub dirty_writeback_bytes: Option<u64>,
}

/// The figures of one run (see [`RunSummary`] for each field's meaning).
///
/// - `mb_per_s`: `bytes / secs`.
/// - `per_second_mb_per_s`: over the samples' `mb_per_s`, leaving out the
///   last sample when it is a short tail (under 90 % of the median
///   interval) and there are others: a 0.1 s tail is noise, not a rate.
/// - CPU, reclaim and kswapd CPU: sums of the samples' interval counters;
///   reclaim per GB is pgsteal (kswapd + direct) plus the cgroup limit's
///   reclaim, pgscan (kswapd + direct).
/// - Footprints: the highest sample (the final figure and the fast
///   sampler's peaks count too).
/// - Victim: median and worst (lowest) of the per-second reads, and both
///   as % of the solo median.
pub fn summarize_run(input: &RunInput) -> RunSummary {
    let samples = input.samples;
    let gb = input.bytes as f64 / GB;
    let per_gb = |x: f64| if gb > 0.0 { x / gb } else { 0.0 };
    let sum_u64 = |f: fn(&Sample) -> u64| samples.iter().map(f).sum::<u64>() as f64;
    let sum_f64 = |f: fn(&Sample) -> f64| samples.iter().map(f).sum::<f64>();

    let cpu_user_secs = sum_f64(|s| s.cpu_user_secs);
    let cpu_sys_secs = sum_f64(|s| s.cpu_sys_secs);
    let limit_reclaimed = sum_u64(|s| s.memcg_limit_reclaimed_pages.unwrap_or(0));
    let reclaimed = sum_u64(|s| s.pgsteal_kswapd + s.pgsteal_direct) + limit_reclaimed;
    let scanned = sum_u64(|s| s.pgscan_kswapd + s.pgscan_direct);
    let direct_reclaimed = sum_u64(|s| s.pgsteal_direct) + limit_reclaimed;

    let last_cached = samples.last().map_or(0, |s| s.dataset_cached_bytes);
    let final_cached = input.final_dataset_cached_bytes.unwrap_or(last_cached);
    let fast = input.fast_peaks.unwrap_or_default();
    let peak_cached = samples
        .iter()
        .map(|s| s.dataset_cached_bytes)
        .chain([final_cached, fast.cached_bytes])
        .max()
        .unwrap_or(0);

    RunSummary {
        mb_per_s: if input.secs > 0.0 {
            input.bytes as f64 / MB / input.secs
        } else {
            0.0
        },
        per_second_mb_per_s: Summary::of(&steady_rates(samples)),
        cpu_user_secs,
        cpu_sys_secs,
        cpu_secs_per_gb: per_gb(cpu_user_secs + cpu_sys_secs),
        cpu_sys_secs_per_gb: per_gb(cpu_sys_secs),
        reported_to_host_bytes: input.reported_to_host_bytes,
        reclaimed_pages_per_gb: per_gb(reclaimed),
        scanned_pages_per_gb: per_gb(scanned),
        direct_reclaimed_pages_per_gb: per_gb(direct_reclaimed),
        kswapd_cpu_secs: sum_f64(|s| s.kswapd_cpu_secs),
        peak_dataset_cached_bytes: peak_cached,
        final_dataset_cached_bytes: final_cached,
        peak_dataset_dirty_writeback_bytes: samples
            .iter()
            .filter_map(|s| Some(s.dataset_dirty_bytes? + s.dataset_writeback_bytes?))
            .chain(fast.dirty_writeback_bytes)
            .max(),
        time_to_durable_secs: input.time_to_durable_secs,
        victim: victim_effect(
            samples.iter().filter_map(|s| s.victim_ops_per_s),
            input.victim_solo_ops_per_s,
        ),
    }
}

/// The per-second throughputs worth summarising: all but a short last
/// interval (when there are others).
fn steady_rates(samples: &[Sample]) -> Vec<f64> {
    let intervals: Vec<f64> = samples.iter().map(|s| s.interval_secs).collect();
    let typical = stats::median(&intervals).unwrap_or(0.0);
    let short_tail = samples.len() > 1
        && samples
            .last()
            .is_some_and(|s| s.interval_secs < 0.9 * typical);
    let keep = if short_tail {
        samples.len() - 1
    } else {
        samples.len()
    };
    samples[..keep].iter().map(|s| s.mb_per_s).collect()
}

/// Median and worst of the victim's per-second reads; None without any.
fn victim_effect(ops: impl Iterator<Item = f64>, solo: Option<f64>) -> Option<VictimEffect> {
    let ops: Vec<f64> = ops.collect();
    let median = stats::median(&ops)?;
    let worst = stats::min(&ops)?;
    let pct = |x: f64| solo.filter(|s| *s > 0.0).map(|s| 100.0 * x / s);
    Some(VictimEffect {
        median_ops_per_s: median,
        worst_ops_per_s: worst,
        median_pct_of_solo: pct(median),
        worst_pct_of_solo: pct(worst),
    })
}

/// The baseline that `speed_vs_baseline` divides by: for copies `cp` when
/// it ran, else `buffered`; for others `buffered`, else `cat`.
pub fn baseline_mode(report: &Report) -> Option<BenchMode> {
    let present = |m: &BenchMode| report.config.modes.contains(m);
    let candidates = if report.config.workload.kind == WorkloadKind::Copy {
        [BenchMode::Tool(Tool::Cp), BenchMode::Buffered]
    } else {
        [BenchMode::Buffered, BenchMode::Tool(Tool::Cat)]
    };
    candidates.into_iter().find(present)
}

/// The baseline's backed twin ("cp+backed"), if it ran: what
/// `speed_vs_backed_baseline` divides by.
pub fn backed_baseline_mode(report: &Report) -> Option<BenchMode> {
    let twin = BenchMode::Backed(Backable::of(baseline_mode(report)?)?);
    report.config.modes.contains(&twin).then_some(twin)
}

/// The modes of a report in order: `config.modes`, then any mode that has
/// runs but is not listed there.
pub fn modes_in_order(report: &Report) -> Vec<BenchMode> {
    let mut modes = report.config.modes.clone();
    for run in &report.runs {
        if !modes.contains(&run.mode) {
            modes.push(run.mode);
        }
    }
    modes
}

/// The runs of `mode` that did not fail.
pub fn ok_runs(report: &Report, mode: BenchMode) -> impl Iterator<Item = &Run> {
    report
        .runs
        .iter()
        .filter(move |r| r.mode == mode && r.error.is_none())
}

/// One [`ModeSummary`] per mode (in [`modes_in_order`]), over the runs that
/// did not fail:
///
/// - distributions (median, min, max, stddev, n) of each run's whole-run
///   throughput, CPU s/GB, reclaimed pages/GB, kswapd CPU and time to
///   durability;
/// - footprints: the highest of the runs (peak, final, dirty + writeback);
/// - `speed_vs_baseline`: the mode's median throughput over the
///   [`baseline_mode`]'s;
/// - victim: over all the per-second victim samples of the mode's runs
///   together, against `report.victim_solo`'s median.
pub fn summarize_modes(report: &Report) -> Vec<ModeSummary> {
    let solo = report.victim_solo.as_ref().map(|v| v.ops_per_s.median);
    let median_speed = |mode: Option<BenchMode>| {
        mode.and_then(|mode| {
            let v: Vec<f64> = ok_runs(report, mode).map(|r| r.summary.mb_per_s).collect();
            stats::median(&v)
        })
        .filter(|b| *b > 0.0)
    };
    let baseline_speed = median_speed(baseline_mode(report));
    let backed_speed = median_speed(backed_baseline_mode(report));

    modes_in_order(report)
        .into_iter()
        .map(|mode| {
            let ok: Vec<&Run> = ok_runs(report, mode).collect();
            let of = |f: fn(&RunSummary) -> f64| {
                Summary::of(&ok.iter().map(|r| f(&r.summary)).collect::<Vec<_>>())
            };
            let highest =
                |f: fn(&RunSummary) -> u64| ok.iter().map(|r| f(&r.summary)).max().unwrap_or(0);
            let durable: Vec<f64> = ok
                .iter()
                .filter_map(|r| r.summary.time_to_durable_secs)
                .collect();
            let mb_per_s = of(|s| s.mb_per_s);
            ModeSummary {
                mode,
                backend: most_common_backend(report, mode),
                runs_ok: ok.len() as u32,
                runs_failed: report
                    .runs
                    .iter()
                    .filter(|r| r.mode == mode && r.error.is_some())
                    .count() as u32,
                mb_per_s,
                speed_vs_baseline: mb_per_s.zip(baseline_speed).map(|(m, b)| m.median / b),
                speed_vs_backed_baseline: mb_per_s.zip(backed_speed).map(|(m, b)| m.median / b),
                cpu_secs_per_gb: of(|s| s.cpu_secs_per_gb),
                cpu_sys_secs_per_gb: of(|s| s.cpu_sys_secs_per_gb),
                reported_to_host_bytes: Summary::of(
                    &ok.iter()
                        .filter_map(|r| r.summary.reported_to_host_bytes)
                        .map(|b| b as f64)
                        .collect::<Vec<_>>(),
                ),
                reclaimed_pages_per_gb: of(|s| s.reclaimed_pages_per_gb),
                kswapd_cpu_secs: of(|s| s.kswapd_cpu_secs),
                peak_dataset_cached_bytes: highest(|s| s.peak_dataset_cached_bytes),
                final_dataset_cached_bytes: highest(|s| s.final_dataset_cached_bytes),
                peak_dataset_dirty_writeback_bytes: ok
                    .iter()
                    .filter_map(|r| r.summary.peak_dataset_dirty_writeback_bytes)
                    .max(),
                time_to_durable_secs: Summary::of(&durable),
                victim: victim_effect(
                    ok.iter()
                        .flat_map(|r| r.samples.iter().filter_map(|s| s.victim_ops_per_s)),
                    solo,
                ),
            }
        })
        .collect()
}

/// The backend most of the mode's runs used (ok runs first; ties: the
/// first seen); "" when it never ran.
fn most_common_backend(report: &Report, mode: BenchMode) -> String {
    let mut runs: Vec<&Run> = ok_runs(report, mode).collect();
    if runs.is_empty() {
        runs = report.runs.iter().filter(|r| r.mode == mode).collect();
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for r in runs {
        match counts.iter_mut().find(|(b, _)| *b == r.backend) {
            Some((_, n)) => *n += 1,
            None => counts.push((&r.backend, 1)),
        }
    }
    // max_by_key keeps the last of equals; reverse so the first seen wins.
    counts
        .into_iter()
        .rev()
        .max_by_key(|(_, n)| *n)
        .map(|(b, _)| b.to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_secs: f64, interval_secs: f64, bytes: u64) -> Sample {
        Sample::moved(t_secs, interval_secs, bytes)
    }

    /// Three samples: 100, 200 and a 0.25 s tail of 10 MB (40 MB/s), 310 MB
    /// in 2.5 s; figures worked out by hand.
    fn small_run() -> Vec<Sample> {
        let mut s = vec![
            sample(1.0, 1.0, 100_000_000),
            sample(2.0, 1.0, 200_000_000),
            sample(2.25, 0.25, 10_000_000),
        ];
        for (i, x) in s.iter_mut().enumerate() {
            x.cpu_user_secs = 0.1;
            x.cpu_sys_secs = 0.2 * (i + 1) as f64; // 0.2 + 0.4 + 0.6
            x.pgsteal_kswapd = 1000;
            x.pgsteal_direct = 10 * i as u64; // 0 + 10 + 20
            x.pgscan_kswapd = 2000;
            x.kswapd_cpu_secs = 0.05;
            x.dataset_cached_bytes = [50, 80, 60][i] << 20;
            x.dataset_dirty_bytes = Some([4, 8, 0][i] << 20);
            x.dataset_writeback_bytes = Some([4, 2, 12][i] << 20);
            x.victim_ops_per_s = Some([900.0, 300.0, 600.0][i]);
        }
        s
    }

    #[test]
    fn run_figures_by_hand() {
        let samples = small_run();
        let s = summarize_run(&RunInput {
            samples: &samples,
            bytes: 310_000_000,
            secs: 2.5,
            time_to_durable_secs: Some(2.5),
            final_dataset_cached_bytes: Some(1 << 20),
            victim_solo_ops_per_s: Some(1200.0),
            fast_peaks: None,
            reported_to_host_bytes: Some(3 << 20),
        });
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(s.mb_per_s, 124.0), "{}", s.mb_per_s);
        // The 0.25 s tail is left out: 100 and 200.
        let ps = s.per_second_mb_per_s.unwrap();
        assert_eq!((ps.n, ps.median, ps.min, ps.max), (2, 150.0, 100.0, 200.0));
        assert!(close(s.cpu_user_secs, 0.3) && close(s.cpu_sys_secs, 1.2));
        // 1.5 CPU s over 0.31 GB.
        assert!(close(s.cpu_secs_per_gb, 1.5 / 0.31));
        assert!(close(s.cpu_sys_secs_per_gb, 1.2 / 0.31));
        assert_eq!(s.reported_to_host_bytes, Some(3 << 20));
        assert!(close(s.reclaimed_pages_per_gb, 3030.0 / 0.31));
        assert!(close(s.scanned_pages_per_gb, 6000.0 / 0.31));
        assert!(close(s.direct_reclaimed_pages_per_gb, 30.0 / 0.31));
        assert!(close(s.kswapd_cpu_secs, 0.15));
        assert_eq!(s.peak_dataset_cached_bytes, 80 << 20);
        assert_eq!(s.final_dataset_cached_bytes, 1 << 20);
        assert_eq!(s.peak_dataset_dirty_writeback_bytes, Some(12 << 20));
        assert_eq!(s.time_to_durable_secs, Some(2.5));
        let v = s.victim.unwrap();
        assert_eq!((v.median_ops_per_s, v.worst_ops_per_s), (600.0, 300.0));
        assert_eq!(v.median_pct_of_solo, Some(50.0));
        assert_eq!(v.worst_pct_of_solo, Some(25.0));
    }

    #[test]
    fn a_single_short_sample_still_counts() {
        let samples = [sample(0.5, 0.5, 50_000_000)];
        let s = summarize_run(&RunInput {
            samples: &samples,
            bytes: 50_000_000,
            secs: 0.5,
            time_to_durable_secs: None,
            final_dataset_cached_bytes: None,
            victim_solo_ops_per_s: None,
            fast_peaks: None,
            reported_to_host_bytes: None,
        });
        assert_eq!(s.per_second_mb_per_s.unwrap().median, 100.0);
        assert!(s.victim.is_none());
    }

    #[test]
    fn a_fast_samplers_peaks_count_when_higher() {
        let samples = [sample(1.0, 1.0, 50_000_000)];
        let input = |fast| RunInput {
            samples: &samples,
            bytes: 50_000_000,
            secs: 1.0,
            time_to_durable_secs: None,
            final_dataset_cached_bytes: Some(0),
            victim_solo_ops_per_s: None,
            fast_peaks: Some(fast),
            reported_to_host_bytes: None,
        };
        let high = FastPeaks {
            cached_bytes: 1 << 30,
            dirty_writeback_bytes: Some(1 << 29),
        };
        let s = summarize_run(&input(high));
        assert_eq!(s.peak_dataset_cached_bytes, 1 << 30);
        assert_eq!(s.peak_dataset_dirty_writeback_bytes, Some(1 << 29));
        let s = summarize_run(&input(FastPeaks::default()));
        assert_eq!(s.peak_dataset_cached_bytes, samples[0].dataset_cached_bytes);
    }

    #[test]
    fn nothing_moved_gives_zeros_not_infinities() {
        let s = summarize_run(&RunInput::NOTHING_MOVED);
        assert_eq!((s.mb_per_s, s.cpu_secs_per_gb), (0.0, 0.0));
        assert!(s.per_second_mb_per_s.is_none());
        assert!(serde_json::to_string(&s).is_ok());
    }
}

#[cfg(test)]
mod mode_tests {
    use super::*;
    use crate::harness::mock;

    #[test]
    fn failed_runs_stay_out_of_the_distributions() {
        let report = mock::report(1);
        let odirect = report
            .modes
            .iter()
            .find(|m| m.mode == BenchMode::Odirect)
            .unwrap();
        assert_eq!((odirect.runs_ok, odirect.runs_failed), (2, 1));
        assert_eq!(odirect.mb_per_s.unwrap().n, 2);
        assert_eq!(odirect.backend, "O_DIRECT");
    }

    #[test]
    fn speed_is_against_buffered() {
        let report = mock::report(2);
        assert_eq!(baseline_mode(&report), Some(BenchMode::Buffered));
        let buffered = &report.modes[0];
        assert_eq!(buffered.speed_vs_baseline, Some(1.0));
        for m in &report.modes[1..] {
            let want = m.mb_per_s.unwrap().median / buffered.mb_per_s.unwrap().median;
            assert_eq!(m.speed_vs_baseline, Some(want), "{}", m.mode);
        }
    }

    #[test]
    fn beside_it_the_speed_against_the_backed_baseline() {
        let report = mock::report(2);
        let twin = BenchMode::Backed(Backable::Buffered);
        assert_eq!(backed_baseline_mode(&report), Some(twin));
        let backed = report.modes.iter().find(|m| m.mode == twin).unwrap();
        assert_eq!(backed.speed_vs_backed_baseline, Some(1.0));
        for m in &report.modes {
            let want = m.mb_per_s.unwrap().median / backed.mb_per_s.unwrap().median;
            assert_eq!(m.speed_vs_backed_baseline, Some(want), "{}", m.mode);
            assert!(m.cpu_sys_secs_per_gb.unwrap().median < m.cpu_secs_per_gb.unwrap().median);
            assert!(m.reported_to_host_bytes.is_some());
        }
        let mut no_twin = report.clone();
        no_twin.config.modes.retain(|m| *m != twin);
        assert_eq!(backed_baseline_mode(&no_twin), None);
        assert!(summarize_modes(&no_twin)
            .iter()
            .all(|m| m.speed_vs_backed_baseline.is_none()));
    }

    #[test]
    fn mode_victim_pools_every_sample_of_its_ok_runs() {
        let report = mock::report(3);
        let mode = BenchMode::Dontcache;
        let all: Vec<f64> = ok_runs(&report, mode)
            .flat_map(|r| r.samples.iter().filter_map(|s| s.victim_ops_per_s))
            .collect();
        let v = report.modes[1].victim.unwrap();
        assert_eq!(v.median_ops_per_s, stats::median(&all).unwrap());
        assert_eq!(v.worst_ops_per_s, stats::min(&all).unwrap());
        let solo = report.victim_solo.as_ref().unwrap().ops_per_s.median;
        assert_eq!(
            v.median_pct_of_solo,
            Some(100.0 * v.median_ops_per_s / solo)
        );
    }

    #[test]
    fn without_a_baseline_there_is_no_ratio() {
        let mut report = mock::report(4);
        report.config.modes.retain(|m| *m != BenchMode::Buffered);
        report.runs.retain(|r| r.mode != BenchMode::Buffered);
        assert!(summarize_modes(&report)
            .iter()
            .all(|m| m.speed_vs_baseline.is_none()));
    }
}
