//! `ubio bench ...` and `ubio demo ...`: the benchmark harness is a program
//! of its own, `ubio-bench`, which the product neither links nor needs.
//! Like git and cargo with their external subcommands, `ubio` finds it
//! beside itself or on PATH and execs it with the rest of the command line
//! (`ubio bench run ...` is `ubio-bench run ...`, `ubio demo ...` is
//! `ubio-bench demo ...`), telling it in UBIO_EXE which `ubio` to measure.
//! Where it is missing, the message says how to get it.

use anyhow::Result;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

/// The harness's program.
pub const BENCH: &str = "ubio-bench";

/// The rest of the command line, `--help` included, for the other program.
#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// Replaces this process with `ubio-bench [first] ARGS...`; returns only
/// when that cannot be done, with the reason on stderr.
pub fn exec_bench(command: &str, first: Option<&str>, args: Args) -> Result<ExitCode> {
    let Some(program) = ubio_cmd::find_program(BENCH) else {
        let here = std::env::current_exe()
            .ok()
            .and_then(|e| Some(e.parent()?.display().to_string()))
            .unwrap_or_else(|| "this binary".to_owned());
        eprintln!(
            "ubio {command}: the benchmark harness is a separate program, {BENCH}, and it is not \
             installed (looked in {here} and on PATH).\n\
             Install it with your package manager (Debian and derivatives: apt install {BENCH}), \
             or from ubio's source tree: cargo install --path crates/{BENCH} \
             (or cargo build --release -p {BENCH}, which puts it beside target/release/ubio)."
        );
        return Ok(ExitCode::FAILURE);
    };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(first).args(args.args);
    if let Ok(me) = std::env::current_exe() {
        cmd.env("UBIO_EXE", me);
    }
    let e = cmd.exec();
    eprintln!("ubio {command}: cannot run {}: {e}", program.display());
    Ok(ExitCode::FAILURE)
}
