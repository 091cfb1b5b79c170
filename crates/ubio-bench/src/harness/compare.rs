//! `ubio bench compare OLD NEW`: which modes got better or worse, judged
//! against the noise the runs themselves show.
//!
//! Modes are matched by name. Per mode and metric, each report contributes
//! one value per run that did not fail; the comparison is of the medians.
//!
//! # The rule
//!
//! Let `old` and `new` be the medians, `Δ% = 100 × (new − old) / old`, and
//! `noise% = 100 × √((sd_old/old)² + (sd_new/new)²)`, the relative standard
//! deviation of the per-run values of each report, combined as for a
//! difference (0 with a single run per side). A change is *beyond the
//! noise* when
//!
//! - `|Δ%| > max(threshold_pct, k × noise%)` (defaults: 5 %, k = 2), and
//! - `|new − old|` exceeds the metric's absolute floor (so that 0.1 MiB of
//!   cache against 0, or 0.01 s of time to durability, is not a change).
//!
//! When `old` is 0 there is no percentage and only the floor decides. A
//! change beyond the noise is an improvement or a regression according to
//! the metric's direction (higher throughput and victim % of solo are
//! better; lower CPU s/GB, dataset cache and time to durability are
//! better); anything else is unchanged. A mode that had good runs in OLD
//! and none in NEW is a regression too.
//!
//! The comparison *regressed* when any mode present in both reports has a
//! regression. Modes in only one report are listed, not judged.

use super::export::json::leaves;
use super::judge::Metric;
use super::mode::BenchMode;
use super::schema::{Environment, Report, Run};
use super::summary::{modes_in_order, ok_runs};
use crate::stats::Summary;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// How strict the comparison is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CompareOptions {
    /// Changes below this many percent are never flagged.
    pub threshold_pct: f64,
    /// How many combined relative standard deviations a change must exceed.
    pub noise_k: f64,
    /// Compare the metrics that depend on the machine's speed (throughput,
    /// CPU, times, the victim's rate); false between machines whose speeds
    /// are not comparable (a host and a guest under QEMU's TCG), where
    /// only page-cache footprints and reclaim per GB are compared.
    pub timings: bool,
}

impl Default for CompareOptions {
    fn default() -> CompareOptions {
        CompareOptions {
            threshold_pct: 5.0,
            noise_k: 2.0,
            timings: true,
        }
    }
}

/// What a change means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improvement,
    Regression,
    Unchanged,
}

/// One metric of one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricChange {
    pub metric: Metric,
    pub old: Summary,
    pub new: Summary,
    /// `100 × (new − old) / old`; None when old is 0.
    pub change_pct: Option<f64>,
    /// The smallest |change %| that counts: max(threshold, k × noise).
    pub noise_pct: f64,
    pub verdict: Verdict,
}

/// One mode present in both reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeComparison {
    pub mode: BenchMode,
    pub old_runs_ok: usize,
    pub new_runs_ok: usize,
    /// Metrics both reports have for this mode.
    pub metrics: Vec<MetricChange>,
    /// Why the mode regressed besides its metrics (all its runs failed).
    pub failure: Option<String>,
}

impl ModeComparison {
    pub fn regressed(&self) -> bool {
        self.failure.is_some()
            || self
                .metrics
                .iter()
                .any(|m| m.verdict == Verdict::Regression)
    }
}

/// OLD against NEW.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub options: CompareOptions,
    /// Where each report came from ("kernel 6.18, ubio 0.1.0 (abc123), ext4 on ...").
    pub old_label: String,
    pub new_label: String,
    /// Configuration differences that make the figures less comparable.
    pub warnings: Vec<String>,
    pub modes: Vec<ModeComparison>,
    pub only_in_old: Vec<BenchMode>,
    pub only_in_new: Vec<BenchMode>,
    /// Any mode in both regressed.
    pub regressed: bool,
}

