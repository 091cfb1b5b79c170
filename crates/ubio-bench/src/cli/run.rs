//! `ubio-bench run`: one benchmark (a workload, several modes, rounds
//! each round in a random order) through `ubio_bench::harness::runner`, with progress on
//! stderr and the report files in --out.

use crate::size;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;
use ubio_bench::harness::export;
use ubio_bench::harness::mode::{BenchMode, WorkloadKind};
use ubio_bench::harness::runner::{self, environment, Progress, RunOptions};
use ubio_bench::harness::schedule;
use ubio_bench::harness::schema::{
    Backing, Config, GlobalPressure, Report, Run, Sample, Target, Workload,
};
use ubio_testenv::scratchfs::FsKind;

/// Measure one workload in several modes, each round in a random order, inside a memory
/// cgroup (optionally next to a victim re-reading a hot file); write
/// report.json, samples.csv, runs.csv, report.md and report.html to --out
/// after every run.
///
/// Needs root (memory cgroup, loop filesystems) and free space for the
/// dataset (twice for copies) under --dir.
///
/// The ubio modes take ubio's data-path settings from UBIO_DIRECT_READS,
/// UBIO_DIRECT_WRITES and UBIO_SMALL_READAHEAD, as `ubio run` and `ubio cat`
/// do (e.g. UBIO_DIRECT_READS=always: every aligned read direct, no race);
/// the report's environment records those set.
#[derive(clap::Args)]
pub struct Args {
    /// seq-read, seq-write, rand-read, rand-write or copy.
    #[arg(long, default_value = "seq-read")]
    workload: WorkloadKind,
    /// Request size.
    #[arg(long, value_parser = size::parse_nonzero, default_value = "1M")]
    block: u64,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100000))]
    files_per_thread: u32,
    /// Run the --threads streams in this many worker processes (--threads
    /// divided evenly: --processes equal to --threads makes every stream a
    /// process of its own), started together.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    processes: u32,
    /// Every stream works on its own region of one shared file (instead of
    /// files of its own).
    #[arg(long)]
    shared_file: bool,
    /// Total size of the files [default: 4 x --limit, or 2G without a limit].
    #[arg(long, value_parser = size::parse_nonzero)]
    dataset: Option<u64>,
    /// Stop each run after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Requests in flight per thread for dontcache-uring and odirect-uring.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    qd: u32,
    /// Seed of the random offsets of rand-read and rand-write.
    #[arg(long, default_value_t = 1)]
    offset_seed: u64,
    /// Seed of the modes' order: every round runs them in a new random
    /// order drawn from it (printed, and kept in the report) [default: from
    /// the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// Modes, comma-separated (each round runs them in a random order):
    /// buffered, dontcache, dontcache-uring, odirect, odirect-uring,
    /// fadvise, ubio, ubio:<backend>; for copies also cp, nocache-cp,
    /// dd-nocache, rsync, xcp, ubio-cp, ubio-run-cp; for seq-read also cat,
    /// dd, ubio-cat, ubio-run-cat; NAME+backed (buffered, cp, rsync, xcp,
    /// cat, dd) runs NAME right after memory of its pages' size was faulted
    /// in and released: the baseline as bare metal would see it on a VM
    /// with free page reporting. A mode that cannot run here is left out
    /// with a warning. [default: every in-process mode but the
    /// ubio:<backend> ones; for copies, buffered, ubio and every copy tool]
    #[arg(long)]
    modes: Option<String>,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Put the dataset in a new subdirectory of this directory.
    #[arg(long, conflicts_with = "fs", default_value = ".")]
    dir: PathBuf,
    /// Put the dataset on a new filesystem of this kind (ext4, xfs, btrfs)
    /// on a loop device.
    #[arg(long)]
    fs: Option<FsKind>,
    /// With --fs: the loop device's backing file in /dev/shm (shm) or on the
    /// disk with loop direct I/O (disk).
    #[arg(long, requires = "fs", default_value = "shm", value_parser = ["shm", "disk"])]
    backing: String,
    /// With --fs: its size [default: what the benchmark needs, plus a quarter].
    #[arg(long, requires = "fs", value_parser = size::parse_nonzero)]
    fs_size: Option<u64>,
    /// With --fs: throttle the loop device's reads and writes to this many MB/s (blkio).
    #[arg(long, requires = "fs", value_name = "MB/S")]
    throttle: Option<f64>,
    /// Memory limit of the cgroup the workload and victim run in; with
    /// --pressure global, the memory the balloon leaves available.
    #[arg(long, value_parser = size::parse_nonzero, default_value = "512M", conflicts_with = "no_limit")]
    limit: u64,
    /// Run the workload in a cgroup without a memory limit.
    #[arg(long)]
    no_limit: bool,
    /// Where the memory pressure comes from: `cgroup` (a memory cgroup of
    /// --limit: the reading task reclaims) or `global` (no cgroup; a balloon
    /// of locked memory, held by a child process, leaves --limit of the
    /// machine's memory available, so kswapd reclaims as on a machine whose
    /// RAM is full). The balloon never takes MemAvailable below --floor,
    /// gives memory back when others need it, and is released on exit,
    /// error, Ctrl-C and the death of this process.
    #[arg(long, default_value = "cgroup", value_parser = ["cgroup", "global"])]
    pressure: String,
    /// With --pressure global: MemAvailable the balloon never goes below
    /// [default: half of --limit, at least 256 MiB or 2% of RAM].
    #[arg(long, value_parser = size::parse_nonzero)]
    floor: Option<u64>,
    /// Size of the victim's hot file [default: a quarter of --limit].
    #[arg(long, value_parser = size::parse_nonzero, conflicts_with = "no_victim")]
    victim: Option<u64>,
    /// No victim.
    #[arg(long)]
    no_victim: bool,
    /// Also run fio's version of the buffered, odirect and odirect-uring jobs.
    #[arg(long)]
    fio: bool,
    /// After every run that wrote or copied the dataset, check (untimed)
    /// that every file holds what was written.
    #[arg(long)]
    verify: bool,
    /// Skip the untimed warm-up pass.
    #[arg(long)]
    no_warmup: bool,
    /// Run a run that failed or timed out again, at once, up to N times
    /// (every attempt stays in the report, and counts in its mode's
    /// failures).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10))]
    retries: u32,
    /// Stop a run still going after this many seconds; it counts as failed.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Where the report files go [default: bench/out/<date>-<time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Print every per-second sample.
    #[arg(long, short)]
    verbose: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    crate::interrupt::run_until_signal(|| bench(args))
}

