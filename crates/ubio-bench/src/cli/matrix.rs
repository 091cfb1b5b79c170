//! `ubio-bench matrix`: a matrix of benchmarks (`ubio_bench::harness::matrix`),
//! with an estimate before it starts, a line per point and per run while it
//! runs, and matrix.json / matrix.md / points.csv / matrix.html in --out
//! after every point. Run again with the same options and --out, it goes
//! on with the points not done. `--history DIR` prints the table of the
//! matrices kept under DIR (the release matrix's runs).

use super::run::{default_floor, run_options, TermProgress};
use crate::size;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use ubio_bench::harness::matrix::{
    self, ceiling, duration_text, record, MatrixOptions, Point, Pressure, Spec, TargetSpec,
};
use ubio_bench::harness::mode::{BenchMode, WorkloadKind};
use ubio_bench::harness::runner::executor::Executor;
use ubio_bench::harness::runner::process::ProcessExecutor;
use ubio_bench::harness::runner::RunOptions;
use ubio_bench::harness::schedule;

/// Measure buffered I/O's limits as a matrix: target x workload x block
/// size x threads x files per thread x dataset (as a fraction of the memory
/// the run may use) x mode, each point a benchmark whose modes run side by
/// side, each round in a new random order, the points in a random order.
///
/// Writes matrix.json (and the point's report) after every point (and run);
/// run the same command again to go on where it stopped. In a directory
/// that holds them gzipped (matrix.json.gz, points/*/report.json.gz: the
/// runs committed under bench/runs), they are read and rewritten gzipped.
/// Needs root. The ubio modes take UBIO_DIRECT_READS, UBIO_DIRECT_WRITES and
/// UBIO_SMALL_READAHEAD as `ubio-bench run` does (each point's environment
/// records those set).
#[derive(clap::Args)]
pub struct Args {
    /// A fixed matrix: `standard` (the axes' defaults below) or `release`
    /// (small: seq-write and seq-read, 1 and 2 threads, 2x the memory, on
    /// ext4 over /dev/shm; tracked in docs/results.md's history table,
    /// which bench/release.sh rewrites).
    #[arg(long, value_parser = ["standard", "release"], default_value = "standard")]
    preset: String,
    /// Targets, comma-separated FS/BACKING: a filesystem (ext4, xfs,
    /// btrfs) made for each point on a loop device over the disk (disk,
    /// loop direct I/O) or over /dev/shm (shm: a device as fast as memory,
    /// seed 003's pmem) [default: ext4/disk,ext4/shm].
    #[arg(long, value_delimiter = ',')]
    targets: Vec<TargetSpec>,
    /// Workloads, comma-separated: seq-read, seq-write, rand-read,
    /// rand-write [default: seq-write,seq-read].
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<WorkloadKind>,
    /// Request sizes, comma-separated [default: 1M].
    #[arg(long, value_delimiter = ',', value_parser = size::parse_nonzero)]
    blocks: Vec<u64>,
    /// Thread counts, comma-separated [default: 1 to 2 x the CPUs, by powers of two].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: Vec<u32>,
    /// How the streams (threads) of a point run, comma-separated: threads
    /// (of one worker process), processes (a worker process each; not at
    /// 1 thread, the same point as threads) [default: threads].
    #[arg(long, value_delimiter = ',')]
    streams: Vec<matrix::Streams>,
    /// Which files the streams work on, comma-separated: own (a file each),
    /// shared (each its own region of one file) [default: own].
    #[arg(long, value_delimiter = ',')]
    files: Vec<matrix::Files>,
    /// Files per thread, comma-separated [default: 1].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=10000))]
    files_per_thread: Vec<u32>,
    /// Datasets as fractions of --memory, comma-separated [default: 0.5,1,2].
    #[arg(long, value_delimiter = ',')]
    datasets: Vec<f64>,
    /// Modes, comma-separated (see `ubio-bench run --help`) [default:
    /// buffered,dontcache,odirect,ubio].
    #[arg(long)]
    modes: Option<String>,
    /// The memory the run may use: the memory cgroup's limit, or with
    /// --pressure global what the balloon leaves [default: 1G; release: 512M].
    #[arg(long, value_parser = size::parse_nonzero)]
    memory: Option<u64>,
    /// `cgroup` (each point in a memory cgroup of --memory), `global` (no
    /// cgroup: a balloon of locked memory leaves --memory to the whole
    /// machine, kswapd reclaims; see `ubio-bench run --help`), or `auto`:
    /// global on a VM with free page reporting (free memory held small, so
    /// every mode takes pages just freed: the figures bare metal would
    /// see), else cgroup.
    #[arg(long, value_parser = ["auto", "cgroup", "global"], default_value = "auto")]
    pressure: String,
    /// With --pressure global: MemAvailable the balloon never goes below.
    #[arg(long, value_parser = size::parse_nonzero)]
    floor: Option<u64>,
    /// Measured rounds per point.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: Option<u32>,
    /// Add seed 003's own job as a point per target and dataset: seq-write,
    /// 2 MiB blocks, one job per CPU, ten files per job, with fio's
    /// cross-check of the buffered and O_DIRECT runs.
    #[arg(long)]
    seed_point: bool,
    /// Seed of the points' order and their rounds' orders [default: from
    /// the clock; a matrix continued keeps its own].
    #[arg(long)]
    seed: Option<u64>,
    /// The matrix's directory [default: bench/out/matrix-<date>-<time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run at most N points in this session (run again to go on).
    #[arg(long, value_name = "N")]
    max_points: Option<usize>,
    /// Start no point that would end (by the estimate) after M minutes of
    /// this session; the first point always runs.
    #[arg(long, value_name = "M")]
    max_minutes: Option<f64>,
    /// Print the points and the estimate, and run nothing.
    #[arg(long)]
    estimate: bool,
    /// Do not measure the memcpy ceiling.
    #[arg(long)]
    no_ceiling: bool,
    /// Print every per-second sample.
    #[arg(long, short)]
    verbose: bool,
    /// Print the history table of the matrices in DIR's subdirectories
    /// (each with a matrix.json or matrix.json.gz), oldest first, and run
    /// nothing.
    #[arg(long, value_name = "DIR", conflicts_with = "estimate")]
    history: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(dir) = &args.history {
        let table = matrix::history::table(dir)
            .with_context(|| format!("the history of {}", dir.display()))?;
        crate::out::print(&table)?;
        return Ok(ExitCode::SUCCESS);
    }
    crate::interrupt::run_until_signal(|| matrix(args))
}

