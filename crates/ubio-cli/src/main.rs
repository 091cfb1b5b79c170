//! The `ubio` command.

mod bench;
mod cat;
mod cp;
mod demo;
mod evict;
mod interrupt;
mod out;
mod probe;
mod run;
mod size;
mod stat;
mod worker;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Uncached buffered I/O: stream big files without wrecking the page cache.
#[derive(Parser)]
#[command(name = "ubio", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Probe(probe::Args),
    Cat(cat::Args),
    Cp(cp::Args),
    Stat(stat::Args),
    Evict(evict::Args),
    Demo(demo::Args),
    Run(run::Args),
    Bench(bench::Args),
    #[command(name = "__worker", hide = true)]
    Worker(worker::Args),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("UBIO_LOG", "warn"))
        .format_timestamp(None)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(a) => probe::run(a),
        Command::Cat(a) => cat::run(a),
        Command::Cp(a) => cp::run(a),
        Command::Stat(a) => stat::run(a),
        Command::Evict(a) => evict::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Run(a) => run::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Worker(a) => worker::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ubio: {e:#}");
            ExitCode::FAILURE
        }
    }
}
