//! Judging a report: one place for the quantities a report holds
//! ([`Metric`]) and for the figures that compare one mode against a
//! baseline mode of the same report ([`Figure`], [`Verdict`]).
//!
//! Three readers use it: the seed suite (each seed's claim, judged as a
//! list of figures), `ubio demo` (ubio's own promise against buffered I/O
//! or cp, the same figures with the demo's thresholds) and `ubio bench
//! compare` (the same metrics between two reports, with its noise rule).
//!
//! A figure that compares an effect (kswapd's CPU, reclaim, a speed swing,
//! a page-cache or dirty peak, a disturbed victim) holds only when the
//! baseline shows that effect, at a stated threshold, and the other mode
//! removes it; when the baseline does not show it, the figure is "not
//! reproduced here" with the reason ([`Figure::not_reproduced`]): a
//! comparison of two absent effects proves nothing.

use super::mode::BenchMode;
use super::schema::{ModeSummary, Report, Run, Sample};
use super::summary::{backed_baseline_mode, ok_runs};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use ubio::size::human as human_bytes;

const MIB: u64 = 1 << 20;

// ---- the quantities ----

/// A figure a report holds per run and per mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Whole-run MB/s.
    Throughput,
    /// CPU seconds (user + system) per GB.
    CpuSecsPerGb,
    /// The dataset's highest page-cache footprint.
    PeakDatasetCache,
    /// The victim's median reads per second, as % of its solo median.
    VictimPctOfSolo,
    /// Writes: first write to fsync returning.
    TimeToDurable,
    /// The dataset's page cache left after the run (writes: after fsync).
    FinalDatasetCache,
    /// The dataset's highest dirty + writeback footprint.
    PeakDirtyWriteback,
    /// Pages reclaimed per GB moved (kswapd, direct and cgroup limit reclaim).
    ReclaimedPagesPerGb,
}

impl Metric {
    pub const ALL: [Metric; 8] = [
        Metric::Throughput,
        Metric::CpuSecsPerGb,
        Metric::PeakDatasetCache,
        Metric::VictimPctOfSolo,
        Metric::TimeToDurable,
        Metric::FinalDatasetCache,
        Metric::PeakDirtyWriteback,
        Metric::ReclaimedPagesPerGb,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput MB/s",
            Metric::CpuSecsPerGb => "CPU s/GB",
            Metric::PeakDatasetCache => "peak dataset cache MiB",
            Metric::VictimPctOfSolo => "victim median % of solo",
            Metric::TimeToDurable => "time to durable s",
            Metric::FinalDatasetCache => "dataset cache after MiB",
            Metric::PeakDirtyWriteback => "peak dirty+writeback MiB",
            Metric::ReclaimedPagesPerGb => "pages reclaimed per GB",
        }
    }

    /// Whether the value depends on how fast the machine runs (times,
    /// rates, CPU): not comparable between a machine and an emulated guest
    /// (QEMU's TCG). The others (page-cache footprints, reclaim per GB)
    /// are what the kernel does per byte, whatever the speed.
    pub fn depends_on_speed(self) -> bool {
        matches!(
            self,
            Metric::Throughput
                | Metric::CpuSecsPerGb
                | Metric::VictimPctOfSolo
                | Metric::TimeToDurable
        )
    }

    /// Whether a larger value is better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::Throughput | Metric::VictimPctOfSolo)
    }

    /// The smallest absolute difference that counts, in the metric's unit.
    pub fn floor(self) -> f64 {
        match self {
            Metric::Throughput => 0.0,
            Metric::CpuSecsPerGb => 0.01,
            Metric::PeakDatasetCache => 1.0,
            Metric::VictimPctOfSolo => 2.0,
            Metric::TimeToDurable => 0.05,
            Metric::FinalDatasetCache | Metric::PeakDirtyWriteback => 1.0,
            // 4 MB per GB.
            Metric::ReclaimedPagesPerGb => 1000.0,
        }
    }

    /// The metric's value for one run; None where it does not apply.
    pub fn of_run(self, run: &Run) -> Option<f64> {
        let s = &run.summary;
        match self {
            Metric::Throughput => Some(s.mb_per_s),
            Metric::CpuSecsPerGb => Some(s.cpu_secs_per_gb),
            Metric::PeakDatasetCache => Some(s.peak_dataset_cached_bytes as f64 / MIB as f64),
            Metric::VictimPctOfSolo => s.victim.and_then(|v| v.median_pct_of_solo),
            Metric::TimeToDurable => s.time_to_durable_secs,
            Metric::FinalDatasetCache => Some(s.final_dataset_cached_bytes as f64 / MIB as f64),
            Metric::PeakDirtyWriteback => s
                .peak_dataset_dirty_writeback_bytes
                .map(|b| b as f64 / MIB as f64),
            Metric::ReclaimedPagesPerGb => Some(s.reclaimed_pages_per_gb),
        }
    }

    /// The metric over a mode's runs (the median; the page-cache
    /// footprints are the highest), in the same unit as [`Metric::of_run`]; None where it does
    /// not apply or no run succeeded.
    pub fn of_mode(self, m: &ModeSummary) -> Option<f64> {
        if m.runs_ok == 0 {
            return None;
        }
        match self {
            Metric::Throughput => m.mb_per_s.map(|s| s.median),
            Metric::CpuSecsPerGb => m.cpu_secs_per_gb.map(|s| s.median),
            Metric::PeakDatasetCache => Some(m.peak_dataset_cached_bytes as f64 / MIB as f64),
            Metric::VictimPctOfSolo => m.victim.and_then(|v| v.median_pct_of_solo),
            Metric::TimeToDurable => m.time_to_durable_secs.map(|s| s.median),
            Metric::FinalDatasetCache => Some(m.final_dataset_cached_bytes as f64 / MIB as f64),
            Metric::PeakDirtyWriteback => m
                .peak_dataset_dirty_writeback_bytes
                .map(|b| b as f64 / MIB as f64),
            Metric::ReclaimedPagesPerGb => m.reclaimed_pages_per_gb.map(|s| s.median),
        }
    }

    /// [`Metric::of_mode`], NaN where there is none (figures print it "-").
    pub fn of(self, m: &ModeSummary) -> f64 {
        self.of_mode(m).unwrap_or(f64::NAN)
    }
}

