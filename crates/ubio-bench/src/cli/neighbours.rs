//! `ubio-bench neighbours`: a database's latency and a web server's rate
//! while a real backup runs (issue 39). The harness's
//! [`ubio_bench::harness::neighbours`] does the work; this picks the
//! sizes, prints the tables and keeps the report files.

use crate::run::{default_out, run_options, TermProgress};
use crate::size;
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use ubio_bench::harness::export::neighbours::markdown;
use ubio_bench::harness::neighbours::plan::{self, Load, Mode, Pressure, Stream};
use ubio_bench::harness::neighbours::report::Settings;
use ubio_bench::harness::neighbours::{self, Options};
use ubio_bench::harness::schedule;

/// Measure PostgreSQL (pgbench -S and read-write) and nginx (wrk, random
/// files) alone and beside tar, restic, rsync and cp of data several times
/// the memory left, each stream plain, under `ubio run`, under `ubio
/// policy run` and with its tool's own option (where it has one), under
/// global pressure (a balloon) and in memory cgroups of their own.
///
/// Everything it starts (a PostgreSQL cluster and nginx of its own on
/// 127.0.0.1, restic repositories, cgroups below its own, the balloon,
/// files) lives in a scratch directory under --dir and goes at the end,
/// on failure and on Ctrl-C. Needs root, Debian's postgresql, nginx, wrk,
/// restic, rsync (scripts/install-deps.sh), and about 4 x --data of free
/// space under --dir.
#[derive(clap::Args)]
pub struct Args {
    /// The memory left to the service and the stream together: under
    /// global pressure what a balloon leaves to the whole machine; in
    /// cgroups, half of it is each one's limit.
    #[arg(long, value_parser = size::parse, default_value = "1G")]
    memory: u64,
    /// The tree tar and restic back up, and the image rsync and cp copy
    /// (each) [default: 4 x --memory].
    #[arg(long, value_parser = size::parse)]
    data: Option<u64>,
    /// Pressures, comma-separated: global, cgroup.
    #[arg(long, default_value = "global,cgroup")]
    pressure: String,
    /// Loads, comma-separated: pgbench-ro, pgbench-rw (PostgreSQL), wrk (nginx).
    #[arg(long, default_value = "pgbench-ro,pgbench-rw,wrk")]
    loads: String,
    /// Streams, comma-separated: tar, restic, rsync, image-cp.
    #[arg(long, default_value = "tar,restic,rsync,image-cp")]
    streams: String,
    /// Modes of the streams, comma-separated: plain, ubio-run, policy, own
    /// (own runs only where the tool has an option for the page cache).
    #[arg(long, default_value = "plain,ubio-run,policy,own")]
    modes: String,
    /// Rounds; each runs every cell of a block once, in a new random order.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Seed of the order (printed and kept in the report) [default: from the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds each load runs before the stream starts, and after it ends.
    #[arg(long, default_value_t = 5.0)]
    lead_secs: f64,
    /// Seconds a load is measured alone.
    #[arg(long, default_value_t = 20.0)]
    alone_secs: f64,
    /// pgbench clients and wrk connections.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    clients: u32,
    /// pgbench's scale [default: a database of about a quarter of --memory,
    /// 15 MiB per unit].
    #[arg(long)]
    scale: Option<u32>,
    /// The files nginx serves, in all [default: a quarter of --memory].
    #[arg(long, value_parser = size::parse)]
    web_set: Option<u64>,
    /// The size of each file nginx serves.
    #[arg(long, value_parser = size::parse, default_value = "64K")]
    web_file: u64,
    /// Where to make the scratch directory (every parent must be
    /// searchable by others: PostgreSQL runs as its user).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Where the report files go [default: bench/out/neighbours-DATE].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the report as JSON on stdout (the tables go to stderr).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    crate::interrupt::run_until_signal(|| neighbours(args))
}

