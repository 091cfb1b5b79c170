//! A/B: two matrix runs (two kernels, two filesystems, two commits)
//! compared point by point, each point with `ubio bench compare`'s rule
//! (the change must exceed the runs' own noise, see
//! [`crate::harness::compare`]), naming the points and modes that
//! regressed. Points are matched by id (target, workload, block size,
//! threads, files, dataset fraction); a point done in only one of the runs
//! is listed, not judged.
//!
//! Between machines whose speeds are not comparable (a host and a guest
//! under QEMU's software emulation), `timings: false` compares only what
//! does not depend on speed: the page-cache footprints and reclaim per GB.

use super::record::{MatrixRecord, PointState};
use crate::harness::compare::{self, table_header, CompareOptions, Comparison};
use serde::Serialize;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// One point in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointComparison {
    pub id: String,
    /// The point in words.
    pub what: String,
    pub comparison: Comparison,
}

/// OLD against NEW.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixComparison {
    pub options: CompareOptions,
    pub old_label: String,
    pub new_label: String,
    pub points: Vec<PointComparison>,
    /// Points not done in both, and where.
    pub unmatched: Vec<String>,
    /// Spec differences that make the figures less comparable.
    pub warnings: Vec<String>,
    /// Any point regressed.
    pub regressed: bool,
}

impl MatrixComparison {
    /// "POINT: MODE: METRIC -20.0% (noise ±5.0%)", one per regression.
    pub fn regressions(&self) -> Vec<String> {
        self.points
            .iter()
            .flat_map(|p| {
                p.comparison
                    .regressions()
                    .into_iter()
                    .map(move |r| format!("{}: {r}", p.id))
            })
            .collect()
    }

    /// The verdict per point, every metric of every point in one table,
    /// the regressions named.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "old: {}\nnew: {}\n\n| point | verdict |\n|---|---|\n",
            self.old_label, self.new_label
        );
        for p in &self.points {
            let regressed: Vec<String> = p
                .comparison
                .modes
                .iter()
                .filter(|m| m.regressed())
                .map(|m| m.mode.to_string())
                .collect();
            let verdict = if regressed.is_empty() {
                "no regression beyond the noise".to_owned()
            } else {
                format!("REGRESSION ({})", regressed.join(", "))
            };
            let _ = writeln!(out, "| {} | {verdict} |", p.what);
        }
        let _ = writeln!(out, "\n{}", table_header(Some("point")));
        for p in &self.points {
            for row in p.comparison.rows(Some(&p.id)) {
                let _ = writeln!(out, "{row}");
            }
        }
        let warnings = self
            .warnings
            .iter()
            .chain(self.points.iter().flat_map(|p| &p.comparison.warnings));
        let mut seen = Vec::new();
        for w in warnings {
            if !seen.contains(&w) {
                seen.push(w);
            }
        }
        if !self.unmatched.is_empty() || !seen.is_empty() {
            out.push('\n');
        }
        for u in &self.unmatched {
            let _ = writeln!(out, "not compared: {u}");
        }
        for w in seen {
            let _ = writeln!(out, "warning: {w}");
        }
        out += &self.options.rule_note();
        let regressions = self.regressions();
        if regressions.is_empty() {
            out += "\nno regression beyond the noise at any point\n";
        } else {
            out += "\nregressions:\n";
            for r in regressions {
                let _ = writeln!(out, "- {r}");
            }
        }
        out
    }
}

/// "ubio 0.1.0 (abc123), Linux 6.18.44, 2 CPUs, 24 GiB, host NAME".
pub fn label(r: &MatrixRecord) -> String {
    match &r.environment {
        Some(e) => format!(
            "{}{}, Linux {}, {} CPUs, {}, host {}",
            e.tool_version,
            e.git_commit
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default(),
            e.kernel,
            e.cpus,
            ubio::size::human(e.mem_total_bytes),
            e.hostname
        ),
        None => "(no point done)".to_owned(),
    }
}

/// Compares NEW (`new`, in `new_dir`) against OLD point by point; the
/// points' reports are read from the two directories.
pub fn compare(
    old: &MatrixRecord,
    old_dir: &Path,
    new: &MatrixRecord,
    new_dir: &Path,
    opts: CompareOptions,
) -> io::Result<MatrixComparison> {
    let mut points = Vec::new();
    let mut unmatched = Vec::new();
    for o in &old.points {
        let n = new.point(&o.point.id);
        match (&o.state, n.map(|n| &n.state)) {
            (PointState::Done, Some(PointState::Done)) => {
                let n = n.expect("matched");
                let comparison =
                    compare::compare(&o.load_report(old_dir)?, &n.load_report(new_dir)?, opts);
                points.push(PointComparison {
                    id: o.point.id.clone(),
                    what: o.point.describe(),
                    comparison,
                });
            }
            (PointState::Done, Some(_)) => {
                unmatched.push(format!("{}: not done in new", o.point.id))
            }
            (PointState::Done, None) => unmatched.push(format!("{}: only in old", o.point.id)),
            (_, Some(PointState::Done)) => {
                unmatched.push(format!("{}: not done in old", o.point.id))
            }
            _ => unmatched.push(format!("{}: done in neither", o.point.id)),
        }
    }
    for n in &new.points {
        if old.point(&n.point.id).is_none() {
            unmatched.push(format!("{}: only in new", n.point.id));
        }
    }
    let mut warnings = Vec::new();
    if old.spec.memory_bytes != new.spec.memory_bytes || old.spec.pressure != new.spec.pressure {
        warnings.push(format!(
            "the memory the runs could use differs ({} {:?} against {} {:?}): the same point has another dataset",
            ubio::size::human(old.spec.memory_bytes),
            old.spec.pressure,
            ubio::size::human(new.spec.memory_bytes),
            new.spec.pressure
        ));
    }
    for (which, r) in [("old", old), ("new", new)] {
        if !r.complete {
            warnings.push(format!("the {which} matrix is not complete"));
        }
    }
    Ok(MatrixComparison {
        options: opts,
        old_label: label(old),
        new_label: label(new),
        regressed: points.iter().any(|p| p.comparison.regressed),
        points,
        unmatched,
        warnings,
    })
}
