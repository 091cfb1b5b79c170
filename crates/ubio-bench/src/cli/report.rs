//! `ubio-bench report RESULT.json [--out DIR]`: the CSV, Markdown and HTML
//! exports again, from the JSON alone (after a change to the exporters, or
//! on another machine); of a report, or of a matrix (its matrix.json).

use crate::out;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use ubio_bench::harness::export;
use ubio_bench::harness::gz;
use ubio_bench::harness::matrix::record;
use ubio_bench::harness::schema::Report;

/// Render a `ubio bench` result (report.json) again: report.json, samples.csv,
/// runs.csv, report.md and report.html.
///
/// Exit status: 0 written, 1 could not write, 2 the input is unreadable or
/// not a ubio bench report of a version this ubio reads.
#[derive(clap::Args)]
pub struct Args {
    /// A report.json written by `ubio bench run`, or a matrix.json
    /// written by `ubio bench matrix`; gzipped (report.json.gz, as the runs
    /// under bench/runs keep them) or not.
    result: PathBuf,
    /// Where to write the files [default: the directory of RESULT; beside a
    /// report.json.gz, the JSON is rewritten gzipped there].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Exit status for input that is missing or not a report.
pub const BAD_INPUT: u8 = 2;

/// Reads and checks a report; the error names the file.
pub fn load(path: &Path) -> Result<Report, String> {
    let text = gz::read_to_string(path).map_err(|e| format!("cannot {e}"))?;
    Report::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(args: Args) -> Result<ExitCode> {
    if gz::is_named(&args.result, record::FILE) {
        return matrix(&args);
    }
    let report = match load(&args.result) {
        Ok(r) => r,
        Err(e) => return bad_input("report", e),
    };
    let dir = match args.out {
        Some(dir) => dir,
        None => match args.result.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        },
    };
    print_written(&export::write_all(&report, &dir)?)
}

/// A matrix's exports again.
fn matrix(args: &Args) -> Result<ExitCode> {
    let from = args
        .result
        .parent()
        .map_or(PathBuf::from("."), Path::to_owned);
    let record = match record::load(&from) {
        Ok(Some(r)) => r,
        Ok(None) => {
            return bad_input(
                "report",
                format!("no {} in {}", record::FILE, from.display()),
            )
        }
        Err(e) => return bad_input("report", e),
    };
    let dir = args.out.clone().unwrap_or(from);
    print_written(&export::matrix::write_all(&record, &dir)?)
}

/// `ubio bench COMMAND: WHY` on stderr, and the exit status for bad input.
pub fn bad_input(command: &str, why: impl std::fmt::Display) -> Result<ExitCode> {
    eprintln!("ubio bench {command}: {why}");
    Ok(ExitCode::from(BAD_INPUT))
}

/// The files written, one a line.
fn print_written(paths: &[PathBuf]) -> Result<ExitCode> {
    let list: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
    out::print(&list)?;
    Ok(ExitCode::SUCCESS)
}
