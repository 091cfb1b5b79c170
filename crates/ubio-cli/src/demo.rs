//! `ubio demo`: the problem and the answer, side by side, in a minute or two.
//!
//! In a memory cgroup made for the purpose (beneath our own), a streamer
//! writes and reads a dataset several times larger than the cgroup's limit,
//! in each of the modes asked for (by default plain buffered I/O and ubio;
//! also ubio with a chosen backend, raw RWF_DONTCACHE and O_DIRECT), while a
//! victim process keeps re-reading a hot file that fits. Phases are
//! interleaved: in each round every mode writes, in the order given, then
//! every mode reads. Between phases the dataset is fsynced and its pages
//! dropped, so every phase starts cold, and the victim reads its file through
//! again, so every phase starts with the hot file cached. The parent samples
//! the dataset's page-cache footprint with cachestat() and collects the
//! victim's reads per second.
//!
//! Reported per mode and operation: throughput (median of rounds, min-max),
//! the peak page cache and peak dirty + writeback of the dataset, the CPU
//! seconds the streaming process spent (user and system), and the victim's
//! reads per second (median and worst second, and as % of the victim alone).
//!
//! Everything it makes (a directory with two files, the cgroup, the worker
//! processes) goes away at the end, on error and on Ctrl-C.

mod copy;
mod table;

use crate::size;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::fs;
use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ubio::sys::{self, Advice};
use ubio::BackendKind;
use ubio_bench::cgroup::MemCgroup;
use ubio_bench::cleanup::{self, CleanupGuard};
use ubio_bench::clock::monotonic_secs;
use ubio_bench::cpu::{self, CpuTimes};
use ubio_bench::residency_sampler::{file_cachestat, ResidencySampler};
use ubio_bench::stats::{self, Summary};
use ubio_bench::victim::{self, per_second_rates, CachedFloor};
use ubio_bench::worker::{self, Job, VictimClient};
use ubio_bench::workload::{self, Mode, Op, StreamResult, StreamSpec, DEFAULT_BLOCK};

/// Stream a dataset larger than a memory cgroup with buffered I/O and with
/// ubio (or other modes), next to a process re-reading a hot file, and
/// compare.
///
/// Needs root (it makes a memory cgroup beneath its own) and about
/// --dataset + --hot of free disk space under --dir.
#[derive(clap::Args)]
pub struct Args {
    /// Memory limit of the cgroup the streams and the hot-file reader run in.
    #[arg(long, value_parser = size::parse, default_value = "512M")]
    limit: u64,
    /// Size of the streamed dataset [default: 4 x --limit].
    #[arg(long, value_parser = size::parse)]
    dataset: Option<u64>,
    /// Size of the hot file the other process keeps re-reading; it must fit
    /// in --limit [default: half of --limit].
    #[arg(long, value_parser = size::parse)]
    hot: Option<u64>,
    /// Rounds; in each, every mode writes (in --modes order), then every
    /// mode reads (with --copy: every mode copies).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// The modes to compare, comma-separated, in the order they run:
    /// buffered (plain std::fs), ubio (auto backend, or --backend),
    /// ubio:<backend> (auto, kernel, emulated, direct, buffered), dontcache
    /// (preadv2/pwritev2 with RWF_DONTCACHE, no ubio) and odirect (O_DIRECT,
    /// queue depth 1, no ubio; --dataset must be a whole number of MiB).
    /// With --copy: cp, nocache-cp, dd-nocache, ubio-cp, ubio-run-cp.
    /// [default: buffered,ubio; with --copy, all five copy modes]
    #[arg(long)]
    modes: Option<String>,
    /// Copy the dataset with whole commands instead of streaming it: plain
    /// cp, `nocache cp`, `dd iflag=nocache oflag=nocache`, `ubio cp` and
    /// `ubio run -- cp`, each timed to durability (command + fsync) in the
    /// cgroup; needs 2 x --dataset of free space.
    #[arg(long)]
    copy: bool,
    /// With --copy: compare every copy with the source, byte for byte
    /// (untimed).
    #[arg(long, requires = "copy")]
    verify: bool,
    /// Where to make the demo's temporary directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Backend for a bare `ubio` in --modes: auto, kernel, emulated, direct
    /// or buffered.
    #[arg(long, default_value = "auto")]
    backend: BackendKind,
    /// Run without the hot-file reader (for pure throughput runs: the
    /// reader keeps one CPU busy).
    #[arg(long)]
    no_victim: bool,
    /// Print the results as JSON on stdout (progress, and the table, go to
    /// stderr).
    #[arg(long)]
    json: bool,
    /// Seconds the hot-file reader runs alone, for its baseline.
    #[arg(long, default_value_t = 3.0, hide = true)]
    solo_secs: f64,
}

/// Free space kept beyond the two files.
const SPACE_MARGIN: u64 = 64 << 20;
/// How often the dataset's page cache is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// Longest wait for the victim to read its hot file through.
const WARM_TIMEOUT: Duration = Duration::from_secs(120);
/// The order of the phases in a round (and of the table): every mode
/// writes, then every mode reads.
const OPS: [Op; 2] = [Op::Write, Op::Read];

/// Parses --modes: comma-separated [`Mode`]s, each at most once; a bare
/// `ubio` means `ubio:<backend>`.
fn parse_modes(list: &str, backend: BackendKind) -> Result<Vec<Mode>> {
    let mut modes: Vec<Mode> = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            bail!("--modes {list:?}: empty entry (expected a comma-separated list such as buffered,ubio)");
        }
        let mode = if item == "ubio" {
            Mode::Ubio(backend)
        } else {
            item.parse::<Mode>()
                .map_err(|e| anyhow::anyhow!("--modes: {e}"))?
        };
        if modes.contains(&mode) {
            bail!("--modes {list:?}: {mode} is listed twice");
        }
        modes.push(mode);
    }
    Ok(modes)
}

/// "buffered I/O", "ubio", "ubio:kernel", "RWF_DONTCACHE", "O_DIRECT": how
/// the conclusion names a mode.
fn mode_label(m: Mode) -> String {
    match m {
        Mode::Buffered => "buffered I/O".to_owned(),
        Mode::Dontcache => "RWF_DONTCACHE".to_owned(),
        Mode::Odirect => "O_DIRECT".to_owned(),
        Mode::Ubio(_) => m.to_string(),
    }
}

#[derive(Serialize)]
struct Report {
    config: Config,
    /// The hot-file reader alone (after warm-up, before any stream); null
    /// with --no-victim.
    solo: Option<ReaderSummary>,
    /// One entry per mode and operation, in the order of the table.
    modes: Vec<ModeSummary>,
    /// Every timed phase, in the order they ran.
    phases: Vec<Phase>,
    conclusion: Vec<String>,
    warnings: Vec<String>,
    wall_seconds: f64,
}

