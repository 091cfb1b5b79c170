//! `ubio bench`: the limits of buffered I/O, measured (`run`), and the
//! results rendered (`report`) and tracked (`compare`).

pub mod compare;
pub mod report;
pub mod run;
pub mod suite;

use std::process::ExitCode;

/// Benchmark buffered I/O against its alternatives, and work with the results.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    Run(run::Args),
    Compare(compare::Args),
    Report(report::Args),
    Suite(suite::Args),
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        BenchCommand::Run(a) => run::run(a),
        BenchCommand::Compare(a) => compare::run(a),
        BenchCommand::Report(a) => report::run(a),
        BenchCommand::Suite(a) => suite::run(a),
    }
}