/// The median over a mode's good runs of `f` (NaN when none gives a value).
pub fn median_over_runs(r: &Report, mode: BenchMode, f: impl Fn(&Run) -> Option<f64>) -> f64 {
    let values: Vec<f64> = ok_runs(r, mode).filter_map(f).collect();
    crate::stats::median(&values).unwrap_or(f64::NAN)
}

// ---- figures and verdicts ----

/// Whether a report shows what is claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every judged part of the claim shows here.
    Reproduced,
    /// Some parts show, others do not (the verdict says which).
    Partly,
    /// The claim does not show here.
    Not,
    /// A mode the verdict needs did not run (the report's warnings say why).
    Unmeasured,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::Partly => "partly reproduced",
            Outcome::Not => "not reproduced",
            Outcome::Unmeasured => "not measured",
        }
    }
}

/// One figure next to the claimed one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub what: String,
    /// What the claim says ("" where it gives no number). Named `seed` in
    /// suite.json, where the claims are the seeds'.
    pub seed: String,
    pub here: String,
    /// Whether this figure supports the claim: the baseline shows the
    /// effect and the other mode removes it.
    pub holds: bool,
    /// Set when the baseline does not show the effect claimed (so there is
    /// nothing for the other mode to remove): why. `holds` is then false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_reproduced: Option<String>,
}

impl Figure {
    /// A figure that compares two values without a baseline effect to show
    /// first (a speed, a CPU cost, a time).
    pub fn plain(what: String, claim: &str, here: String, holds: bool) -> Figure {
        Figure::judged(what, claim, here, Ok(()), holds)
    }

    /// A figure judged only if the baseline shows the effect
    /// (`baseline`: Ok, or Err with why not).
    pub fn judged(
        what: String,
        claim: &str,
        here: String,
        baseline: Result<(), String>,
        holds: bool,
    ) -> Figure {
        let not_reproduced = baseline.err();
        Figure {
            what,
            seed: claim.into(),
            here,
            holds: holds && not_reproduced.is_none(),
            not_reproduced,
        }
    }

    /// What the holds column of a table says: "yes", "no", or "not
    /// reproduced here: why".
    pub fn status(&self) -> String {
        self.said("yes", "no")
    }