fn bench(args: Args) -> Result<ExitCode> {
    ubio_bench::harness::data_path::DataPath::from_env()?;
    let config = config(&args)?;
    let out = args.out.clone().unwrap_or_else(|| default_out(""));
    let mut options = run_options(args.seed)?;
    options.out_dir = Some(out.clone());
    options.fio = args.fio;
    options.warmup = !args.no_warmup;
    options.verify = args.verify;
    options.retries = args.retries;
    options.run_timeout = match args.timeout {
        Some(t) if !(t.is_finite() && t > 0.0) => bail!("--timeout must be more than 0 seconds"),
        t => t.map(std::time::Duration::from_secs_f64),
    };
    let progress = TermProgress::new(args.verbose);
    let report = runner::run(&config, &options, &progress).context("ubio-bench run")?;
    progress.line(&format!("report in {}", out.display()));
    print_report(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// The runner's options every command starts from: this program for the
/// workers, the `ubio` to measure (UBIO_EXE, set by `ubio bench`, or
/// beside this program, or on PATH), the source's git description, and the
/// seed of the modes' order (from the clock unless given).
pub(crate) fn run_options(seed: Option<u64>) -> Result<RunOptions> {
    let exe =
        std::env::current_exe().context("find the ubio-bench binary for the worker processes")?;
    let ubio = std::env::var_os("UBIO_EXE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| ubio_cmd::find_program("ubio"));
    let mut options = RunOptions::new(exe.clone(), ubio);
    options.git_commit = git_commit(&exe);
    options.order_seed = seed.unwrap_or_else(schedule::seed_from_clock);
    Ok(options)
}

fn print_report(report: &Report, json: bool) -> Result<()> {
    let table = export::headline_markdown(report);
    let mut text = table;
    for w in &report.warnings {
        text.push_str(&format!("\nwarning: {w}"));
    }
    text.push('\n');
    if json {
        let _ = write!(std::io::stderr(), "{text}");
        crate::out::print_json(report)?;
    } else {
        crate::out::print(&text)?;
    }
    Ok(())
}

fn config(a: &Args) -> Result<Config> {
    let global = a.pressure == "global";
    if global && a.no_limit {
        bail!("--pressure global needs --limit: the memory the balloon leaves");
    }
    if a.floor.is_some() && !global {
        bail!("--floor is for --pressure global");
    }
    let limit = (!a.no_limit).then_some(a.limit);
    let dataset = a
        .dataset
        .unwrap_or(limit.map_or(2 << 30, |l| l.saturating_mul(4)));
    let victim = match (a.no_victim, a.victim) {
        (true, _) => None,
        (false, Some(v)) => Some(v),
        (false, None) => Some(limit.map_or(128 << 20, |l| l / 4)),
    };
    let modes = match &a.modes {
        Some(list) => BenchMode::parse_list(list).map_err(|e| anyhow::anyhow!("--modes {e}"))?,
        None => BenchMode::defaults(a.workload),
    };
    let copies = a.workload.copies();
    let workload = Workload {
        kind: a.workload,
        block_bytes: a.block,
        threads: a.threads,
        files_per_thread: a.files_per_thread,
        dataset_bytes: dataset,
        duration_secs: a.duration,
        queue_depth: a.qd,
        seed: a.offset_seed,
        processes: a.processes,
        shared_file: a.shared_file,
    };
    let global_pressure = global.then(|| GlobalPressure {
        leave_bytes: a.limit,
        floor_bytes: a.floor.unwrap_or_else(|| default_floor(a.limit)),
    });
    let target = match a.fs {
        None => Target::Dir {
            path: a.dir.clone(),
        },
        Some(kind) => {
            let need = runner::target::space_needed(&workload, victim, global_pressure);
            let size = a
                .fs_size
                .unwrap_or((need + need / 4).max(kind.min_size_bytes()));
            Target::Loop {
                filesystem: kind.name().to_owned(),
                backing: if a.backing == "disk" {
                    Backing::Disk
                } else {
                    Backing::Shm
                },
                size_bytes: size,
                throttle_mb_per_s: a.throttle,
            }
        }
    };
    if let Err(e) = runner::check_streams(&workload) {
        bail!("{e}");
    }
    if a.duration.is_some_and(|d| d.is_nan() || d <= 0.0) {
        bail!("--duration must be more than 0 seconds");
    }
    if global {
        ubio_testenv::balloon::presses(copies * dataset + victim.unwrap_or(0), a.limit)
            .map_err(|e| anyhow::anyhow!("--pressure global: {e}"))?;
    }
    Ok(Config {
        workload,
        modes,
        rounds: a.rounds,
        target,
        memory_limit_bytes: if global { None } else { limit },
        victim_hot_bytes: victim,
        global_pressure,
    })
}

/// `--pressure auto`: global pressure on a VM with free page reporting
/// (free memory held small: every mode takes pages just freed, as on bare
/// metal, where in a memory cgroup buffered I/O would pay a host fault per
/// page taken from the machine's free memory), if `leave` can be left
/// safely (at least the lowest floor here); else a memory cgroup.
pub(crate) fn auto_global(leave: u64) -> bool {
    ubio_bench::page_reporting::on_here() && leave >= min_floor_here()
}

/// Half of what the balloon leaves, but never under the lowest floor
/// accepted on this machine.
pub(crate) fn default_floor(leave: u64) -> u64 {
    (leave / 2).max(min_floor_here())
}

/// The lowest floor a balloon may leave on this machine.
fn min_floor_here() -> u64 {
    let total = ubio::procfs::meminfo_field("MemTotal").unwrap_or(0);
    ubio_testenv::balloon::min_floor(total)
}

/// The source tree's `git describe`, from the build or from the tree the
/// binary sits in.
fn git_commit(exe: &std::path::Path) -> Option<String> {
    ubio_cmd::git_describe()
        .map(str::to_owned)
        .or_else(|| exe.parent().and_then(environment::git_describe))
}

/// bench/out/<prefix><UTC date>-<time>.
pub(crate) fn default_out(prefix: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("bench/out").join(format!("{prefix}{}", ubio_bench::clock::utc_stamp(secs)))
}

/// Progress on stderr: a bar per run on a terminal (its message the live
/// line), every sample's line with --verbose, a line per run always.
pub(crate) struct TermProgress {
    started: Instant,
    tty: bool,
    verbose: bool,
    bar: Mutex<Option<(ProgressBar, u64)>>,
}

impl TermProgress {
    pub(crate) fn new(verbose: bool) -> TermProgress {
        TermProgress {
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            verbose,
            bar: Mutex::new(None),
        }
    }

    /// Best effort: a closed stderr must not stop the benchmark before it
    /// cleans up.
    pub(crate) fn line(&self, msg: &str) {
        let text = format!("[{:>6.1}s] {msg}", self.started.elapsed().as_secs_f64());
        match self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some((bar, _)) => bar.println(text),
            None => {
                let _ = writeln!(std::io::stderr(), "{text}");
            }
        }
    }
}

impl Progress for TermProgress {
    fn message(&self, line: &str) {
        self.line(line);
    }

    fn warning(&self, line: &str) {
        self.line(&format!("warning: {line}"));
    }

    fn run_started(&self, label: &str, bytes: u64) {
        if self.verbose || !self.tty {
            self.line(label);
        }
        if self.tty && !self.verbose {
            let bar = ProgressBar::new(bytes);
            bar.set_style(
                ProgressStyle::with_template("{prefix} [{bar:24}] {percent:>3}% {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix(label.to_owned());
            *self.bar.lock().unwrap_or_else(|e| e.into_inner()) = Some((bar, 0));
        }
    }

    fn sample(&self, sample: &Sample, line: &str) {
        if self.verbose {
            self.line(line);
        }
        if let Some((bar, done)) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            *done += sample.bytes;
            bar.set_position(*done);
            bar.set_message(line.trim().to_owned());
        }
    }

    fn run_finished(&self, _run: &Run, line: &str) {
        if let Some((bar, _)) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
        self.line(line);
    }
}