impl Comparison {
    /// One line per regression: "buffered: throughput MB/s -20.0% (noise ±5.0%)".
    pub fn regressions(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in &self.modes {
            if let Some(f) = &m.failure {
                out.push(format!("{}: {f}", m.mode));
            }
            for c in m
                .metrics
                .iter()
                .filter(|c| c.verdict == Verdict::Regression)
            {
                out.push(format!(
                    "{}: {} {} (noise ±{:.1}%)",
                    m.mode,
                    c.metric.name(),
                    change_text(c),
                    c.noise_pct
                ));
            }
        }
        out
    }

    /// A Markdown table of every metric, then the warnings and the verdict.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "old: {}\nnew: {}\n\n{}\n",
            self.old_label,
            self.new_label,
            table_header(None)
        );
        for row in self.rows(None) {
            let _ = writeln!(out, "{row}");
        }
        for (which, modes) in [("old", &self.only_in_old), ("new", &self.only_in_new)] {
            if !modes.is_empty() {
                let names: Vec<String> = modes.iter().map(|m| m.to_string()).collect();
                let _ = writeln!(out, "\nonly in {which}: {}", names.join(", "));
            }
        }
        if !self.warnings.is_empty() {
            out.push('\n');
            for w in &self.warnings {
                let _ = writeln!(out, "warning: {w}");
            }
        }
        out += &self.options.rule_note();
        let regressions = self.regressions();
        if regressions.is_empty() {
            out += "\nno regression beyond the noise\n";
        } else {
            out += "\nregressions:\n";
            for r in regressions {
                let _ = writeln!(out, "- {r}");
            }
        }
        out
    }
}

impl Comparison {
    /// The table's rows (without its header), each metric of each mode; a
    /// first cell `lead` (the matrix's point) when given.
    pub fn rows(&self, lead: Option<&str>) -> Vec<String> {
        let lead = lead.map_or(String::new(), |l| format!("| {l} "));
        let mut rows = Vec::new();
        for m in &self.modes {
            if let Some(f) = &m.failure {
                rows.push(format!(
                    "{lead}| {} | runs | {} ok | 0 ok | | | REGRESSION: {f} |",
                    m.mode, m.old_runs_ok
                ));
            }
            for c in &m.metrics {
                rows.push(format!(
                    "{lead}| {} | {} | {} | {} | {} | ±{:.1}% | {} |",
                    m.mode,
                    c.metric.name(),
                    range(c.old),
                    range(c.new),
                    change_text(c),
                    c.noise_pct,
                    match c.verdict {
                        Verdict::Improvement => "better",
                        Verdict::Regression => "REGRESSION",
                        Verdict::Unchanged => "unchanged",
                    }
                ));
            }
        }
        rows
    }
}

/// The header of [`Comparison::rows`]'s table (with a first column named
/// `lead`, when given), and its separator line.
pub fn table_header(lead: Option<&str>) -> String {
    let (name, sep) = lead.map_or((String::new(), ""), |l| (format!("| {l} "), "|---"));
    format!(
        "{name}| mode | metric | old median [min–max] | new median [min–max] | change | noise | verdict |\n\
         {sep}|---|---|---|---|---|---|---|"
    )
}

impl CompareOptions {
    /// What the rule was, for the end of a comparison.
    pub fn rule_note(&self) -> String {
        let mut out = String::new();
        if !self.timings {
            out += "\ntimings not compared (throughput, CPU, times, the victim's rate): the two \
                    machines' speeds are not comparable; only page-cache footprints and reclaim \
                    per GB, which do not depend on speed, are\n";
        }
        let _ = writeln!(
            out,
            "\nnoise: the change a metric must exceed, max({}%, {} × the runs' combined relative sd), \
             beside a small absolute floor per metric",
            self.threshold_pct, self.noise_k
        );
        out
    }
}

fn range(s: Summary) -> String {
    let d = if s.median.abs() >= 100.0 { 0 } else { 2 };
    format!("{:.d$} [{:.d$}–{:.d$}]", s.median, s.min, s.max)
}

fn change_text(c: &MetricChange) -> String {
    match c.change_pct {
        Some(p) => format!("{p:+.1}%"),
        None => format!("{:+.2} (from 0)", c.new.median - c.old.median),
    }
}