#[derive(Serialize)]
struct Config {
    limit_bytes: u64,
    dataset_bytes: u64,
    /// 0 with --no-victim.
    hot_bytes: u64,
    rounds: u32,
    block_bytes: u64,
    /// In the order they ran in each round.
    modes: Vec<Mode>,
    victim: bool,
    dir: PathBuf,
    filesystem: String,
    kernel: String,
    ubio_backend_requested: BackendKind,
    cgroup: PathBuf,
    cgroup_version: ubio_bench::cgroup::CgroupVersion,
}

#[derive(Serialize, Clone, Copy)]
struct ReaderSummary {
    /// Median of the one-second windows.
    median_reads_per_s: f64,
    /// The worst one-second window.
    worst_reads_per_s: f64,
    /// How many (overlapping) one-second windows these come from.
    windows: usize,
}

impl ReaderSummary {
    fn of(rates: &[f64]) -> Option<ReaderSummary> {
        Some(ReaderSummary {
            median_reads_per_s: stats::median(rates)?,
            worst_reads_per_s: stats::min(rates)?,
            windows: rates.len(),
        })
    }
}

/// What the hot-file reader saw during one mode's rounds (both demos): the
/// least of its file seen cached, its rates, and those against its speed
/// alone. Flattened into each mode's JSON.
#[derive(Serialize, Clone, Copy, Default)]
struct ReaderOutcome {
    /// The least of the hot file seen cached, lowest over the rounds (None
    /// without the reader).
    hot_cached_min_bytes: Option<u64>,
    /// The reader's one-second windows of all rounds together.
    reader: Option<ReaderSummary>,
    reader_median_pct_of_solo: Option<f64>,
    reader_worst_pct_of_solo: Option<f64>,
}

impl ReaderOutcome {
    /// From each round's least-cached figure and per-second rates.
    fn of<'a>(
        rounds: impl Iterator<Item = (Option<u64>, &'a [f64])>,
        solo: Option<&ReaderSummary>,
    ) -> ReaderOutcome {
        let (mut hot_cached_min_bytes, mut rates) = (None::<u64>, Vec::new());
        for (floor, round_rates) in rounds {
            hot_cached_min_bytes = match (hot_cached_min_bytes, floor) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            rates.extend_from_slice(round_rates);
        }
        let reader = ReaderSummary::of(&rates);
        let solo_median = solo.map_or(0.0, |s| s.median_reads_per_s);
        let pct = |v: f64| (solo_median > 0.0).then(|| 100.0 * v / solo_median);
        ReaderOutcome {
            hot_cached_min_bytes,
            reader,
            reader_median_pct_of_solo: reader.and_then(|r| pct(r.median_reads_per_s)),
            reader_worst_pct_of_solo: reader.and_then(|r| pct(r.worst_reads_per_s)),
        }
    }
}

#[derive(Serialize)]
struct ModeSummary {
    /// "buffered write", "ubio read", "odirect write", ...
    name: String,
    mode: Mode,
    /// The mode's family: "buffered", "ubio", "dontcache" or "odirect".
    side: &'static str,
    op: Op,
    /// What moved the data: `std` for plain buffered I/O, the backend ubio
    /// chose, `RWF_DONTCACHE` or `O_DIRECT`.
    backend: String,
    mb_per_s: Summary,
    /// Median throughput over buffered I/O's median for the same operation,
    /// when buffered is among the modes.
    speed_vs_buffered: Option<f64>,
    /// CPU seconds of the streaming process per round (getrusage: user,
    /// system, and their sum).
    cpu_user_secs: Summary,
    cpu_sys_secs: Summary,
    cpu_secs: Summary,
    /// Busy CPU seconds of the whole machine while the streamer ran (all
    /// CPUs; includes the hot-file reader, flusher and reclaim threads).
    machine_busy_secs: Summary,
    /// Highest over the rounds.
    peak_cached_bytes: u64,
    peak_dirty_writeback_bytes: u64,
    #[serde(flatten)]
    hot_reader: ReaderOutcome,
}

#[derive(Serialize)]
struct Phase {
    round: u32,
    name: String,
    result: StreamResult,
    peak_cached_bytes: u64,
    peak_dirty_writeback_bytes: u64,
    /// Page-cache samples taken during the phase.
    samples: u64,
    /// Busy CPU time of the whole machine from the streamer's start to its
    /// exit (/proc/stat).
    machine_busy: CpuTimes,
    reader: Option<ReaderSummary>,
    /// The reader's per-second rates (overlapping one-second windows).
    reader_rates: Vec<f64>,
    /// The least of the hot file seen cached during the phase.
    hot_cached_min_bytes: Option<u64>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    // On SIGINT/SIGTERM/SIGHUP, ubio_bench::cleanup's thread removes the
    // cgroup (killing the workers) and the files, then exits with 128 + the
    // signal. Meanwhile this thread sees its workers die and fails: that
    // error is a consequence of the signal, not news, so let the cleanup
    // thread finish and exit instead of reporting it.
    let caught = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(sig, Arc::clone(&caught), sig as usize)?;
    }
    let result = demo(args);
    let sig = caught.load(Ordering::SeqCst);
    if result.is_err() && sig != 0 {
        std::thread::sleep(Duration::from_secs(30));
        return Ok(ExitCode::from(128 + sig as u8));
    }
    result
}

