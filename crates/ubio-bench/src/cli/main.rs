//! `ubio-bench` (also reached as `ubio bench` and `ubio demo`): the limits
//! of buffered I/O, measured (`run`, the seeds' `suite`, a short `demo`,
//! a `matrix` of them, real
//! services beside real backups: `neighbours`),
//! and the results rendered (`report`) and tracked (`compare`). It is a
//! program of its own so that the `ubio` a user installs to copy files
//! carries no benchmark, memory cgroups or balloon; it runs its worker
//! processes as `ubio-bench __worker ...`, and the `ubio` it measures (the
//! ubio-cat, ubio-cp and ubio-run-* modes) is found in UBIO_EXE, beside it
//! or on PATH.

mod compare;
mod demo;
mod interrupt;
mod matrix;
mod neighbours;
mod report;
mod run;
mod suite;
mod worker;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;
use ubio_cmd::{out, size};

/// Benchmark buffered I/O against its alternatives, and work with the results.
#[derive(Parser)]
#[command(
    name = "ubio-bench",
    version = ubio_cmd::VERSION,
    after_help = "Examples:\n  ubio-bench run --workload seq-read --dataset 4G --limit 1G\n  ubio-bench compare old/report.json new/report.json\n  ubio-bench demo --copy\n\n`ubio bench ARGS` and `ubio demo ARGS` run this program. See 'ubio-bench COMMAND --help' and the man pages ubio-bench(1), ubio-bench-run(1), ..."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[command(
        after_help = "Examples:\n  ubio-bench run --workload seq-read --dataset 4G --limit 1G\n  ubio-bench run --workload copy --modes cp,ubio-cp --fs xfs --backing disk"
    )]
    Run(run::Args),
    #[command(
        after_help = "Examples:\n  ubio-bench compare old/report.json new/report.json\n  ubio-bench compare --threshold 10 a.json b.json"
    )]
    Compare(compare::Args),
    #[command(
        after_help = "Examples:\n  ubio-bench report bench/out/run/report.json --out /tmp/again"
    )]
    Report(report::Args),
    #[command(
        after_help = "Examples:\n  ubio-bench suite seeds --limit 1G\n  ubio-bench suite seeds --smoke\n  ubio-bench suite seeds --rejudge bench/runs/2026-11-22-vm/seeds"
    )]
    Suite(suite::Args),
    #[command(after_help = "Examples:\n  ubio-bench demo\n  ubio-bench demo --copy --limit 1G")]
    Demo(demo::Args),
    #[command(
        after_help = "Examples:\n  ubio-bench matrix --estimate\n  ubio-bench matrix --out bench/out/m --max-minutes 15   (again to go on)\n  ubio-bench matrix --workloads seq-read --threads 1,2 --datasets 0.5,2 --targets xfs/shm\n  ubio-bench matrix --preset release --out bench/runs/release/DATE-COMMIT\n  ubio-bench compare old-matrix/ new-matrix/"
    )]
    Matrix(matrix::Args),
    #[command(
        after_help = "Examples:\n  ubio-bench neighbours --memory 1G --rounds 3 --out bench/runs/DATE-neighbours\n  ubio-bench neighbours --pressure cgroup --loads wrk --streams tar --modes plain,ubio-run --memory 256M --rounds 1"
    )]
    Neighbours(neighbours::Args),
    #[command(name = "__worker", hide = true)]
    Worker(worker::Args),
    #[command(name = "__generate-docs", hide = true)]
    GenerateDocs(ubio_cmd::docs::Args),
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Run(_) => "run",
            Command::Compare(_) => "compare",
            Command::Report(_) => "report",
            Command::Suite(_) => "suite",
            Command::Demo(_) => "demo",
            Command::Matrix(_) => "matrix",
            Command::Neighbours(_) => "neighbours",
            Command::Worker(_) => "__worker",
            Command::GenerateDocs(_) => "__generate-docs",
        }
    }
}

fn main() -> ExitCode {
    ubio_cmd::init_log();
    let cli = Cli::parse();
    let name = cli.command.name();
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Report(a) => report::run(a),
        Command::Suite(a) => suite::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Matrix(a) => matrix::run(a),
        Command::Neighbours(a) => neighbours::run(a),
        Command::Worker(a) => worker::run(a),
        Command::GenerateDocs(a) => ubio_cmd::docs::run(a, Cli::command(), "ubio-bench", &[]),
    };
    ubio_cmd::finish(&format!("ubio-bench {name}"), result, |e| format!("{e:#}"))
}
