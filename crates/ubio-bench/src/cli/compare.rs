//! `ubio-bench compare OLD.json NEW.json`: per mode and metric, what changed
//! beyond the noise the runs themselves show (the rule is documented in
//! `ubio_bench::harness::compare`), with an exit status for CI.

use super::report::{load, BAD_INPUT};
use crate::out;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;
use ubio_bench::harness::compare::{compare, CompareOptions};

/// Compare two `ubio bench` results and flag changes beyond the noise.
///
/// A change counts when it exceeds both --threshold and twice the runs'
/// own relative spread (and a small absolute floor per metric); worse
/// throughput, victim share, or more CPU, cache or time to durability is a
/// regression. Exit status: 0 no regression, 1 a regression, 2 bad input
/// (a missing file, not a ubio bench report, a schema this ubio does not read).
#[derive(clap::Args)]
pub struct Args {
    /// The earlier result (report.json).
    old: PathBuf,
    /// The later result.
    new: PathBuf,
    /// Changes smaller than this many percent are never flagged.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    threshold: f64,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if !(args.threshold.is_finite() && args.threshold >= 0.0) {
        eprintln!("ubio bench compare: --threshold must be a percentage >= 0");
        return Ok(ExitCode::from(BAD_INPUT));
    }
    let (old, new) = match (load(&args.old), load(&args.new)) {
        (Ok(old), Ok(new)) => (old, new),
        (old, new) => {
            for e in [old.err(), new.err()].into_iter().flatten() {
                eprintln!("ubio bench compare: {e}");
            }
            return Ok(ExitCode::from(BAD_INPUT));
        }
    };
    let opts = CompareOptions {
        threshold_pct: args.threshold,
        ..CompareOptions::default()
    };
    let comparison = compare(&old, &new, opts);
    if args.json {
        out::print_json(&comparison)?;
    } else {
        out::print(&comparison.to_markdown())?;
    }
    Ok(if comparison.regressed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