fn demo(args: Args) -> Result<ExitCode> {
    let started = Instant::now();
    let dataset = args.dataset.unwrap_or(args.limit.saturating_mul(4));
    let victim_on = !args.no_victim;
    let hot = if victim_on {
        args.hot.unwrap_or(args.limit / 2)
    } else {
        0
    };
    if args.copy {
        return copy::demo(args, started, dataset, hot);
    }
    let modes = parse_modes(
        args.modes.as_deref().unwrap_or("buffered,ubio"),
        args.backend,
    )?;
    validate(&args, &modes, dataset, hot)?;
    let mut warnings = Vec::new();
    if dataset <= args.limit {
        warnings.push(format!(
            "the dataset ({}) fits in the cgroup limit ({}): buffered I/O has no reason to push the hot file out; \
             use a --dataset several times --limit",
            size::human(dataset),
            size::human(args.limit)
        ));
    }
    let (dir, work, probe) = set_up(&args, dataset, hot, false)?;
    let progress = Progress::new(started);
    let hot_path = work.file("hot");
    let data_path = work.file("dataset");
    fs::File::create(&data_path).with_context(|| format!("create {}", data_path.display()))?;
    ensure_cachestat(&data_path)?;
    // Fail now, not after the warm-up, if a mode cannot work here.
    for &mode in &modes {
        workload::check_mode(mode, &data_path)
            .with_context(|| format!("--modes {mode} in {}", work.path.display()))?;
    }

    let cg = MemCgroup::create("ubio-demo", args.limit).context("make the demo's memory cgroup")?;
    let (cg_path, cg_version) = (cg.path().to_path_buf(), cg.version());
    progress.line(&format!(
        "made memory cgroup {} (limit {})",
        cg.path().display(),
        mib(cg.limit_bytes())
    ));
    let modes_list: Vec<String> = modes.iter().map(Mode::to_string).collect();
    progress.line(&format!(
        "files in {} ({}, Linux {}): dataset {}, {}; modes {}; {} round(s)",
        work.path.display(),
        probe.fs.fs_type,
        probe.kernel,
        size::human(dataset),
        if victim_on {
            format!("hot file {}", mib(hot))
        } else {
            "no hot-file reader".to_owned()
        },
        modes_list.join(", "),
        args.rounds
    ));

    let exe = std::env::current_exe().context("find the ubio binary for the worker processes")?;
    let mut reader = victim_on
        .then(|| start_reader(&cg, &exe, &hot_path, hot, &progress, &mut warnings))
        .transpose()?;

    // Warm-up: fresh memory is slow to touch the first time on some VMs;
    // cycle the cgroup's memory once before timing anything.
    let spec = |op, mode| StreamSpec {
        path: data_path.clone(),
        op,
        mode,
        bytes: dataset,
        block: DEFAULT_BLOCK,
    };
    let warm = progress.phase(
        "warm-up: buffered write of the dataset (not timed)",
        dataset,
        |_| run_streamer(&cg, &exe, &spec(Op::Write, Mode::Buffered)),
    )?;
    progress.line(&format!("warm-up done ({:.0} MB/s)", warm.0.mb_per_s));
    settle(&data_path, "dataset", reader.as_mut(), &mut warnings)?;

    // The reader alone.
    let mut solo = None;
    if let Some(reader) = &reader {
        solo = Some(reader_alone(reader, args.solo_secs, &progress)?);
    }

    let mut phases = Vec::new();
    for round in 1..=args.rounds {
        for op in OPS {
            for &mode in &modes {
                let name = format!("{mode} {op}");
                settle(&data_path, "dataset", reader.as_mut(), &mut warnings)?;
                let sampler = ResidencySampler::start(&data_path, SAMPLE_EVERY)?;
                let floor = match victim_on {
                    true => Some(CachedFloor::start(&hot_path, SAMPLE_EVERY)?),
                    false => None,
                };
                let label = format!("round {round}/{}: {name}", args.rounds);
                let result = progress.phase(&label, dataset, |_| {
                    run_streamer(&cg, &exe, &spec(op, mode))
                });
                let peaks = sampler.finish()?;
                let hot_floor = floor.map(CachedFloor::finish).transpose()?;
                let (result, machine_busy) = result?;
                let rates = reader_rates(
                    reader.as_ref(),
                    result.start_mono_secs,
                    result.end_mono_secs,
                );
                let phase = Phase {
                    round,
                    name,
                    peak_cached_bytes: peaks.max_cached * sys::page_size(),
                    peak_dirty_writeback_bytes: peaks.max_dirty_writeback * sys::page_size(),
                    samples: peaks.samples,
                    machine_busy,
                    reader: ReaderSummary::of(&rates),
                    reader_rates: rates,
                    hot_cached_min_bytes: hot_floor.map(|p| p * sys::page_size()),
                    result,
                };
                progress.line(&phase_line(&label, &phase));
                phases.push(phase);
            }
        }
    }

    tear_down(reader, cg, work, &mut warnings)?;

    let summaries = summarize(&modes, &phases, solo.as_ref());
    let mut conclusion = conclude(&summaries, args.limit, hot);
    if victim_on && summaries.iter().any(|m| m.hot_reader.reader.is_none()) {
        warnings
            .push("some phases were too short for the reader to report from inside them".into());
    }
    let wall = started.elapsed().as_secs_f64();
    conclusion.push(format!(
        "{} round(s) in {wall:.0} s; the cgroup and the files it made are removed.",
        args.rounds
    ));
    let report = Report {
        config: Config {
            limit_bytes: args.limit,
            dataset_bytes: dataset,
            hot_bytes: hot,
            rounds: args.rounds,
            block_bytes: DEFAULT_BLOCK,
            modes,
            victim: victim_on,
            dir,
            filesystem: probe.fs.fs_type.clone(),
            kernel: probe.kernel.clone(),
            ubio_backend_requested: args.backend,
            cgroup: cg_path,
            cgroup_version: cg_version,
        },
        solo,
        modes: summaries,
        phases,
        conclusion,
        warnings,
        wall_seconds: wall,
    };
    print_report(args.json, &render_table(&report), &report)?;
    Ok(ExitCode::SUCCESS)
}

/// The table on stdout; with `json`, the JSON report on stdout and the table
/// on stderr, best effort (as progress does), so one run gives both.
fn print_report(json: bool, table: &str, report: &impl Serialize) -> Result<()> {
    if json {
        let _ = write!(std::io::stderr(), "{table}");
        crate::out::print_json(report)?;
    } else {
        crate::out::print(table)?;
    }
    Ok(())
}

/// Starts the hot-file reader in the cgroup: writes the hot file and drops
/// it, so that the reader's first read-through brings it in and charges it
/// to the cgroup, then waits for that read-through.
fn start_reader(
    cg: &MemCgroup,
    exe: &Path,
    hot_path: &Path,
    hot: u64,
    progress: &Progress,
    warnings: &mut Vec<String>,
) -> Result<VictimClient> {
    write_file(hot_path, hot)?;
    drop_cached(hot_path)?;
    let mut cmd = worker_command(
        exe,
        &Job::Victim {
            path: hot_path.to_path_buf(),
            tick: victim::DEFAULT_TICK,
        },
    );
    cmd.stdin(Stdio::piped());
    let mut client = VictimClient::new(cg.spawn(&mut cmd)?)?;
    let ready = client.wait_ready(WARM_TIMEOUT)?;
    let hot_cached = cached_bytes(hot_path)?;
    progress.line(&format!(
        "hot-file reader started in the cgroup; it read {} in {:.2} s, {} of it is cached",
        size::human(ready.bytes),
        ready.seconds,
        size::human(hot_cached)
    ));
    if hot_cached < hot / 10 * 9 {
        warnings.push(format!(
            "only {} of the {} hot file stayed cached after the reader read it: the limit may be too small for it",
            size::human(hot_cached),
            size::human(hot)
        ));
    }
    Ok(client)
}

