//! `ubio-bench suite seeds`: the seeds' experiments
//! (`ubio_bench::harness::suite`), one benchmark each, every figure printed
//! next to the seed's claim with a verdict.
//!
//! Writes, under --out: one directory per experiment with the harness's
//! report files, and suite.json / suite.md with the verdicts, rewritten
//! after every experiment.

use super::run::TermProgress;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use ubio_bench::harness::runner;
use ubio_bench::harness::schema::GlobalPressure;
use ubio_bench::harness::suite::{self, ExperimentResult, Outcome, Scale, Verdict};

/// Reproduce the seeds' experiments at this machine's scale: 000 (reads and
/// slow-device writes, vivo), 001 (64 KiB reads of 10x memory), 002 (random
/// reads of 10x memory, with a victim), 003 (filling writes, buffered
/// against direct, with fio), 004 (a large copy with and without
/// write-behind). About 10 minutes with --limit 1G (less at the default).
#[derive(clap::Args)]
pub struct Args {
    /// The suite to run (only `seeds` exists).
    #[arg(value_parser = ["seeds"])]
    suite: String,
    /// Only these seeds, comma-separated (000, 001, 002, 003, 004).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The memory cgroup limit that stands for the seeds' RAM; datasets
    /// scale with it. With --pressure global: the memory the balloon leaves.
    #[arg(long, value_parser = crate::size::parse_nonzero, default_value = "512M")]
    limit: u64,
    /// `cgroup` (each experiment in a memory cgroup of --limit) or `global`
    /// (no cgroup: a balloon of locked memory leaves --limit of the
    /// machine's memory, so kswapd reclaims as on the seeds' machines; see
    /// `ubio bench run --help`). Experiments that cannot run so (a
    /// dataset too small to press) keep their cgroup and say so.
    #[arg(long, default_value = "cgroup", value_parser = ["cgroup", "global"])]
    pressure: String,
    /// With --pressure global: MemAvailable the balloon never goes below
    /// [default: half of --limit, at least 256 MiB or 2% of RAM].
    #[arg(long, value_parser = crate::size::parse_nonzero)]
    floor: Option<u64>,
    /// Measured rounds per experiment.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Speed of the slow device of seeds 000 (writes) and 004, in MB/s.
    #[arg(long, default_value_t = 150.0, value_name = "MB/S")]
    slow_device: f64,
    /// A tiny scale (64 MiB "RAM", one round) that runs every experiment in
    /// a minute or two: checks the suite works, its figures mean little.
    #[arg(long, conflicts_with_all = ["limit", "rounds", "slow_device"])]
    smoke: bool,
    /// Seed of the modes' order in every experiment's rounds (each round a
    /// new random order; printed, and kept in the reports) [default: from
    /// the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// Where the reports go [default: bench/out/seeds-<date>-<time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print every per-second sample.
    #[arg(long, short)]
    verbose: bool,
    /// Run nothing: judge the reports of an earlier suite run in DIR again
    /// with this version's verdict rules, and rewrite its suite.json and
    /// suite.md.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["only", "smoke", "out"])]
    rejudge: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    crate::interrupt::run_until_signal(|| suite(args))
}

fn suite(args: Args) -> Result<ExitCode> {
    if let Some(dir) = &args.rejudge {
        let results = suite::rejudge(dir).with_context(|| format!("rejudge {}", dir.display()))?;
        crate::out::print(&suite::render_markdown(&results))?;
        return Ok(ExitCode::SUCCESS);
    }
    let known = ["000", "001", "002", "003", "004"];
    if let Some(bad) = args.only.iter().find(|s| !known.contains(&s.as_str())) {
        bail!(
            "--only {bad}: no such seed (expected some of {})",
            known.join(", ")
        );
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut scale = if args.smoke {
        Scale::smoke()
    } else {
        Scale {
            memory_limit: args.limit,
            rounds: args.rounds,
            slow_device_mb_per_s: args.slow_device,
            ..Scale::standard(cpus)
        }
    };
    if args.floor.is_some() && args.pressure != "global" {
        bail!("--floor is for --pressure global");
    }
    if args.pressure == "global" {
        scale.global_pressure = Some(GlobalPressure {
            leave_bytes: scale.memory_limit,
            floor_bytes: args
                .floor
                .unwrap_or_else(|| super::run::default_floor(scale.memory_limit)),
        });
    }
    if scale.slow_device_mb_per_s.is_nan() || scale.slow_device_mb_per_s <= 0.0 {
        bail!("--slow-device must be more than 0 MB/s");
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| super::run::default_out("seeds-"));
    let progress = TermProgress::new(args.verbose);
    let base = super::run::run_options(args.seed)?;
    let mut results: Vec<ExperimentResult> = Vec::new();
    let mut failed = 0;
    let experiments = suite::experiments(&scale, &args.only);
    for (i, exp) in experiments.iter().enumerate() {
        let dir_name = format!("{}-{}", exp.seed, i + 1);
        progress.line(&format!(
            "== seed {} ({}/{}): {}",
            exp.seed,
            i + 1,
            experiments.len(),
            exp.title
        ));
        let mut options = base.clone();
        options.out_dir = Some(out.join(&dir_name));
        options.fio = exp.fio;
        let verdict = match runner::run(&exp.config, &options, &progress) {
            Ok(report) => exp.judge(&report, &scale),
            Err(e) => {
                failed += 1;
                progress.line(&format!("seed {}: the experiment failed: {e}", exp.seed));
                Verdict {
                    outcome: Outcome::Unmeasured,
                    figures: Vec::new(),
                    notes: vec![format!("the experiment failed: {e}")],
                }
            }
        };
        progress.line(&verdict_lines(exp.seed, exp.claim, &verdict));
        results.push(ExperimentResult {
            seed: exp.seed.to_owned(),
            title: exp.title.to_owned(),
            claim: exp.claim.to_owned(),
            report: format!("{dir_name}/report.json"),
            verdict,
        });
        suite::write_report(&out, &scale, &results, i + 1 == experiments.len())?;
    }
    crate::out::print(&suite::render_markdown(&results))?;
    progress.line(&format!("suite reports in {}", out.display()));
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The verdict as a few lines for the progress log.
fn verdict_lines(seed: &str, claim: &str, v: &Verdict) -> String {
    format!("seed {seed} claims: {claim}\n{}", v.lines("seed"))
}