    /// "peak page cache of the dataset: buffered vs ubio: 512 MiB vs 20 MiB (holds)".
    pub fn sentence(&self) -> String {
        format!(
            "{}: {} ({})",
            self.what,
            self.here,
            self.said("holds", "does not hold")
        )
    }

    fn said(&self, holds: &str, fails: &str) -> String {
        match (&self.not_reproduced, self.holds) {
            (Some(why), _) => format!("not reproduced here: {why}"),
            (None, true) => holds.into(),
            (None, false) => fails.into(),
        }
    }
}

/// The judgement of one claim: its figures, the outcome they make, notes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub figures: Vec<Figure>,
    /// Why, in a sentence or two, including what cannot show at this scale.
    pub notes: Vec<String>,
}

impl Verdict {
    /// Reproduced when every figure holds, not when none does, partly between.
    pub fn from_figures(figures: Vec<Figure>, notes: Vec<String>) -> Verdict {
        let held = figures.iter().filter(|f| f.holds).count();
        let outcome = match held {
            _ if figures.is_empty() => Outcome::Unmeasured,
            n if n == figures.len() => Outcome::Reproduced,
            0 => Outcome::Not,
            _ => Outcome::Partly,
        };
        Verdict {
            outcome,
            figures,
            notes,
        }
    }

    /// No figure, because these modes had no successful run.
    pub fn unmeasured(missing: &[BenchMode]) -> Verdict {
        let names: Vec<String> = missing.iter().map(BenchMode::to_string).collect();
        Verdict {
            outcome: Outcome::Unmeasured,
            figures: Vec::new(),
            notes: vec![format!(
                "no successful run of {}: see the report's warnings",
                names.join(", ")
            )],
        }
    }

