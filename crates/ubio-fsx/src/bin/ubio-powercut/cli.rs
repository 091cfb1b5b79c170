//! The command line, the device the workloads write to, and the marks they
//! put in its log.

use anyhow::Result;
use clap::Parser;
use std::path::PathBuf;
use ubio_fsx::guest::{sh, SuiteArgs};

#[derive(Parser)]
#[command(
    name = "ubio-powercut",
    about = "power cuts replayed from a dm-log-writes log, checked against a model"
)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) suite: SuiteArgs,
    /// Workloads, comma separated: cp, tree, tails, libtails, fsync, overwrite, runcp
    /// (GNU cp -r under `ubio run`; with buffered, plain cp), unsynced (a
    /// plain program, buffered only: files left unsynced while others are
    /// fsynced).
    #[arg(long, value_delimiter = ',', default_value = "cp,tree,fsync,overwrite")]
    pub(crate) workloads: Vec<String>,
    /// MiB each workload writes.
    #[arg(long, default_value_t = 8)]
    pub(crate) mib: u64,
    /// Where failing images and log excerpts are kept.
    #[arg(long)]
    pub(crate) keep: Option<PathBuf>,
    /// GNU cp (for the runcp workload).
    #[arg(long, default_value = "cp")]
    pub(crate) cp: PathBuf,
    /// Seed of the workloads' data and offsets.
    #[arg(long, default_value_t = 29)]
    pub(crate) seed: u64,
}

pub(crate) const DEV: &str = "ubio-powercut";

pub(crate) fn mark(name: &str) -> Result<()> {
    sh("dmsetup", &["message", DEV, "0", "mark", name]).map(drop)?;
    Ok(())
}

/// The disk's old contents, which every device of the run starts from.
pub(crate) fn stale_path(a: &Args) -> PathBuf {
    a.suite.work.join("stale.img")
}
