//! `ubio-bench __worker ...` (hidden): the worker processes of the harness
//! (and so of `ubio-bench demo`), speaking JSON lines (see `ubio_bench::worker`).

use anyhow::Result;
use std::ffi::OsString;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// `victim [--tick-ms N] FILE` or `bench JOB`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    Ok(ExitCode::from(
        ubio_bench::worker::main(&args.args).clamp(0, 255) as u8,
    ))
}