/// The reader's speed with nothing else running, over `solo_secs`.
fn reader_alone(
    reader: &VictimClient,
    solo_secs: f64,
    progress: &Progress,
) -> Result<ReaderSummary> {
    let from = monotonic_secs();
    progress.phase(
        &format!("hot-file reader alone for {solo_secs:.0} s"),
        0,
        |_| {
            std::thread::sleep(Duration::from_secs_f64(solo_secs));
            Ok(())
        },
    )?;
    let to = monotonic_secs();
    wait_for_ticks(reader, to);
    let s = ReaderSummary::of(&per_second_rates(&reader.ticks(), from, to))
        .context("the hot-file reader reported nothing while running alone")?;
    progress.line(&format!(
        "hot-file reader alone: {} reads/s (worst second {})",
        kilo(s.median_reads_per_s),
        kilo(s.worst_reads_per_s)
    ));
    Ok(s)
}

/// The reader's reads per second between `from` and `to` (monotonic
/// seconds); empty without a reader.
fn reader_rates(reader: Option<&VictimClient>, from: f64, to: f64) -> Vec<f64> {
    match reader {
        Some(reader) => {
            wait_for_ticks(reader, to);
            per_second_rates(&reader.ticks(), from, to)
        }
        None => Vec::new(),
    }
}

/// Stops the reader (an exit other than success becomes a warning), then
/// removes the cgroup and the work directory.
fn tear_down(
    reader: Option<VictimClient>,
    cg: MemCgroup,
    work: WorkDir,
    warnings: &mut Vec<String>,
) -> Result<()> {
    if let Some(reader) = reader {
        let status = reader.stop(Duration::from_secs(5))?;
        if !status.success() {
            warnings.push(format!("the hot-file reader exited with {status}"));
        }
    }
    drop(cg);
    work.remove()
}

/// The checks before anything is made (room in --dir, root), then the
/// signal handler and the work directory. Returns --dir made absolute, the
/// work directory and what it is on.
fn set_up(
    args: &Args,
    dataset: u64,
    hot: u64,
    copy: bool,
) -> Result<(PathBuf, WorkDir, ubio::Probe)> {
    let dir = args
        .dir
        .canonicalize()
        .with_context(|| format!("--dir {}", args.dir.display()))?;
    ensure_room(&dir, dataset, hot, copy)?;
    ensure_root(if copy { "copies" } else { "streams" })?;
    cleanup::install_signal_handler()?;
    let work = WorkDir::create(&dir)?;
    let probe = ubio::probe_path(&work.path)?;
    Ok((dir, work, probe))
}

/// Fails unless `dir` has room for the dataset (with `copy`, the source and
/// its copy, `dataset` bytes each), the hot file and a margin.
fn ensure_room(dir: &Path, dataset: u64, hot: u64, copy: bool) -> Result<()> {
    let files = if copy { 2 } else { 1 };
    let need = files * dataset + hot + SPACE_MARGIN;
    let free = workload::available_bytes(dir)?;
    if free >= need {
        return Ok(());
    }
    let dataset = size::human(dataset);
    let (demo, data, smaller) = if copy {
        (
            "the copy demo",
            format!("source and copy {dataset} each"),
            "--dataset",
        )
    } else {
        (
            "the demo",
            format!("dataset {dataset}"),
            "--limit/--dataset",
        )
    };
    bail!(
        "not enough free space in {}: {demo} needs {} ({} + hot file {} + {} margin) and {} is free; \
         point --dir at a filesystem with more room or use a smaller {smaller}",
        dir.display(),
        size::human(need),
        data,
        size::human(hot),
        size::human(SPACE_MARGIN),
        size::human(free)
    );
}

/// Fails unless root, who can make the cgroup that runs the `what`.
fn ensure_root(what: &str) -> Result<()> {
    if !ubio_bench::is_root() {
        bail!("ubio demo needs root: it makes a memory cgroup beneath its own and runs the {what} in it");
    }
    Ok(())
}

/// Fails early where cachestat() (Linux 6.5+), which every page-cache
/// figure of the demo comes from, does not work on `path`.
fn ensure_cachestat(path: &Path) -> Result<()> {
    file_cachestat(path).with_context(|| {
        format!(
            "cachestat() on {} (needs Linux 6.5+): the demo measures the page cache with it",
            path.display()
        )
    })?;
    Ok(())
}

fn validate(args: &Args, modes: &[Mode], dataset: u64, hot: u64) -> Result<()> {
    if args.limit < 16 << 20 {
        bail!(
            "--limit {} is too small: use at least 16M",
            size::human(args.limit)
        );
    }
    if !args.no_victim {
        if hot < 1 << 20 {
            bail!("--hot {} is too small: use at least 1M", size::human(hot));
        }
        if hot > args.limit / 4 * 3 {
            bail!(
                "--hot {} does not fit in --limit {} with room to spare: keep it under three quarters of the limit",
                size::human(hot),
                size::human(args.limit)
            );
        }
    }
    if dataset < DEFAULT_BLOCK {
        bail!(
            "--dataset {} is too small: use at least 1M",
            size::human(dataset)
        );
    }
    if modes.contains(&Mode::Odirect) && !dataset.is_multiple_of(DEFAULT_BLOCK) {
        bail!(
            "--dataset {} is not a whole number of MiB: odirect writes whole, aligned 1 MiB requests",
            size::human(dataset)
        );
    }
    if !(args.solo_secs > 0.0 && args.solo_secs <= 60.0) {
        bail!("--solo-secs must be in (0, 60]");
    }
    Ok(())
}

/// The demo's directory and its files; removed (files first, then the
/// directory, never anything else) on drop, error and Ctrl-C.
struct WorkDir {
    path: PathBuf,
    guard: Option<CleanupGuard>,
}

const WORK_FILES: [&str; 3] = ["hot", "dataset", "copy"];

impl WorkDir {
    fn create(parent: &Path) -> Result<WorkDir> {
        let path = (0..100)
            .map(|n| parent.join(format!("ubio-demo-{}-{n}", std::process::id())))
            .find(|p| match fs::create_dir(p) {
                Ok(()) => true,
                Err(_) => false,
            })
            .with_context(|| {
                format!(
                    "cannot make a directory for the demo in {}",
                    parent.display()
                )
            })?;
        let p = path.clone();
        let guard = cleanup::register(format!("remove {}", path.display()), move || {
            if let Err(e) = remove_work_dir(&p) {
                let _ = writeln!(std::io::stderr(), "ubio demo: {e}");
            }
        });
        Ok(WorkDir {
            path,
            guard: Some(guard),
        })
    }