fn neighbours(a: Args) -> Result<ExitCode> {
    let opts = options(&a)?;
    let out = opts.out.clone().expect("options() sets it");
    let progress = TermProgress::new(false);
    let report = neighbours::run(&opts, &progress)?;
    progress.line(&format!("report in {}", out.display()));
    let text = markdown::render(&report);
    if a.json {
        eprint!("{text}");
        crate::out::print_json(&report)?;
    } else {
        crate::out::print(&text)?;
    }
    let failed = report.runs.iter().any(|r| r.error.is_some());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// MiB of database per pgbench scale unit (100,000 accounts with their
/// index, measured: 15-16 MiB).
const PGBENCH_UNIT: u64 = 15 << 20;

fn options(a: &Args) -> Result<Options> {
    let list = |what: &str, s: &str, e: String| anyhow::anyhow!("--{what} {s}: {e}");
    let pressures = plan::parse_list("pressure", &a.pressure, &Pressure::ALL)
        .map_err(|e| list("pressure", &a.pressure, e))?;
    let loads =
        plan::parse_list("load", &a.loads, &Load::ALL).map_err(|e| list("loads", &a.loads, e))?;
    let streams = plan::parse_list("stream", &a.streams, &Stream::ALL)
        .map_err(|e| list("streams", &a.streams, e))?;
    let modes =
        plan::parse_list("mode", &a.modes, &Mode::ALL).map_err(|e| list("modes", &a.modes, e))?;
    if a.memory < 64 << 20 {
        bail!(
            "--memory {} is too small: use at least 64M",
            size::human(a.memory)
        );
    }
    if pressures.contains(&Pressure::Global) {
        let floor =
            ubio_testenv::balloon::min_floor(ubio::procfs::meminfo_field("MemTotal").unwrap_or(0));
        if a.memory < floor {
            bail!(
                "--memory {} is below the least a balloon may leave on this machine ({}): use more, or --pressure cgroup",
                size::human(a.memory),
                size::human(floor)
            );
        }
    }
    let data = a.data.unwrap_or(4 * a.memory);
    if data < 1 << 20 {
        bail!("--data {} is too small: use at least 1M", size::human(data));
    }
    for (name, v) in [("--lead-secs", a.lead_secs), ("--alone-secs", a.alone_secs)] {
        if !(v.is_finite() && (1.0..=3600.0).contains(&v)) {
            bail!("{name} must be between 1 and 3600 seconds");
        }
    }
    if a.web_file < 1024 {
        bail!("--web-file must be at least 1K");
    }
    let base = run_options(a.seed)?;
    let seed = a.seed.unwrap_or_else(schedule::seed_from_clock);
    Ok(Options {
        dir: a.dir.clone(),
        out: Some(a.out.clone().unwrap_or_else(|| default_out("neighbours-"))),
        worker_exe: base.worker_exe,
        ubio_exe: base.ubio_exe,
        git_commit: base.git_commit,
        settings: Settings {
            memory_bytes: a.memory,
            data_bytes: data,
            pgbench_scale: a
                .scale
                .unwrap_or(((a.memory / 4) / PGBENCH_UNIT).max(1) as u32),
            web_set_bytes: a.web_set.unwrap_or(a.memory / 4),
            web_file_bytes: a.web_file,
            lead_secs: a.lead_secs,
            alone_secs: a.alone_secs,
            rounds: a.rounds,
            seed,
            clients: a.clients,
            own_options: Vec::new(),
        },
        pressures,
        loads,
        streams,
        modes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn opts(args: &[&str]) -> Result<Options> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))?;
        options(&cli.args)
    }

    #[test]
    fn sizes_follow_the_memory() {
        let o = opts(&["--memory", "2G", "--pressure", "cgroup", "--seed", "5"]).unwrap();
        let s = &o.settings;
        assert_eq!(s.data_bytes, 8 << 30);
        assert_eq!(s.web_set_bytes, 512 << 20);
        assert_eq!(s.pgbench_scale, 34);
        assert_eq!(s.seed, 5);
        assert_eq!(o.loads.len(), 3);
        assert_eq!(o.modes.len(), 4);
    }

    #[test]
    fn mistakes_are_named() {
        let e = |a: &[&str]| opts(a).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e(&["--streams", "tar,zip"]).contains("unknown stream 'zip'"));
        assert!(e(&["--memory", "1M", "--pressure", "cgroup"]).contains("too small"));
        assert!(e(&["--lead-secs", "0", "--pressure", "cgroup"]).contains("--lead-secs"));
        assert!(e(&["--pressure", "cgroup,cgroup"]).contains("twice"));
    }
}