fn matrix(args: Args) -> Result<ExitCode> {
    ubio_bench::harness::data_path::DataPath::from_env()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| super::run::default_out("matrix-"));
    // A matrix continued keeps its own seed (the order is part of its spec).
    let kept_seed = match record::load(&out) {
        Ok(Some(r)) => Some(r.spec.order_seed),
        _ => None,
    };
    let seed = args
        .seed
        .or(kept_seed)
        .unwrap_or_else(schedule::seed_from_clock);
    let spec = spec(&args, seed)?;
    spec.validate().map_err(anyhow::Error::msg)?;
    let progress = TermProgress::new(args.verbose);
    if args.estimate {
        let record = match record::load(&out)? {
            Some(r) => {
                r.same_spec(&spec).map_err(anyhow::Error::msg)?;
                r
            }
            None => record::MatrixRecord::new(spec.clone()),
        };
        let e = matrix::estimate(&record)?;
        let mut text = String::new();
        for p in record
            .points
            .iter()
            .filter(|p| p.state != record::PointState::Done)
        {
            text.push_str(&format!("{}  {}\n", p.point.id, p.point.describe()));
        }
        text.push_str(&format!(
            "\n{} points to run ({} runs, {} moved): about {}, {}\n",
            e.points,
            e.runs,
            ubio::size::human(e.bytes),
            duration_text(e.secs),
            e.basis
        ));
        crate::out::print(&text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let options = MatrixOptions {
        run: run_options(Some(seed))?,
        out_dir: out.clone(),
        max_points: args.max_points,
        max_secs: match args.max_minutes {
            Some(m) if !(m.is_finite() && m > 0.0) => bail!("--max-minutes must be more than 0"),
            m => m.map(|m| m * 60.0),
        },
        ceiling_bytes: (!args.no_ceiling).then_some(ceiling::DEFAULT_BYTES),
    };
    let mut make = |_: &Point, o: &RunOptions| -> std::io::Result<Box<dyn Executor>> {
        Ok(Box::new(ProcessExecutor::new(o)?))
    };
    let outcome =
        matrix::run(&spec, &options, &mut make, &progress).context("ubio-bench matrix")?;
    let r = &outcome.record;
    let failed = r
        .points
        .iter()
        .filter(|p| matches!(p.state, record::PointState::Failed { .. }))
        .count();
    let left = r.points.len() - r.done();
    progress.line(&format!(
        "{} point(s) run in this session; {} of {} done{}; matrix in {}",
        outcome.ran,
        r.done(),
        r.points.len(),
        match (&outcome.stopped, left) {
            (_, 0) => String::new(),
            (Some(why), _) => format!(" (stopped by {why}: run the same command again to go on)"),
            (None, _) => format!(" ({failed} failed: run the same command again to retry them)"),
        },
        out.display()
    ));
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The spec from the preset and the options that change it.
fn spec(a: &Args, seed: u64) -> Result<Spec> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut s = match a.preset.as_str() {
        "release" => Spec::release(seed),
        _ => Spec::standard(cpus, 1 << 30, Pressure::Cgroup, seed),
    };
    if let Some(m) = a.memory {
        s.memory_bytes = m;
    }
    let global = match a.pressure.as_str() {
        "global" => true,
        "cgroup" => false,
        _ => super::run::auto_global(s.memory_bytes),
    };
    if a.floor.is_some() && !global {
        bail!("--floor is for --pressure global");
    }
    if global {
        s.pressure = Pressure::Global {
            floor_bytes: a.floor.unwrap_or_else(|| default_floor(s.memory_bytes)),
        };
    }
    if !a.targets.is_empty() {
        s.targets = a.targets.clone();
    }
    if !a.workloads.is_empty() {
        if let Some(w) = a.workloads.iter().find(|w| **w == WorkloadKind::Copy) {
            bail!("--workloads {w}: copies are measured by `ubio-bench run --workload copy`, not in the matrix");
        }
        s.workloads = a.workloads.clone();
    }
    if !a.blocks.is_empty() {
        s.blocks_bytes = a.blocks.clone();
    }
    if !a.threads.is_empty() {
        s.threads = a.threads.clone();
    }
    if !a.streams.is_empty() {
        s.streams = a.streams.clone();
    }
    if !a.files.is_empty() {
        s.files = a.files.clone();
    }
    if !a.files_per_thread.is_empty() {
        s.files_per_thread = a.files_per_thread.clone();
    }
    if !a.datasets.is_empty() {
        s.dataset_fractions = a.datasets.clone();
    }
    if let Some(list) = &a.modes {
        s.modes = BenchMode::parse_list(list).map_err(|e| anyhow::anyhow!("--modes {e}"))?;
    }
    if let Some(r) = a.rounds {
        s.rounds = r;
    }
    if a.seed_point {
        s.seed_jobs = Some(cpus);
    }
    Ok(s)
}