    fn file(&self, name: &str) -> PathBuf {
        debug_assert!(WORK_FILES.contains(&name));
        self.path.join(name)
    }

    /// Removes it now and reports failure.
    fn remove(mut self) -> Result<()> {
        drop(self.guard.take());
        if self.path.exists() {
            bail!("could not remove {}", self.path.display());
        }
        Ok(())
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        drop(self.guard.take());
    }
}

fn remove_work_dir(dir: &Path) -> std::io::Result<()> {
    for name in WORK_FILES {
        match fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("remove {}: {e}", dir.join(name).display()),
                ))
            }
            _ => {}
        }
    }
    fs::remove_dir(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("remove {}: {e}", dir.display())))
}

fn worker_command(exe: &Path, job: &Job) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("__worker")
        .args(job.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    cmd
}

/// The running streamer's pid (0: none), for the progress bar.
static STREAMER_PID: AtomicU32 = AtomicU32::new(0);

/// Runs one stream in a worker process inside the cgroup; returns its
/// result and the whole machine's busy CPU time from spawn to exit.
fn run_streamer(cg: &MemCgroup, exe: &Path, spec: &StreamSpec) -> Result<(StreamResult, CpuTimes)> {
    let before = cpu::machine_busy_times()?;
    let child = cg.spawn(&mut worker_command(exe, &Job::Stream(spec.clone())))?;
    STREAMER_PID.store(child.id(), Ordering::Relaxed);
    let result = worker::finish_stream(child);
    STREAMER_PID.store(0, Ordering::Relaxed);
    let busy = cpu::machine_busy_times()?.since(before);
    Ok((
        result.with_context(|| format!("{} {}", spec.mode, spec.op))?,
        busy,
    ))
}

/// Between phases: make the dataset durable and drop its pages (the next
/// phase starts cold), and have the reader (if any) bring its hot file back in.
/// `what` names `data` in the warning when pages stay ("dataset", "source").
fn settle(
    data: &Path,
    what: &str,
    reader: Option<&mut VictimClient>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let left = drop_cached(data)?;
    if left > 256 {
        warnings.push(format!(
            "{} of the {what} stayed cached after fsync + fadvise(DONTNEED)",
            size::human(left * sys::page_size())
        ));
    }
    if let Some(reader) = reader {
        reader.warm(WARM_TIMEOUT).context("the hot-file reader")?;
    }
    Ok(())
}

/// fsync, then fadvise(DONTNEED) the whole file; returns the pages still cached.
fn drop_cached(path: &Path) -> Result<u64> {
    let f = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.sync_all()
        .with_context(|| format!("fsync {}", path.display()))?;
    sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed)
        .with_context(|| format!("fadvise {}", path.display()))?;
    Ok(sys::cachestat(f.as_fd(), 0, 0)?.nr_cache)
}

fn cached_bytes(path: &Path) -> Result<u64> {
    Ok(file_cachestat(path)
        .with_context(|| format!("cachestat {}", path.display()))?
        .nr_cache
        * sys::page_size())
}

fn write_file(path: &Path, bytes: u64) -> Result<()> {
    let mut f = fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut buf = vec![0u8; DEFAULT_BLOCK as usize];
    workload::fill(&mut buf);
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])
            .with_context(|| format!("write {}", path.display()))?;
        done += n as u64;
    }
    f.sync_all()
        .with_context(|| format!("fsync {}", path.display()))?;
    Ok(())
}

/// The reader reports every 100 ms through a pipe: wait (briefly) until a
/// tick ending after `t` has arrived, so the last one inside the phase is in.
fn wait_for_ticks(reader: &VictimClient, t: f64) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if reader.ticks().last().is_some_and(|k| k.t1 >= t) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn summarize(modes: &[Mode], phases: &[Phase], solo: Option<&ReaderSummary>) -> Vec<ModeSummary> {
    let mut out: Vec<ModeSummary> = Vec::new();
    for op in OPS {
        for &mode in modes {
            let these: Vec<&Phase> = phases
                .iter()
                .filter(|p| p.result.mode == mode && p.result.op == op)
                .collect();
            let of = |f: &dyn Fn(&Phase) -> f64| {
                Summary::of(&these.iter().map(|p| f(p)).collect::<Vec<f64>>())
            };
            let (Some(mb_per_s), Some(cpu_user_secs), Some(cpu_sys_secs), Some(cpu_secs)) = (
                of(&|p| p.result.mb_per_s),
                of(&|p| p.result.cpu_user_secs),
                of(&|p| p.result.cpu_sys_secs),
                of(&|p| p.result.cpu_secs()),
            ) else {
                continue;
            };
            let Some(machine_busy_secs) = of(&|p| p.machine_busy.total_secs()) else {
                continue;
            };
            let mut backends: Vec<&str> = these.iter().map(|p| p.result.backend.as_str()).collect();
            backends.dedup();
            out.push(ModeSummary {
                name: format!("{mode} {op}"),
                mode,
                side: mode.family(),
                op,
                backend: backends.join("/"),
                mb_per_s,
                speed_vs_buffered: None,
                cpu_user_secs,
                cpu_sys_secs,
                cpu_secs,
                machine_busy_secs,
                peak_cached_bytes: these.iter().map(|p| p.peak_cached_bytes).max().unwrap_or(0),
                peak_dirty_writeback_bytes: these
                    .iter()
                    .map(|p| p.peak_dirty_writeback_bytes)
                    .max()
                    .unwrap_or(0),
                hot_reader: ReaderOutcome::of(
                    these
                        .iter()
                        .map(|p| (p.hot_cached_min_bytes, p.reader_rates.as_slice())),
                    solo,
                ),
            });
        }
    }
    for i in 0..out.len() {
        let base = out
            .iter()
            .find(|m| m.mode == Mode::Buffered && m.op == out[i].op)
            .map(|m| m.mb_per_s.median)
            .filter(|&b| b > 0.0);
        out[i].speed_vs_buffered = base.map(|b| out[i].mb_per_s.median / b);
    }
    out
}