    /// The figures as a Markdown table (claim, here, holds).
    pub fn figures_markdown(&self, claim_column: &str) -> String {
        let mut s = String::new();
        if self.figures.is_empty() {
            return s;
        }
        let _ = writeln!(
            s,
            "| figure | {claim_column} | here | holds |\n|---|---|---|---|"
        );
        for f in &self.figures {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                f.what,
                f.seed,
                f.here,
                f.status()
            );
        }
        s
    }

    /// The figures and notes as indented lines for a terminal.
    pub fn lines(&self, claim_label: &str) -> String {
        let mut s = String::new();
        for f in &self.figures {
            let _ = writeln!(
                s,
                "  {:<58} {claim_label}: {:<34} here: {} [{}]",
                f.what,
                f.seed,
                f.here,
                f.said("holds", "does not hold")
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        let _ = write!(s, "  => {}", self.outcome.word());
        s
    }
}

/// The summaries of `wanted`, if every one has a successful run.
pub fn modes<const N: usize>(r: &Report, wanted: [BenchMode; N]) -> Option<[&ModeSummary; N]> {
    let find = |m: BenchMode| {
        r.modes
            .iter()
            .find(|s| s.mode == m && s.runs_ok > 0 && s.mb_per_s.is_some())
    };
    let found: Vec<&ModeSummary> = wanted.iter().filter_map(|&m| find(m)).collect();
    found.try_into().ok()
}

/// The verdict when some of `wanted` did not run: which.
pub fn missing(r: &Report, wanted: &[BenchMode]) -> Verdict {
    let absent: Vec<BenchMode> = wanted
        .iter()
        .copied()
        .filter(|&m| modes(r, [m]).is_none())
        .collect();
    Verdict::unmeasured(&absent)
}

// ---- one mode against a baseline ----

/// Per-second samples a run needs before its swing (or its per-second
/// kswapd load) means anything: the seeds print 30 s of seconds.
pub const MIN_SWING_SAMPLES: usize = 10;
/// kswapd's share of a CPU over the baseline's runs below which it shows
/// no kswapd work (the seeds: 50-85% of a core, 28 cores).
pub const EFFECT_KSWAPD_PCT: f64 = 5.0;
/// Pages reclaimed per GB below which the baseline did not push the page
/// cache into reclaim (a GB is 244k pages: a full cache reclaims about that).
pub const EFFECT_RECLAIM_PER_GB: f64 = 1000.0;
/// The per-second speed's standard deviation, as a share of its median,
/// below which the baseline is steady (the seed's swing: ~150 of 1850 MB/s).
pub const EFFECT_SWING_SHARE: f64 = 0.03;
/// A page cache (or dirty memory) peak below which the baseline did not
/// fill anything worth removing.
pub const EFFECT_CACHE_BYTES: u64 = 128 * MIB;
/// The victim's worst second, in % of its solo rate, above which the
/// baseline did not disturb it.
pub const EFFECT_VICTIM_PCT: f64 = 80.0;
/// The most of the dataset an uncached mode may keep cached (or dirty):
/// the contract's window.
pub const UNCACHED_PEAK_BYTES: u64 = 64 * MIB;

/// "a vs b" with the modes' names.
fn versus(base: &ModeSummary, other: &ModeSummary) -> String {
    format!("{} vs {}", base.mode, other.mode)
}

/// Throughput: holds when `other` reaches `at_least` times the baseline's
/// (a seed's "uncached is faster" is 1.0; the demo's "about as fast", 0.8).
pub fn speed(base: &ModeSummary, other: &ModeSummary, claim: &str, at_least: f64) -> Figure {
    let (b, o) = (Metric::Throughput.of(base), Metric::Throughput.of(other));
    Figure::plain(
        format!("throughput: {} vs {}", other.mode, base.mode),
        claim,
        format!(
            "{} vs {} MB/s ({:+.0}%)",
            num(o),
            num(b),
            (o / b - 1.0) * 100.0
        ),
        o > b * at_least,
    )
}

/// CPU per GB: holds when `other` spends less.
pub fn cpu(base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    let (b, o) = (
        Metric::CpuSecsPerGb.of(base),
        Metric::CpuSecsPerGb.of(other),
    );
    Figure::plain(
        format!("CPU seconds per GB: {}", versus(base, other)),
        claim,
        format!("{} vs {} ({}x)", num(b), num(o), ratio(o, b)),
        o < b,
    )
}

/// Time to durability: holds when `other` takes at most 10% longer.
pub fn durability(base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    let (b, o) = (
        Metric::TimeToDurable.of(base),
        Metric::TimeToDurable.of(other),
    );
    Figure::plain(
        format!("time to durability: {} vs {}", other.mode, base.mode),
        claim,
        format!("{} vs {} s", num(o), num(b)),
        o <= b * 1.1,
    )
}

/// The dataset's page-cache peak: the baseline must fill at least
/// [`EFFECT_CACHE_BYTES`]; holds when `other` stays within
/// [`UNCACHED_PEAK_BYTES`] and under a quarter of the baseline's.
pub fn cache(base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    peak(
        "peak page cache of the dataset",
        "cached",
        "no page cache to keep empty",
        |m| Some(m.peak_dataset_cached_bytes),
        (base, other),
        claim,
    )
}

/// Dirty + writeback peak: as [`cache`], for the memory a writer dirties.
pub fn dirty(base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    peak(
        "dirty + writeback peak",
        "left dirty",
        "no dirty memory to remove",
        |m| m.peak_dataset_dirty_writeback_bytes,
        (base, other),
        claim,
    )
}

/// A memory peak the baseline must show and `other` must keep small.
fn peak(
    what: &str,
    verb: &str,
    absent: &str,
    bytes: fn(&ModeSummary) -> Option<u64>,
    (base, other): (&ModeSummary, &ModeSummary),
    claim: &str,
) -> Figure {
    let name = format!("{what}: {}", versus(base, other));
    let (Some(b), Some(o)) = (bytes(base), bytes(other)) else {
        return Figure::judged(
            name,
            claim,
            "not measured".into(),
            Err("the kernel cannot tell these pages here (no cachestat before Linux 6.5)".into()),
            false,
        );
    };
    Figure::judged(
        name,
        claim,
        format!("{} vs {}", human_bytes(b), human_bytes(o)),
        if b >= EFFECT_CACHE_BYTES {
            Ok(())
        } else {
            Err(format!(
                "{} {verb} at most {}: {absent}",
                base.mode,
                human_bytes(b)
            ))
        },
        o <= UNCACHED_PEAK_BYTES && b > 4 * o,
    )
}

/// The victim's worst second: the baseline must bring it under
/// [`EFFECT_VICTIM_PCT`] of its rate alone; holds when it does better next
/// to `other`.
pub fn victim(base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    let worst = |m: &ModeSummary| {
        m.victim
            .and_then(|v| v.worst_pct_of_solo)
            .unwrap_or(f64::NAN)
    };
    let (b, o) = (worst(base), worst(other));
    Figure::judged(
        format!("victim's worst second, % of alone: {}", versus(base, other)),
        claim,
        format!("{b:.0}% vs {o:.0}%"),
        if b < EFFECT_VICTIM_PCT {
            Ok(())
        } else {
            Err(format!(
                "beside {} the victim kept {b:.0}% of its rate alone in its worst second: not disturbed",
                base.mode
            ))
        },
        o > b,
    )
}

/// Pages reclaimed per GB: the baseline must reclaim at least
/// [`EFFECT_RECLAIM_PER_GB`]; holds when `other` reclaims a twentieth of it.
pub fn reclaim(base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    let reclaimed = |m: &ModeSummary| m.reclaimed_pages_per_gb.map_or(0.0, |s| s.median);
    let (b, o) = (reclaimed(base), reclaimed(other));
    Figure::judged(
        format!("pages reclaimed per GB: {}", versus(base, other)),
        claim,
        format!("{} vs {}", num(b), num(o)),
        if b > EFFECT_RECLAIM_PER_GB {
            Ok(())
        } else {
            Err(format!(
                "{} reclaimed only {} pages per GB: the page cache never had to give pages back",
                base.mode,
                num(b)
            ))
        },
        o <= b * 0.05,
    )
}

/// kswapd's load over the runs, in % of a CPU: the baseline must keep it
/// busy (at least [`EFFECT_KSWAPD_PCT`]); holds when `other` brings it to
/// near zero (a tenth of it, or under 2% of a CPU).
pub fn kswapd(r: &Report, base: &ModeSummary, other: &ModeSummary, claim: &str) -> Figure {
    let pct = |m: BenchMode| {
        median_over_runs(r, m, |run| {
            (run.secs > 0.0).then(|| run.summary.kswapd_cpu_secs / run.secs * 100.0)
        })
    };
    let (b, o) = (pct(base.mode), pct(other.mode));
    // The seeds print kswapd per second: its busiest second beside the average.
    let peak = |m: BenchMode| {
        ok_runs(r, m)
            .flat_map(|run| &run.samples)
            .filter(|s| s.interval_secs >= 0.5)
            .map(Sample::kswapd_pct)
            .fold(0.0, f64::max)
    };
    let why_not = if r.config.global_pressure.is_none() {
        "; in a memory cgroup the limit's reclaim runs in the reading task, not in kswapd \
         (ubio bench suite seeds --pressure global puts the whole machine under pressure)"
    } else {
        ""
    };
    Figure::judged(
        format!(
            "kswapd CPU over the run (% of a CPU): {}",
            versus(base, other)
        ),
        claim,
        format!(
            "{b:.1}% vs {o:.1}% (busiest second {:.0}% vs {:.0}%)",
            peak(base.mode),
            peak(other.mode)
        ),
        if b >= EFFECT_KSWAPD_PCT {
            Ok(())
        } else {
            Err(format!(
                "{} kept kswapd at {b:.2}% of a CPU over its runs, under {EFFECT_KSWAPD_PCT}%: \
                 no kswapd load to remove{why_not}",
                base.mode
            ))
        },
        o <= (b * 0.1).max(2.0),
    )
}

/// Median over a mode's runs of the per-second throughput's standard
/// deviation, and of its median: how much the speed swings within a run.
/// Err with the fewest samples a run had, when that is too few.
fn swing_of(r: &Report, mode: BenchMode) -> Result<(f64, f64), usize> {
    let per_second: Vec<_> = ok_runs(r, mode)
        .filter_map(|run| run.summary.per_second_mb_per_s)
        .collect();
    let fewest = per_second.iter().map(|s| s.n).min().unwrap_or(0);
    if fewest < MIN_SWING_SAMPLES {
        return Err(fewest);
    }
    let sds: Vec<f64> = per_second.iter().map(|s| s.stddev).collect();
    let medians: Vec<f64> = per_second.iter().map(|s| s.median).collect();
    let m = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
    Ok((m(&sds), m(&medians)))
}

/// The per-second speed's swing: the baseline must swing by at least
/// [`EFFECT_SWING_SHARE`] of its median; holds when `other` swings less.
/// Err with why there is no figure (runs too short to show one).
pub fn swing(
    r: &Report,
    base: &ModeSummary,
    other: &ModeSummary,
    claim: &str,
) -> Result<Figure, String> {
    match (swing_of(r, base.mode), swing_of(r, other.mode)) {
        (Ok((b, b_median)), Ok((o, _))) => Ok(Figure::judged(
            format!("per-second speed swing (sd): {}", versus(base, other)),
            claim,
            format!("{} vs {} MB/s", num(b), num(o)),
            if b >= EFFECT_SWING_SHARE * b_median {
                Ok(())
            } else {
                Err(format!(
                    "{}'s per-second speed is steady here (sd {} MB/s, {:.1}% of its median {} MB/s): \
                     no swing to remove",
                    base.mode,
                    num(b),
                    b / b_median * 100.0,
                    num(b_median)
                ))
            },
            o <= b,
        )),
        (b, o) => Err(format!(
            "speed swing not judged: runs with {} per-second samples ({}) and {} ({}); \
             {MIN_SWING_SAMPLES} are needed: use a larger --limit",
            b.err().map_or("enough".into(), |n| n.to_string()),
            base.mode,
            o.err().map_or("enough".into(), |n| n.to_string()),
            other.mode
        )),
    }
}

// ---- what a bare-metal machine would see ----

/// Which of the two comparisons against buffered I/O a bare-metal machine
/// would see, said beside the figures: on a VM with free page reporting a
/// baseline's pages cost a host fault each unless they were backed first.
pub fn page_reporting_note(report: &Report) -> String {
    let twin = backed_baseline_mode(report);
    if report.environment.virtualization.summary.is_empty() {
        return "This report predates the record of the VM and its free page reporting: on a VM \
                that hands free memory back to its host, buffered I/O is slower than on bare metal."
            .to_owned();
    }
    match (&report.environment.free_page_reporting, twin) {
        (Some(_), _) if report.config.global_pressure.is_some() => format!(
            "This machine ({}) hands free memory back to its host (free page reporting), which \
             makes a buffered run that takes its pages from the machine's free memory slower \
             here than on bare metal. This run ran under global pressure: the balloon held free \
             memory small, so every mode took its pages from memory just freed, as on bare \
             metal; {}",
            report.environment.virtualization.summary,
            reported_under_pressure(report)
        ),
        (Some(_), Some(twin)) => format!(
            "This machine ({}) hands free memory back to its host (free page reporting), so a \
             buffered run whose page-cache pages come from freed memory pays a host fault per \
             page, which makes buffered I/O slower here than on bare metal. {twin} ran right \
             after memory of its size was faulted in and released, so that its pages were \
             already backed: the \"vs {twin}\" figures are the ones a bare-metal machine would \
             see{}",
            report.environment.virtualization.summary,
            backing_held(report, twin)
        ),
        (Some(_), None) => format!(
            "This machine ({}) hands free memory back to its host (free page reporting), which \
             makes buffered I/O slower here than on bare metal; this run has no backed baseline \
             (add the baseline's +backed twin to --modes) to show the bare-metal figure.",
            report.environment.virtualization.summary
        ),
        (None, _) => "No free page reporting here: buffered I/O takes its pages as on bare \
                      metal, and the backed figures (if any) should match the plain ones."
            .to_owned(),
    }
}

/// How much went back to the host during the runs, per mode (medians):
/// near zero for every mode is what makes the figures bare metal's.
fn reported_under_pressure(report: &Report) -> String {
    const NEAR_ZERO: u64 = 64 * MIB;
    let each: Vec<(BenchMode, u64)> = report
        .modes
        .iter()
        .filter_map(|m| Some((m.mode, m.reported_to_host_bytes?.median as u64)))
        .collect();
    if each.is_empty() {
        return "how much went back to the host was not measured.".into();
    }
    let list: Vec<String> = each
        .iter()
        .map(|(m, b)| format!("{m} {}", human_bytes(*b)))
        .collect();
    if each.iter().all(|(_, b)| *b <= NEAR_ZERO) {
        format!(
            "the memory handed back to the host during the runs stayed near zero for every mode \
             (median per run: {}), so these are the figures a bare-metal machine with this much \
             memory would see.",
            list.join(", ")
        )
    } else {
        format!(
            "but memory did go back to the host during some modes' runs (median per run: {}): \
             those modes' pages came in part from reported memory, and bare metal could be \
             faster for them.",
            list.join(", ")
        )
    }
}

/// "." when the twin's backing held (the VM handed back less than an
/// eighth of its size during its runs, median), else how much it did.
fn backing_held(report: &Report, twin: BenchMode) -> String {
    let median = |f: fn(&Run) -> Option<u64>| {
        let v: Vec<f64> = ok_runs(report, twin)
            .filter_map(f)
            .map(|b| b as f64)
            .collect();
        crate::stats::median(&v)
    };
    let reported = median(|r| r.summary.reported_to_host_bytes);
    let backed = median(|r| r.prefaulted_bytes);
    match (reported, backed) {
        (Some(r), Some(b)) if b > 0.0 && r > b / 8.0 => format!(
            ", but perhaps only in part: the VM handed a median {} back to its host during \
             its runs (its backing was {}), so the bare-metal figure may be higher still.",
            human_bytes(r as u64),
            human_bytes(b as u64)
        ),
        _ => ".".to_owned(),
    }
}

/// "1234", "12.3", "1.23", "-" for NaN.
pub fn num(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// a / b with two decimals, "-" when b is not positive.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;

    fn summary_of(r: &Report, mode: BenchMode) -> ModeSummary {
        r.modes.iter().find(|m| m.mode == mode).unwrap().clone()
    }

    /// A metric read from a mode's summary is the median of the same metric
    /// read from its runs: the three readers see the same figure.
    #[test]
    fn a_mode_metric_is_the_median_of_its_runs() {
        let r = mock::report(5);
        for m in &r.modes {
            for metric in [
                Metric::Throughput,
                Metric::CpuSecsPerGb,
                Metric::TimeToDurable,
            ] {
                let per_run = median_over_runs(&r, m.mode, |run| metric.of_run(run));
                match metric.of_mode(m) {
                    Some(v) => assert!((v - per_run).abs() < 1e-9, "{} {metric:?}", m.mode),
                    None => assert!(per_run.is_nan(), "{} {metric:?}", m.mode),
                }
            }
        }
    }

    /// The rules name the baseline they were given (cp for a copy), and a
    /// baseline without the effect judges nothing.
    #[test]
    fn figures_name_their_baseline_and_need_its_effect() {
        let r = mock::report(5);
        let mut base = summary_of(&r, BenchMode::Buffered);
        base.mode = BenchMode::Tool(super::super::mode::Tool::Cp);
        let mut other = summary_of(&r, BenchMode::Buffered);
        other.peak_dataset_cached_bytes = 8 * MIB;
        base.peak_dataset_cached_bytes = 512 * MIB;
        let f = cache(&base, &other, "claim");
        assert!(f.holds, "{f:?}");
        assert!(f.what.contains("cp vs buffered"), "{f:?}");
        assert_eq!(f.status(), "yes");
        assert!(f.sentence().ends_with("(holds)"), "{}", f.sentence());
        base.peak_dataset_cached_bytes = 100 * MIB;
        let f = cache(&base, &other, "claim");
        assert!(!f.holds);
        assert!(
            f.status()
                .starts_with("not reproduced here: cp cached at most 100.0 MiB"),
            "{}",
            f.status()
        );
        // 0.8x the baseline's speed holds for "about as fast", not for "faster".
        let mut slower = other.clone();
        slower.mb_per_s = base.mb_per_s.map(|mut s| {
            s.median *= 0.85;
            s
        });
        assert!(speed(&base, &slower, "", 0.8).holds);
        assert!(!speed(&base, &slower, "", 1.0).holds);
    }

    #[test]
    fn a_verdict_renders_its_figures_once_for_files_and_terminals() {
        let v = Verdict::from_figures(
            vec![Figure::plain("w".into(), "s", "h".into(), false)],
            vec!["n".into()],
        );
        assert_eq!(v.outcome, Outcome::Not);
        assert!(v.figures_markdown("seed").contains("| w | s | h | no |"));
        let lines = v.lines("seed");
        assert!(lines.contains("[does not hold]"), "{lines}");
        assert!(
            lines.contains("note: n") && lines.ends_with("=> not reproduced"),
            "{lines}"
        );
    }
}