/// Compares NEW against OLD (see the module documentation for the rule).
pub fn compare(old: &Report, new: &Report, opts: CompareOptions) -> Comparison {
    let mut warnings = config_differences(old, new);
    // A mode that could not run on one side (a kernel without
    // RWF_DONTCACHE, O_DIRECT refused) is a difference of the machines,
    // not a regression: it is named, not compared.
    let mut ran = |which: &str, r: &Report| {
        let mut modes = modes_in_order(r);
        modes.retain(|&m| match r.why_left_out(m) {
            Some(why) => {
                warnings.push(format!(
                    "{m} was left out in {which}, so it is not compared: {why}"
                ));
                false
            }
            None => true,
        });
        modes
    };
    let (old_modes, new_modes) = (ran("old", old), ran("new", new));
    let modes: Vec<ModeComparison> = old_modes
        .iter()
        .filter(|m| new_modes.contains(m))
        .map(|&mode| compare_mode(old, new, mode, opts))
        .collect();
    let asked = |r: &Report, m: &BenchMode| r.config.modes.contains(m);
    for (which, r) in [("old", old), ("new", new)] {
        if !r.complete {
            warnings.push(format!(
                "the {which} report is incomplete (the benchmark was interrupted or is still running): \
                 its modes may have fewer rounds"
            ));
        }
    }
    Comparison {
        options: opts,
        old_label: label(old),
        new_label: label(new),
        warnings,
        regressed: modes.iter().any(ModeComparison::regressed),
        only_in_old: old_modes
            .iter()
            .filter(|m| !new_modes.contains(m) && !asked(new, m))
            .copied()
            .collect(),
        only_in_new: new_modes
            .iter()
            .filter(|m| !old_modes.contains(m) && !asked(old, m))
            .copied()
            .collect(),
        modes,
    }
}

fn compare_mode(
    old: &Report,
    new: &Report,
    mode: BenchMode,
    opts: CompareOptions,
) -> ModeComparison {
    let old_runs: Vec<&Run> = ok_runs(old, mode).collect();
    let new_runs: Vec<&Run> = ok_runs(new, mode).collect();
    let values = |runs: &[&Run], metric: Metric| {
        Summary::of(
            &runs
                .iter()
                .filter_map(|r| metric.of_run(r))
                .collect::<Vec<_>>(),
        )
    };
    let metrics = Metric::ALL
        .into_iter()
        .filter(|m| opts.timings || !m.depends_on_speed())
        .filter_map(|metric| {
            let (o, n) = (values(&old_runs, metric)?, values(&new_runs, metric)?);
            Some(judge(metric, o, n, opts))
        })
        .collect();
    ModeComparison {
        mode,
        old_runs_ok: old_runs.len(),
        new_runs_ok: new_runs.len(),
        metrics,
        failure: (!old_runs.is_empty() && new_runs.is_empty())
            .then(|| "every run failed in new".to_owned()),
    }
}

/// Applies the rule to one metric.
pub fn judge(metric: Metric, old: Summary, new: Summary, opts: CompareOptions) -> MetricChange {
    let relative_sd = |s: Summary| {
        if s.median != 0.0 {
            s.stddev / s.median.abs()
        } else {
            0.0
        }
    };
    let noise_pct =
        (opts.noise_k * 100.0 * relative_sd(old).hypot(relative_sd(new))).max(opts.threshold_pct);
    let difference = new.median - old.median;
    let change_pct = (old.median != 0.0).then(|| 100.0 * difference / old.median.abs());
    let beyond =
        difference.abs() > metric.floor() && !matches!(change_pct, Some(p) if p.abs() <= noise_pct);
    let better = (difference > 0.0) == metric.higher_is_better();
    MetricChange {
        metric,
        old,
        new,
        change_pct,
        noise_pct,
        verdict: match (beyond, better) {
            (false, _) => Verdict::Unchanged,
            (true, true) => Verdict::Improvement,
            (true, false) => Verdict::Regression,
        },
    }
}

fn label(r: &Report) -> String {
    environment_label(&r.environment)
}