/// Plain-English findings, each computed from the numbers: every mode
/// against buffered I/O, for writes and for reads.
fn conclude(modes: &[ModeSummary], limit: u64, hot: u64) -> Vec<String> {
    let hot_pct = |m: &ModeSummary| {
        m.hot_reader
            .hot_cached_min_bytes
            .map(|b| 100.0 * b as f64 / hot.max(1) as f64)
    };
    let mut out = Vec::new();
    let mut notes: Vec<(bool, String)> = Vec::new();
    let (mut hot_kept, mut compared) = (true, 0);
    for op in OPS {
        let (verb, when) = if op == Op::Write {
            ("Writing", "when writing")
        } else {
            ("Reading", "when reading")
        };
        let of_op: Vec<&ModeSummary> = modes.iter().filter(|m| m.op == op).collect();
        let base = of_op.iter().find(|m| m.mode == Mode::Buffered);
        let others: Vec<&&ModeSummary> =
            of_op.iter().filter(|m| m.mode != Mode::Buffered).collect();
        let Some(b) = base else {
            if !of_op.is_empty() {
                let each: Vec<String> = of_op
                    .iter()
                    .map(|m| {
                        format!(
                            "{} peaked at {} of page cache ({:.0} MB/s)",
                            mode_label(m.mode),
                            mib(m.peak_cached_bytes),
                            m.mb_per_s.median
                        )
                    })
                    .collect();
                out.push(format!(
                    "{verb} (no buffered baseline in --modes): {}.",
                    each.join("; ")
                ));
            }
            continue;
        };
        let mut s = format!(
            "{verb}: buffered I/O filled the page cache with up to {} of the dataset ({:.0}% of the {} limit)",
            mib(b.peak_cached_bytes),
            100.0 * b.peak_cached_bytes as f64 / limit as f64,
            mib(limit),
        );
        if others.is_empty() {
            s.push_str(&format!(" at {:.0} MB/s", b.mb_per_s.median));
        }
        for u in &others {
            let ratio = u.mb_per_s.median / b.mb_per_s.median;
            let speed = if ratio >= 1.1 {
                format!("and was {ratio:.1}x as fast")
            } else if ratio <= 0.9 {
                format!("but was {:.0}% slower", 100.0 * (1.0 - ratio))
            } else {
                "at about the same speed".to_owned()
            };
            s.push_str(&format!(
                "; {} kept it to {} {speed} ({:.0} vs {:.0} MB/s)",
                mode_label(u.mode),
                mib(u.peak_cached_bytes),
                u.mb_per_s.median,
                b.mb_per_s.median
            ));
        }
        s.push('.');
        if let Some(hb) = hot_pct(b) {
            s.push_str(&if hb >= 99.5 {
                " Next to buffered I/O, all of the hot file stayed cached".to_owned()
            } else {
                format!(
                    " Next to buffered I/O, as little as {hb:.0}% of the hot file stayed cached"
                )
            });
            let worst_all = b.hot_reader.reader_worst_pct_of_solo.is_some()
                && others
                    .iter()
                    .all(|u| u.hot_reader.reader_worst_pct_of_solo.is_some());
            if worst_all {
                s.push_str(&format!(
                    " and its reader's worst second was {} of its speed alone",
                    percent(b.hot_reader.reader_worst_pct_of_solo.unwrap_or(0.0))
                ));
            }
            for u in &others {
                let hu = hot_pct(u).unwrap_or(0.0);
                let u_hot = if hu >= 99.5 {
                    "all of it stayed cached".to_owned()
                } else {
                    format!("{hu:.0}% did")
                };
                match (worst_all, u.hot_reader.reader_worst_pct_of_solo) {
                    (true, Some(uw)) => s.push_str(&format!(
                        "; next to {}, {u_hot} and the worst second was {}",
                        mode_label(u.mode),
                        percent(uw)
                    )),
                    _ => s.push_str(&format!("; next to {}, {u_hot}", mode_label(u.mode))),
                }
            }
            s.push('.');
        }
        out.push(s);
        if others.iter().any(|u| u.side == "ubio") {
            compared += 1;
        }
        for u in &others {
            let is_ubio = u.side == "ubio";
            let label = mode_label(u.mode);
            let ratio = u.mb_per_s.median / b.mb_per_s.median;
            if let (Some(bw), Some(uw)) = (
                b.hot_reader.reader_worst_pct_of_solo,
                u.hot_reader.reader_worst_pct_of_solo,
            ) {
                if uw + 5.0 < bw {
                    notes.push((
                        is_ubio,
                        format!(
                            "{when}, the hot-file reader did worse next to {label} than next to buffered I/O \
                             (worst second {uw:.0}% vs {bw:.0}% of its speed alone)."
                        ),
                    ));
                }
            }
            if let (Some(hu), Some(hb)) = (hot_pct(u), hot_pct(b)) {
                if is_ubio {
                    hot_kept &= hu >= 95.0;
                }
                if hu + 5.0 < hb {
                    notes.push((
                        is_ubio,
                        format!(
                            "{when}, less of the hot file stayed cached next to {label} ({hu:.0}%) than next to buffered I/O ({hb:.0}%)."
                        ),
                    ));
                }
            }
            if u.peak_cached_bytes * 2 > b.peak_cached_bytes {
                notes.push((
                    is_ubio,
                    format!(
                        "{when}, {label}'s page-cache footprint ({}) was not much smaller than buffered I/O's ({}).",
                        mib(u.peak_cached_bytes),
                        mib(b.peak_cached_bytes)
                    ),
                ));
            }
            if ratio <= 0.8 {
                notes.push((
                    is_ubio,
                    format!(
                        "{when}, {label} was {:.0}% slower than buffered I/O.",
                        100.0 * (1.0 - ratio)
                    ),
                ));
            }
        }
    }
    // Notes in the order: everything about one op before the next, as found.
    if compared == 2 && !notes.iter().any(|(is_ubio, _)| *is_ubio) {
        let neighbour = if hot == 0 {
            ".".to_owned()
        } else {
            format!(
                ", and the process next to it {}kept more of its speed.",
                if hot_kept {
                    "kept its hot file in memory and "
                } else {
                    ""
                }
            )
        };
        out.push(format!(
            "So: ubio streamed the dataset through a few MiB of page cache instead of filling the cgroup{neighbour}"
        ));
    }
    out.extend(notes.into_iter().map(|(_, mut n)| {
        n[..1].make_ascii_uppercase();
        format!("Note: {n}")
    }));
    out
}

