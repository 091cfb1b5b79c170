//! `ubio-bench compare OLD NEW`: per mode and metric, what changed beyond
//! the noise the runs themselves show (the rule is documented in
//! `ubio_bench::harness::compare`), with an exit status for CI. OLD and NEW
//! are two reports (report.json), or two matrices (their directories or
//! matrix.json), compared point by point
//! (`ubio_bench::harness::matrix::ab`).

use super::report::{bad_input, load, BAD_INPUT};
use crate::out;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use ubio_bench::harness::compare::{compare, CompareOptions};
use ubio_bench::harness::gz;
use ubio_bench::harness::matrix::ab;
use ubio_bench::harness::matrix::record::{self, MatrixRecord};

/// Compare two `ubio bench` results (two reports, or two matrices point by
/// point) and flag changes beyond the noise.
///
/// A change counts when it exceeds both --threshold and twice the runs'
/// own relative spread (and a small absolute floor per metric); worse
/// throughput, victim share, or more CPU, cache or time to durability is a
/// regression. Exit status: 0 no regression, 1 a regression, 2 bad input
/// (a missing file, not a ubio bench report, a schema this ubio does not read).
#[derive(clap::Args)]
pub struct Args {
    /// The earlier result: a report.json, or a matrix (its directory or
    /// its matrix.json); either gzipped (.json.gz) or not.
    old: PathBuf,
    /// The later result.
    new: PathBuf,
    /// Changes smaller than this many percent are never flagged.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    threshold: f64,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Compare only what does not depend on the machine's speed (page-cache
    /// footprints, reclaim per GB): for a machine against a guest under
    /// software emulation (QEMU's TCG), whose timings are not comparable.
    #[arg(long)]
    no_timings: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if !(args.threshold.is_finite() && args.threshold >= 0.0) {
        return bad_input("compare", "--threshold must be a percentage >= 0");
    }
    let opts = CompareOptions {
        threshold_pct: args.threshold,
        timings: !args.no_timings,
        ..CompareOptions::default()
    };
    match (matrix_dir(&args.old), matrix_dir(&args.new)) {
        (Some(old), Some(new)) => return compare_matrices(&old, &new, opts, args.json),
        (None, None) => {}
        _ => {
            return bad_input(
                "compare",
                "one of the two is a matrix and the other is not: compare like with like",
            )
        }
    }
    let Some((old, new)) = both(load(&args.old), load(&args.new)) else {
        return Ok(ExitCode::from(BAD_INPUT));
    };
    let comparison = compare(&old, &new, opts);
    verdict(
        &comparison,
        || comparison.to_markdown(),
        comparison.regressed,
        args.json,
    )
}

/// Both results loaded, or None (each one's error printed).
fn both<T>(old: Result<T, String>, new: Result<T, String>) -> Option<(T, T)> {
    match (old, new) {
        (Ok(old), Ok(new)) => Some((old, new)),
        (old, new) => {
            for e in [old.err(), new.err()].into_iter().flatten() {
                eprintln!("ubio bench compare: {e}");
            }
            None
        }
    }
}

/// The comparison on stdout (JSON or a table), and the exit status that
/// says whether it found a regression.
fn verdict<C: serde::Serialize>(
    comparison: &C,
    markdown: impl FnOnce() -> String,
    regressed: bool,
    json: bool,
) -> Result<ExitCode> {
    if json {
        out::print_json(comparison)?;
    } else {
        out::print(&markdown())?;
    }
    Ok(if regressed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The matrix's directory, if `path` is one (or its matrix.json, gzipped
/// or not).
fn matrix_dir(path: &Path) -> Option<PathBuf> {
    if path.is_dir() && gz::existing(&path.join(record::FILE)).is_some() {
        Some(path.to_owned())
    } else if gz::is_named(path, record::FILE) {
        Some(path.parent().map_or(PathBuf::from("."), Path::to_owned))
    } else {
        None
    }
}

fn compare_matrices(old: &Path, new: &Path, opts: CompareOptions, json: bool) -> Result<ExitCode> {
    let load = |dir: &Path| -> Result<MatrixRecord, String> {
        record::load(dir)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no {} in {}", record::FILE, dir.display()))
    };
    let Some((a, b)) = both(load(old), load(new)) else {
        return Ok(ExitCode::from(BAD_INPUT));
    };
    let comparison = match ab::compare(&a, old, &b, new, opts) {
        Ok(c) => c,
        Err(e) => return bad_input("compare", e),
    };
    verdict(
        &comparison,
        || comparison.to_markdown(),
        comparison.regressed,
        json,
    )
}
