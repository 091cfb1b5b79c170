//! `ubio demo` (placeholder until the demo lands in this change).
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode> {
    anyhow::bail!("demo: not built yet")
}