/// The human-readable report: setup, the table, conclusion and warnings.
fn render_table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let c = &r.config;
    let victim = c.victim;
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "ubio demo: a {} dataset written and read in {} MiB requests inside a {} memory cgroup,",
        size::human(c.dataset_bytes),
        c.block_bytes >> 20,
        mib(c.limit_bytes)
    );
    if victim {
        let _ = writeln!(
            o,
            "while another process in the same cgroup re-reads a {} hot file ({} on {}, Linux {}).",
            mib(c.hot_bytes),
            c.dir.display(),
            c.filesystem,
            c.kernel
        );
    } else {
        let _ = writeln!(
            o,
            "with no other process in it ({} on {}, Linux {}).",
            c.dir.display(),
            c.filesystem,
            c.kernel
        );
    }
    for &mode in &c.modes {
        match mode {
            Mode::Ubio(_) => {
                let backend = r
                    .modes
                    .iter()
                    .find(|m| m.mode == mode)
                    .map(|m| m.backend.clone())
                    .unwrap_or_default();
                let reason = r
                    .phases
                    .iter()
                    .find(|p| p.result.mode == mode)
                    .map(|p| p.result.reason.clone())
                    .unwrap_or_default();
                let _ = writeln!(o, "{mode} backend: {backend} ({reason}).");
            }
            Mode::Dontcache => {
                let _ = writeln!(
                    o,
                    "dontcache: preadv2/pwritev2 with RWF_DONTCACHE, straight to the kernel (no ubio)."
                );
            }
            Mode::Odirect => {
                let _ = writeln!(
                    o,
                    "odirect: O_DIRECT, one {} MiB request at a time (no ubio).",
                    c.block_bytes >> 20
                );
            }
            Mode::Buffered => {}
        }
    }
    let _ = writeln!(
        o,
        "Throughput: median of {} round(s) (min-max). CPU: seconds of the streaming process (median).{}",
        c.rounds,
        if victim {
            " Reader: reads/s and % of its speed alone."
        } else {
            ""
        }
    );
    let _ = writeln!(o);
    let w = r
        .modes
        .iter()
        .map(|m| m.name.len())
        .chain([15])
        .max()
        .unwrap_or(15);
    let row = |o: &mut String, cols: [&str; 10]| {
        let [a, b, c, d, e, u, s, f, g, h] = cols;
        table::push_line(
            o,
            format!("{a:<w$} {b:>6} {c:>12}  {d:>8} {e:>8}  {u:>5} {s:>5}"),
            victim.then(|| format!("  {f:>8}  {g:>11} {h:>11}")),
        );
    };
    table::push_line(
        &mut o,
        format!(
            "{:<w$} {:^19}  {:^17}  {:^11}",
            "", "throughput MB/s", "dataset cache", "CPU s"
        ),
        victim.then(|| format!("  {:>8}  {:^23}", "hot file", "hot-file reader")),
    );
    row(
        &mut o,
        [
            "mode",
            "median",
            "(min-max)",
            "peak",
            "dirty+wb",
            "usr",
            "sys",
            "cached",
            "reads/s",
            "worst sec",
        ],
    );
    for m in &r.modes {
        let [hot, med, worst] = table::reader_columns(&m.hot_reader, c.hot_bytes);
        let [median, range] = table::speed_cells(&m.mb_per_s);
        row(
            &mut o,
            [
                &m.name,
                &median,
                &range,
                &mib(m.peak_cached_bytes),
                &mib(m.peak_dirty_writeback_bytes),
                &secs(m.cpu_user_secs.median),
                &secs(m.cpu_sys_secs.median),
                &hot,
                &med,
                &worst,
            ],
        );
    }
    if let Some(solo) = &r.solo {
        let (med, worst) = table::solo_cells(solo);
        row(
            &mut o,
            ["reader alone", "", "", "", "", "", "", "", &med, &worst],
        );
    }
    table::push_findings(&mut o, &r.conclusion, &r.warnings);
    o
}