/// "ubio 0.1.0 (abc123), kernel 6.18, ext4 on ..., host ...": where a
/// result came from.
pub fn environment_label(e: &Environment) -> String {
    let commit = e
        .git_commit
        .as_deref()
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    format!(
        "{}{commit}, kernel {}, {} on {}, host {}",
        e.tool_version, e.kernel, e.filesystem, e.device, e.hostname
    )
}

/// What differs in the configurations, other than the modes and rounds
/// (which only decide what is compared and how often it was measured).
fn config_differences(old: &Report, new: &Report) -> Vec<String> {
    let flat = |r: &Report| -> BTreeMap<String, String> {
        let mut value = serde_json::to_value(&r.config).unwrap_or_default();
        if let Some(obj) = value.as_object_mut() {
            obj.remove("modes");
            obj.remove("rounds");
        }
        leaves(&value, ".")
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect()
    };
    let (o, n) = (flat(old), flat(new));
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    let text = |v: Option<&String>| v.map_or("(none)", String::as_str).to_owned();
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .map(|k| {
            format!(
                "configs differ: {k} {} → {}; the figures may not be comparable",
                text(o.get(k)),
                text(n.get(k))
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock::{self, scale_throughput};
    use crate::harness::schema::LeftOut;

    #[test]
    fn identical_reports_do_not_regress() {
        let report = mock::report(11);
        let c = compare(&report, &report, CompareOptions::default());
        assert!(!c.regressed);
        assert!(c.warnings.is_empty());
        assert_eq!(c.modes.len(), report.modes.len());
        assert!(c
            .modes
            .iter()
            .flat_map(|m| &m.metrics)
            .all(|m| m.verdict == Verdict::Unchanged));
        assert!(c.to_markdown().contains("no regression"));
    }

    #[test]
    fn twenty_percent_slower_is_a_regression_naming_mode_and_metric() {
        let old = mock::report(11);
        let mut new = old.clone();
        scale_throughput(&mut new, BenchMode::Dontcache, 0.8);
        let c = compare(&old, &new, CompareOptions::default());
        assert!(c.regressed);
        let regressions = c.regressions();
        assert_eq!(regressions.len(), 1, "{regressions:?}");
        assert!(
            regressions[0].starts_with("dontcache: throughput MB/s -20.0%"),
            "{regressions:?}"
        );
    }

    #[test]
    fn faster_is_an_improvement() {
        let old = mock::report(11);
        let mut new = old.clone();
        scale_throughput(&mut new, BenchMode::Buffered, 1.3);
        let c = compare(&old, &new, CompareOptions::default());
        assert!(!c.regressed);
        let m = &c.modes[0].metrics[0];
        assert_eq!(
            (m.metric, m.verdict),
            (Metric::Throughput, Verdict::Improvement)
        );
    }

    #[test]
    fn a_change_under_the_threshold_is_unchanged() {
        let old = mock::report(11);
        let mut new = old.clone();
        scale_throughput(&mut new, BenchMode::Buffered, 0.97);
        assert!(!compare(&old, &new, CompareOptions::default()).regressed);
        let strict = CompareOptions {
            threshold_pct: 1.0,
            noise_k: 0.0,
            ..CompareOptions::default()
        };
        assert!(compare(&old, &new, strict).regressed);
    }

    #[test]
    fn a_change_within_the_runs_own_spread_is_unchanged() {
        // Rounds of buffered that scatter by ±15 % in both reports: a 10 %
        // drop of the median is within k × their spread.
        let spread = |report: &mut Report, median: f64| {
            let runs = report
                .runs
                .iter_mut()
                .filter(|r| r.mode == BenchMode::Buffered);
            for (run, f) in runs.zip([0.85, 1.0, 1.15]) {
                run.summary.mb_per_s = median * f;
            }
        };
        let mut old = mock::report(11);
        let mut new = old.clone();
        spread(&mut old, 400.0);
        spread(&mut new, 360.0);
        let c = compare(&old, &new, CompareOptions::default());
        let m = &c.modes[0].metrics[0];
        assert!((m.change_pct.unwrap() + 10.0).abs() < 1e-9);
        assert!(m.noise_pct > 10.0, "{}", m.noise_pct);
        assert_eq!(m.verdict, Verdict::Unchanged);
    }

    #[test]
    fn directions_per_metric() {
        let s = |x: f64| Summary {
            median: x,
            min: x,
            max: x,
            stddev: 0.0,
            n: 1,
        };
        let o = CompareOptions::default();
        for (metric, old, new, want) in [
            (Metric::CpuSecsPerGb, 1.0, 1.5, Verdict::Regression),
            (Metric::PeakDatasetCache, 10.0, 100.0, Verdict::Regression),
            (Metric::TimeToDurable, 4.0, 3.0, Verdict::Improvement),
            (Metric::VictimPctOfSolo, 90.0, 40.0, Verdict::Regression),
            // From nothing cached: only the absolute floor decides.
            (Metric::PeakDatasetCache, 0.0, 0.5, Verdict::Unchanged),
        ] {
            let verdict = judge(metric, s(old), s(new), o).verdict;
            assert_eq!(verdict, want, "{metric:?} {old} → {new}");
        }
        let grown = judge(Metric::PeakDatasetCache, s(0.0), s(200.0), o);
        assert_eq!(
            (grown.change_pct, grown.verdict),
            (None, Verdict::Regression)
        );
    }

    #[test]
    fn a_mode_that_now_always_fails_regressed() {
        let old = mock::report(11);
        let mut new = old.clone();
        for run in new.runs.iter_mut().filter(|r| r.mode == BenchMode::Odirect) {
            run.error = Some("EINVAL".into());
        }
        let c = compare(&old, &new, CompareOptions::default());
        assert!(c.regressed);
        assert!(c.regressions()[0].contains("odirect: every run failed"));
    }

    #[test]
    fn different_configs_warn_and_modes_in_one_report_are_listed() {
        let old = mock::report(11);
        let mut new = mock::report(12);
        new.config.workload.block_bytes *= 2;
        new.config.modes.retain(|m| *m != BenchMode::Odirect);
        new.runs.retain(|r| r.mode != BenchMode::Odirect);
        let c = compare(&old, &new, CompareOptions::default());
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("workload.block_bytes 65536 → 131072"));
        assert_eq!(c.only_in_old, [BenchMode::Odirect]);
        assert!(c.to_markdown().contains("only in old: odirect"));
    }

    /// A kernel without RWF_DONTCACHE: the new side left dontcache out.
    /// That is named, not a regression, whether the report says it in its
    /// `left_out` or (written before that field) only as a warning.
    #[test]
    fn a_mode_left_out_on_one_side_is_named_not_a_regression() {
        let old = mock::report(11);
        let mut new = old.clone();
        new.runs.retain(|r| r.mode != BenchMode::Odirect);
        let why = "O_DIRECT is refused here";
        let mut as_warning = new.clone();
        as_warning.warnings.push(format!("odirect left out: {why}"));
        new.left_out.push(LeftOut {
            mode: BenchMode::Odirect,
            why: why.into(),
        });
        for new in [new, as_warning] {
            let c = compare(&old, &new, CompareOptions::default());
            assert!(!c.regressed, "{:?}", c.regressions());
            assert!(c.modes.iter().all(|m| m.mode != BenchMode::Odirect));
            assert!(c.only_in_old.is_empty());
            assert_eq!(
                c.warnings,
                [format!(
                    "odirect was left out in new, so it is not compared: {why}"
                )]
            );
        }
        // Runs that failed where the mode was not left out still regress.
        let mut failed = old.clone();
        for run in failed
            .runs
            .iter_mut()
            .filter(|r| r.mode == BenchMode::Odirect)
        {
            run.error = Some("EINVAL".into());
        }
        assert!(compare(&old, &failed, CompareOptions::default()).regressed);
    }

    #[test]
    fn an_incomplete_report_is_named() {
        let old = mock::report(11);
        let mut new = old.clone();
        new.complete = false;
        let c = compare(&old, &new, CompareOptions::default());
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].starts_with("the new report is incomplete"));
    }
}