/// Word-wraps `s` at `width`, indenting continuation lines.
fn wrap(s: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in s.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_owned();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// "37%", and "<1%" for what would round to 0% but is not nothing.
fn percent(p: f64) -> String {
    if p > 0.0 && p < 0.5 {
        "<1%".to_owned()
    } else {
        format!("{p:.0}%")
    }
}

/// CPU seconds: two decimals under 10 s, one above.
fn secs(s: f64) -> String {
    if s < 9.995 {
        format!("{s:.2}")
    } else {
        format!("{s:.1}")
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}

/// 141234 -> "141k", 9876 -> "9.9k", 512 -> "512".
fn kilo(v: f64) -> String {
    if v >= 99_950.0 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn phase_line(label: &str, p: &Phase) -> String {
    let reader = match (p.reader, p.hot_cached_min_bytes) {
        (Some(r), _) => reader_note(&r),
        (None, Some(_)) => "; reader: no full sample".into(),
        (None, None) => String::new(),
    };
    format!(
        "{label}: {:.0} MB/s ({}); dataset cache peak {}, dirty+wb {}; cpu {} usr + {} sys s{reader}",
        p.result.mb_per_s,
        p.result.backend,
        mib(p.peak_cached_bytes),
        mib(p.peak_dirty_writeback_bytes),
        secs(p.result.cpu_user_secs),
        secs(p.result.cpu_sys_secs)
    )
}

/// "; reader 141k reads/s, worst 9.9k": the reader's speed in a progress line.
fn reader_note(r: &ReaderSummary) -> String {
    format!(
        "; reader {} reads/s, worst {}",
        kilo(r.median_reads_per_s),
        kilo(r.worst_reads_per_s)
    )
}

struct Progress {
    started: Instant,
    tty: bool,
}

impl Progress {
    fn new(started: Instant) -> Progress {
        Progress {
            started,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn stamp(&self) -> String {
        format!("[{:>5.1}s]", self.started.elapsed().as_secs_f64())
    }

    /// Progress is best effort: a closed stderr must not stop the demo
    /// before it cleans up (eprintln! would panic).
    fn line(&self, msg: &str) {
        let _ = writeln!(std::io::stderr(), "{} {msg}", self.stamp());
    }

    /// Runs `f`, showing `label` with elapsed time (and, for `bytes` > 0, how
    /// much of it the newest worker process has moved) while it runs.
    fn phase<T>(&self, label: &str, bytes: u64, f: impl FnOnce(&Self) -> Result<T>) -> Result<T> {
        if !self.tty {
            return f(self);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (stop, label, started) = (Arc::clone(&stop), label.to_owned(), self.started);
            let since = Instant::now();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let moved = if bytes > 0 { streamer_io() } else { None };
                    let bar = match moved {
                        Some(n) => {
                            let frac = (n as f64 / bytes as f64).clamp(0.0, 1.0);
                            let full = (frac * 24.0) as usize;
                            format!(
                                " [{}{}] {:>3.0}%",
                                "#".repeat(full),
                                ".".repeat(24 - full),
                                frac * 100.0
                            )
                        }
                        None => String::new(),
                    };
                    let _ = write!(
                        std::io::stderr(),
                        "\r\x1b[K[{:>5.1}s] {label}{bar} {:.1}s",
                        started.elapsed().as_secs_f64(),
                        since.elapsed().as_secs_f64()
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
                let _ = write!(std::io::stderr(), "\r\x1b[K");
            })
        };
        let out = f(self);
        stop.store(true, Ordering::Relaxed);
        let _ = ticker.join();
        out
    }
}

/// Bytes read or written so far by the running streamer (the larger of
/// rchar and wchar in /proc/PID/io).
fn streamer_io() -> Option<u64> {
    let pid = STREAMER_PID.load(Ordering::Relaxed);
    if pid == 0 {
        return None;
    }
    let io = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(field("rchar:")?.max(field("wchar:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kilo_formats() {
        assert_eq!(kilo(141_234.0), "141k");
        assert_eq!(kilo(99_949.0), "99.9k");
        assert_eq!(kilo(9_876.0), "9.9k");
        assert_eq!(kilo(512.4), "512");
    }

    #[test]
    fn percent_formats() {
        assert_eq!(percent(37.4), "37%");
        assert_eq!(percent(0.4), "<1%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(100.0), "100%");
    }

    #[test]
    fn parses_modes() {
        let auto = BackendKind::Auto;
        assert_eq!(
            parse_modes("buffered,ubio", auto).unwrap(),
            [Mode::Buffered, Mode::Ubio(auto)]
        );
        assert_eq!(
            parse_modes(" odirect , dontcache,ubio:kernel,buffered ", auto).unwrap(),
            [
                Mode::Odirect,
                Mode::Dontcache,
                Mode::Ubio(BackendKind::Kernel),
                Mode::Buffered
            ]
        );
        // --backend applies to a bare `ubio` only.
        assert_eq!(
            parse_modes("ubio,ubio:direct", BackendKind::Emulated).unwrap(),
            [
                Mode::Ubio(BackendKind::Emulated),
                Mode::Ubio(BackendKind::Direct)
            ]
        );
        for (bad, want) in [
            ("", "empty entry"),
            ("buffered,", "empty entry"),
            ("ubio,ubio:auto", "listed twice"),
            ("buffered,direct", "unknown mode 'direct'"),
            ("ubio:fast", "unknown backend"),
        ] {
            let e = parse_modes(bad, auto).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn labels_modes() {
        assert_eq!(mode_label(Mode::Buffered), "buffered I/O");
        assert_eq!(mode_label(Mode::Ubio(BackendKind::Auto)), "ubio");
        assert_eq!(mode_label(Mode::Ubio(BackendKind::Kernel)), "ubio:kernel");
        assert_eq!(mode_label(Mode::Dontcache), "RWF_DONTCACHE");
        assert_eq!(mode_label(Mode::Odirect), "O_DIRECT");
    }

    fn summary(mode: Mode, op: Op, mb: f64, peak_mib: u64, hot_pct: u64) -> ModeSummary {
        let one = |v: f64| Summary::of(&[v]).unwrap();
        let reader = ReaderSummary {
            median_reads_per_s: 1000.0,
            worst_reads_per_s: 10.0 * hot_pct as f64,
            windows: 3,
        };
        ModeSummary {
            name: format!("{mode} {op}"),
            mode,
            side: mode.family(),
            op,
            backend: "x".into(),
            mb_per_s: one(mb),
            speed_vs_buffered: None,
            cpu_user_secs: one(0.1),
            cpu_sys_secs: one(1.0),
            cpu_secs: one(1.1),
            machine_busy_secs: one(2.0),
            peak_cached_bytes: peak_mib << 20,
            peak_dirty_writeback_bytes: 0,
            hot_reader: ReaderOutcome {
                hot_cached_min_bytes: Some((100 << 20) / 100 * hot_pct),
                reader: Some(reader),
                reader_median_pct_of_solo: Some(100.0),
                reader_worst_pct_of_solo: Some(hot_pct as f64),
            },
        }
    }

    #[test]
    fn conclusion_compares_every_mode_with_buffered() {
        let ubio = Mode::Ubio(BackendKind::Auto);
        let two = [
            summary(Mode::Buffered, Op::Write, 500.0, 400, 10),
            summary(ubio, Op::Write, 1000.0, 16, 100),
            summary(Mode::Buffered, Op::Read, 1000.0, 400, 20),
            summary(ubio, Op::Read, 1000.0, 16, 100),
        ];
        let c = conclude(&two, 512 << 20, 100 << 20);
        assert_eq!(c.len(), 3, "{c:#?}");
        assert!(c[0].starts_with("Writing: buffered I/O filled the page cache with up to 400 MiB"));
        assert!(
            c[0].contains("; ubio kept it to 16 MiB and was 2.0x as fast (1000 vs 500 MB/s)."),
            "{}",
            c[0]
        );
        assert!(
            c[1].contains("ubio kept it to 16 MiB at about the same speed"),
            "{}",
            c[1]
        );
        assert!(
            c[1].contains("worst second was 20% of its speed alone; next to ubio, all of it stayed cached and the worst second was 100%."),
            "{}",
            c[1]
        );
        assert!(c[2].starts_with("So: ubio streamed"), "{}", c[2]);

        let mut four: Vec<ModeSummary> = two.into_iter().collect();
        four.push(summary(Mode::Dontcache, Op::Write, 2000.0, 300, 5));
        four.push(summary(Mode::Odirect, Op::Read, 700.0, 0, 100));
        let c = conclude(&four, 512 << 20, 100 << 20);
        assert!(
            c[0].contains("; RWF_DONTCACHE kept it to 300 MiB and was 4.0x as fast"),
            "{}",
            c[0]
        );
        assert!(
            c[1].contains("; O_DIRECT kept it to 0 MiB but was 30% slower"),
            "{}",
            c[1]
        );
        assert!(
            c[2].starts_with("So: ubio"),
            "notes about other modes do not hide it: {c:#?}"
        );
        let notes: Vec<&String> = c.iter().filter(|l| l.starts_with("Note:")).collect();
        assert_eq!(notes.len(), 2, "{notes:#?}");
        assert!(notes
            .iter()
            .any(|n| n.contains("RWF_DONTCACHE's page-cache footprint")));
        assert!(notes.iter().any(|n| n.contains("O_DIRECT was 30% slower")));
    }

    #[test]
    fn secs_formats() {
        assert_eq!(secs(0.054), "0.05");
        assert_eq!(secs(9.99), "9.99");
        assert_eq!(secs(12.34), "12.3");
    }

    #[test]
    fn wraps_with_indent() {
        assert_eq!(wrap("a bb ccc dddd", 6, "  "), "a bb\n  ccc\n  dddd");
        assert_eq!(wrap("short", 80, "  "), "short");
    }
}
