//! The whole benchmark, hyperfine-style phases:
//!
//! 1. prepare: make the target (a subdirectory, or a loop filesystem),
//!    check free space, leave out the modes that cannot run here (with a
//!    warning each), make the memory cgroup, write the dataset (untimed, in
//!    the cgroup);
//! 2. the victim (optional): start it on a hot file that fits in the
//!    cgroup, and measure it alone;
//! 3. warm up: one untimed buffered pass of the workload, which touches the
//!    memory the runs will use (fresh VM memory is slow on first touch);
//! 4. measure: rounds x modes, each round in a new random order (seeded,
//!    see [`super::schedule`]); a backed mode first faults in and releases
//!    memory of the size its pages will take ([`crate::backing`]); before each run the
//!    dataset's own pages are dropped (fsync + POSIX_FADV_DONTNEED on our
//!    files only: the machine is shared, so never drop_caches) and the
//!    victim re-reads its hot file; each run is sampled every second and
//!    the report is rewritten after it;
//! 5. conclude: fio's cross-check (optional), the mode summaries, and the
//!    report marked complete.
//!
//! Everything made (loop device, mount, cgroup, files) is removed at the
//! end, on failure and on Ctrl-C (through [`ubio_testenv::cleanup`]).
//!
//! Under global pressure ([`Config::global_pressure`]) there is no memory
//! cgroup: a balloon ([`ubio_testenv::balloon`], held by `ubio-bench __worker
//! balloon`) takes the machine's memory down to what the run should have,
//! right after the target is made, and gives it back at the end (or on
//! failure, Ctrl-C, or the death of this process).

pub mod environment;
pub mod target;

use super::engine::data::Layout;
use super::engine::{self, EngineJob, EngineProgress, EngineResult};
use super::fio::Fio;
use super::mode::{BenchMode, WorkloadKind};
use super::sampler::{self, SystemSampler};
use super::schedule::Schedule;
use super::schema::{
    Backing, Config, GlobalPressure, PressureRecord, Report, Run, Sample, Target, VictimSolo, Workload,
};
use super::summary::{self, FastPeaks, RunInput};
use crate::clock::monotonic_secs;
use crate::cpu::CpuTimes;
use crate::page_reporting;
use crate::path_context;
use crate::stats::Summary;
use crate::victim::{self, per_second_rates};
use crate::worker::{BenchClient, Event, Job, VictimClient};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use ubio::sys::{self, Advice};
use ubio_testenv::balloon::{self, Balloon};
use ubio_testenv::cgroup::{CgroupVersion, MemCgroup};
use ubio_testenv::reclaim_trace::MemcgReclaimTrace;
use ubio_testenv::residency_sampler::ResidencySampler;

/// How long a victim may take to read its hot file through.
const WARM_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the dataset's page-cache peaks are sampled during a run.
const PEAK_EVERY: Duration = Duration::from_millis(10);
/// The longest a backed mode waits for a free page reporting pass that
/// the settle armed (its delay is about 2 s here).
const REPORTING_PASS: Duration = Duration::from_millis(2500);
/// How long a worker may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How to run a benchmark (what is measured is the [`Config`]).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The harness's own binary: workers run as `ubio-bench __worker bench
    /// JOB`, the balloon's holder as `ubio-bench __worker balloon`.
    pub worker_exe: PathBuf,
    /// The `ubio` binary that the ubio-cat, ubio-cp and ubio-run-* modes
    /// run; None where none was found (those modes are then left out).
    pub ubio_exe: Option<PathBuf>,
    /// Where the report files go (rewritten after every run); None: nowhere.
    pub out_dir: Option<PathBuf>,
    /// Run fio's version of the buffered and O_DIRECT jobs afterwards.
    pub fio: bool,
    /// One untimed buffered pass of the workload before measuring.
    pub warmup: bool,
    /// How long the victim is measured alone.
    pub victim_solo_secs: f64,
    /// For the report's environment.
    pub git_commit: Option<String>,
    /// After every run that wrote or copied the whole dataset, check
    /// (untimed) that every file holds what was written; a mismatch fails
    /// the run.
    pub verify: bool,
    /// Seed of the modes' order in every round (kept in the report).
    pub order_seed: u64,
}

impl RunOptions {
    /// Defaults around the given binaries.
    pub fn new(worker_exe: PathBuf, ubio_exe: Option<PathBuf>) -> RunOptions {
        RunOptions {
            worker_exe,
            ubio_exe,
            out_dir: None,
            fio: false,
            warmup: true,
            victim_solo_secs: 3.0,
            git_commit: None,
            verify: false,
            order_seed: super::schedule::seed_from_clock(),
        }
    }
}

/// What the runner tells its caller while it works. Every method has a
/// default that does nothing.
pub trait Progress {
    /// A phase starts or something happened ("writing the dataset").
    fn message(&self, _line: &str) {}
    /// A measured run starts: its label ("round 1/3: buffered") and the
    /// bytes it will move (unless capped by the duration).
    fn run_started(&self, _label: &str, _bytes: u64) {}
    /// A sample of the running run and its live line.
    fn sample(&self, _sample: &Sample, _line: &str) {}
    /// The run is over: its one-line result.
    fn run_finished(&self, _run: &Run, _line: &str) {}
    /// A warning (also in the report).
    fn warning(&self, _line: &str) {}
}

/// Progress that goes nowhere.
pub struct Quiet;
impl Progress for Quiet {}

/// Runs the benchmark of `config` and returns its report (also written to
/// `options.out_dir` after every run).
pub fn run(config: &Config, options: &RunOptions, progress: &dyn Progress) -> io::Result<Report> {
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    validate(config)?;
    if !ubio_testenv::is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "ubio bench needs root: it makes a memory cgroup beneath its own (and loop filesystems)",
        ));
    }
    ubio_testenv::cleanup::install_signal_handler()?;
    let w = &config.workload;
    let hot = config.victim_hot_bytes.unwrap_or(0);
    let copies = if w.kind == WorkloadKind::Copy { 2 } else { 1 };
    let need = copies * w.dataset_bytes + hot + target::SPACE_MARGIN;
    progress.message("making the target");
    let target = target::make(&config.target, need)?;
    let layout = Layout::new(&target.dir, w);
    for d in [layout.data_dir(), layout.copy_dir()] {
        std::fs::create_dir(&d).map_err(|e| path_context(e, "mkdir", &d))?;
    }

    let mut warnings = Vec::new();
    let mut modes = Vec::new();
    for &mode in &config.modes {
        match engine::check_mode(mode, w, &target.dir, options.ubio_exe.as_deref()) {
            Ok(()) => modes.push(mode),
            Err(e) => {
                let msg = format!("{mode} left out: {e}");
                progress.warning(&msg);
                warnings.push(msg);
            }
        }
    }
    if modes.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("no mode can run here: {}", warnings.join("; ")),
        ));
    }
    if let Some(limit) = config.memory_limit_bytes {
        if layout.total_bytes() <= limit {
            warnings.push(format!(
                "the dataset ({} MiB) fits in the memory limit ({} MiB): buffered I/O is not pushed into \
                 reclaim; use a --dataset several times --limit to see what a dataset larger than memory does",
                layout.total_bytes() >> 20,
                limit >> 20
            ));
        }
    }

    // Global pressure: no cgroup (kswapd reclaims for the whole machine),
    // the balloon instead.
    let (cg, balloon) = match config.global_pressure {
        None => (
            Some(MemCgroup::create("ubio-bench", config.memory_limit_bytes.unwrap_or(u64::MAX))?),
            None,
        ),
        Some(p) => (None, Some(inflate(options, p, copies * w.dataset_bytes + hot, progress)?)),
    };
    let cg_version = match cg.as_ref().map(MemCgroup::version) {
        Some(CgroupVersion::V1) => "v1",
        Some(CgroupVersion::V2) => "v2",
        None => "none (global pressure)",
    };
    let env = environment::gather(
        &target.dir,
        &target.filesystem,
        &target.device,
        cg_version,
        options.git_commit.clone(),
    );
    let mut report = Report::new(env, config.clone(), started_unix);
    report.pressure = balloon.as_ref().map(|(_, record)| record.clone());
    let balloon = balloon.map(|(b, _)| b);
    // Reclaim forced by the cgroup's limit is not in /proc/vmstat.
    let reclaim_trace = match MemcgReclaimTrace::start() {
        Ok(t) => Some(t),
        Err(e) => {
            warnings.push(format!(
                "the memory cgroup's reclaim is not counted (reclaimed pages cover kswapd and direct reclaim only): {e}"
            ));
            None
        }
    };
    report.warnings = warnings;
    let bench = Bench {
        config,
        options,
        layout: &layout,
        cg: cg.as_ref(),
        reclaim_trace: reclaim_trace.as_ref(),
        progress,
    };

    if w.kind != WorkloadKind::SeqWrite {
        progress.message(&format!(
            "writing the dataset ({} MiB, untimed)",
            layout.total_bytes() >> 20
        ));
        bench.untimed(WorkloadKind::SeqWrite)?;
    }
    let mut victim = match config.victim_hot_bytes {
        Some(hot) => Some(bench.start_victim(&target.dir.join("hot"), hot, &mut report)?),
        None => None,
    };
    if let Some(v) = &victim {
        report.victim_solo = Some(bench.victim_alone(v)?);
    }
    if options.warmup {
        bench.settle(victim.as_mut(), &mut report.warnings)?;
        progress.message("warm-up: one buffered pass of the workload (untimed)");
        bench.untimed(w.kind)?;
    }
    bench.write(&report)?;

    let mut fio = None;
    if options.fio {
        match Fio::find(w.kind) {
            Ok(f) => fio = Some(f),
            Err(e) => report.warnings.push(e),
        }
    }
    let schedule = Schedule::new(options.order_seed, &modes, config.rounds);
    progress.message(&format!(
        "order seed {} (--seed {} runs the same orders)",
        schedule.seed, schedule.seed
    ));
    report.schedule = Some(schedule.clone());
    for (round, mode) in schedule.runs() {
        bench.settle(victim.as_mut(), &mut report.warnings)?;
        let label = format!("round {round}/{}: {mode}", config.rounds);
        let run = bench.measure(
            mode,
            round,
            &label,
            victim.as_ref(),
            report.victim_solo.as_ref(),
        )?;
        if let Some(e) = &run.error {
            let msg = format!("{label} failed: {e}");
            progress.warning(&msg);
            report.warnings.push(msg);
        }
        report.runs.push(run);
        report.wall_secs = started.elapsed().as_secs_f64();
        note_balloon(balloon.as_ref(), &mut report);
        bench.write(&report)?;
        if let Some(fio) = fio.as_mut() {
            if fio.mirrors(mode) {
                bench.settle(victim.as_mut(), &mut report.warnings)?;
                progress.message(&format!("round {round}/{}: fio's {mode}", config.rounds));
                fio.run(mode, w, &layout, cg.as_ref());
            }
        }
    }
    if let Some(fio) = fio {
        let (checks, warnings) = fio.checks(&report);
        for line in &warnings {
            progress.warning(line);
        }
        report.fio = checks;
        report.warnings.extend(warnings);
    }
    if let Some(v) = victim {
        let status = v.stop(Duration::from_secs(5))?;
        if !status.success() {
            report
                .warnings
                .push(format!("the victim exited with {status}"));
        }
    }
    report.modes = summary::summarize_modes(&report);
    report.wall_secs = started.elapsed().as_secs_f64();
    note_balloon(balloon.as_ref(), &mut report);
    if let Some(p) = report.pressure.as_ref().filter(|p| p.held_at_end_bytes < p.balloon_bytes) {
        report.warnings.push(format!(
            "the balloon gave back {} MiB during the benchmark to keep {} MiB available for others: \
             the runs after that had more memory than planned ({:?})",
            (p.balloon_bytes - p.held_at_end_bytes) >> 20,
            p.floor_bytes >> 20,
            p.shrinks
        ));
    }
    report.complete = true;
    bench.write(&report)?;
    drop(balloon);
    drop(cg);
    drop(target);
    Ok(report)
}

fn validate(c: &Config) -> io::Result<()> {
    let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
    let w = &c.workload;
    if w.threads == 0 || w.files_per_thread == 0 || c.rounds == 0 || w.queue_depth == 0 {
        return bad("threads, files per thread, rounds and queue depth must be at least 1".into());
    }
    if c.modes.is_empty() {
        return bad("no modes to run".into());
    }
    if w.block_bytes < 512 || w.block_bytes > 1 << 30 {
        return bad(format!(
            "block size {} out of range (512 B to 1 GiB)",
            w.block_bytes
        ));
    }
    let files = u64::from(w.threads) * u64::from(w.files_per_thread);
    if w.dataset_bytes < files * w.block_bytes {
        return bad(format!(
            "the dataset ({} bytes) is smaller than one block per file ({files} files of {} bytes)",
            w.dataset_bytes, w.block_bytes
        ));
    }
    if let (Some(hot), Some(limit)) = (c.victim_hot_bytes, c.memory_limit_bytes) {
        if hot > limit / 4 * 3 {
            return bad(format!(
                "the victim's hot file ({} MiB) does not fit in the memory limit ({} MiB) with room to spare: keep it under three quarters",
                hot >> 20,
                limit >> 20
            ));
        }
    }
    if w.duration_secs.is_some_and(|d| d.is_nan() || d <= 0.0) {
        return bad("the duration must be positive".into());
    }
    if let Some(p) = c.global_pressure {
        if c.memory_limit_bytes.is_some() {
            return bad("global pressure runs without a memory cgroup: give no memory limit with it".into());
        }
        if let Target::Loop { backing: Backing::Shm, .. } = c.target {
            return bad(
                "global pressure with a loop device backed by /dev/shm: the backing file would take the \
                 dataset's size in memory and the balloon would give it back; use disk backing"
                    .into(),
            );
        }
        if c.victim_hot_bytes.is_some_and(|hot| hot > p.leave_bytes / 4 * 3) {
            return bad(format!(
                "the victim's hot file does not fit in the {} MiB global pressure leaves, with room to spare: \
                 keep it under three quarters",
                p.leave_bytes >> 20
            ));
        }
    }
    Ok(())
}

/// Spawns `cmd` in the memory cgroup, or, without one (global pressure),
/// as a child that the kernel kills when the spawning thread dies.
pub(crate) fn spawn_in(cg: Option<&MemCgroup>, cmd: &mut Command) -> io::Result<std::process::Child> {
    match cg {
        Some(cg) => cg.spawn(cmd),
        None => ubio_testenv::cleanup::die_with_parent(cmd)
            .spawn()
            .map_err(|e| ubio_testenv::context(e, format_args!("spawn {:?}", cmd.get_program()))),
    }
}

/// Inflates the balloon of a global-pressure run, for `dataset` bytes of
/// files (all the run puts in the page cache): what it leaves, its floor
/// and its size are refused if unsafe (see [`balloon::plan`]).
fn inflate(
    options: &RunOptions,
    p: GlobalPressure,
    dataset: u64,
    progress: &dyn Progress,
) -> io::Result<(Balloon, PressureRecord)> {
    let plan = balloon::plan_here(dataset, p.leave_bytes, p.floor_bytes)?;
    progress.message(&format!(
        "global pressure: locking {} MiB of memory so that {} MiB of the {} MiB available remain \
         (floor {} MiB; the dataset is {:.1}x what remains)",
        plan.balloon_bytes >> 20,
        plan.leave_bytes >> 20,
        plan.available_bytes >> 20,
        plan.floor_bytes >> 20,
        dataset as f64 / plan.leave_bytes as f64
    ));
    let mut holder = Command::new(&options.worker_exe);
    holder.args(["__worker", "balloon"]).stderr(Stdio::inherit());
    let since = Instant::now();
    let b = Balloon::inflate(holder, plan.balloon_bytes, plan.floor_bytes)
        .map_err(|e| io::Error::new(e.kind(), format!("global pressure: {e}")))?;
    let inflate_secs = since.elapsed().as_secs_f64();
    let after = ubio_testenv::procfs::meminfo()?
        .get("MemAvailable")
        .copied()
        .unwrap_or(0);
    progress.message(&format!(
        "global pressure: the balloon holds {} MiB (in {inflate_secs:.1} s); {} MiB available now",
        b.held_bytes() >> 20,
        after >> 20
    ));
    let record = PressureRecord {
        balloon_bytes: plan.balloon_bytes,
        leave_bytes: plan.leave_bytes,
        floor_bytes: plan.floor_bytes,
        available_before_bytes: plan.available_bytes,
        available_after_bytes: after,
        inflate_secs,
        held_at_end_bytes: b.held_bytes(),
        shrinks: Vec::new(),
    };
    Ok((b, record))
}

/// The balloon's state so far, into the report.
fn note_balloon(balloon: Option<&Balloon>, report: &mut Report) {
    if let (Some(b), Some(p)) = (balloon, report.pressure.as_mut()) {
        p.held_at_end_bytes = b.held_bytes();
        p.shrinks = b.events();
    }
}

/// What every phase needs.
struct Bench<'a> {
    config: &'a Config,
    options: &'a RunOptions,
    layout: &'a Layout,
    cg: Option<&'a MemCgroup>,
    reclaim_trace: Option<&'a MemcgReclaimTrace>,
    progress: &'a dyn Progress,
}

impl Bench<'_> {
    fn job(&self, kind: WorkloadKind, mode: BenchMode) -> EngineJob {
        EngineJob {
            workload: Workload {
                kind,
                ..self.config.workload.clone()
            },
            mode,
            layout: self.layout.clone(),
            ubio_exe: self.options.ubio_exe.clone(),
        }
    }

    fn spawn(&self, job: EngineJob) -> io::Result<BenchClient> {
        let mut cmd = Command::new(&self.options.worker_exe);
        cmd.arg("__worker")
            .args(Job::Bench(Box::new(job)).to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        BenchClient::new(spawn_in(self.cg, &mut cmd)?)
    }

    /// An untimed buffered pass of `kind` (the dataset writer, the
    /// warm-up), without duration cap; then the files are settled.
    fn untimed(&self, kind: WorkloadKind) -> io::Result<()> {
        let mut job = self.job(kind, BenchMode::Buffered);
        job.workload.duration_secs = None;
        if kind == WorkloadKind::Copy {
            self.remove_copies()?;
        }
        let client = self.spawn(job)?;
        let result = loop {
            match client.next(Duration::from_secs(3600)) {
                Some(Ok(Event::BenchDone(r))) => break Ok(r),
                Some(Ok(_)) | None => {}
                Some(Err(e)) => {
                    break Err(io::Error::other(format!("{kind} (untimed, buffered): {e}")))
                }
            }
        };
        let status = client.wait(result.is_err())?;
        result?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "{kind} (untimed) worker exited with {status}"
            )));
        }
        Ok(())
    }

    fn remove_copies(&self) -> io::Result<()> {
        self.layout
            .copies()
            .iter()
            .try_for_each(|p| remove_if_exists(p))
    }

    /// Before a run: the dataset cold (fsync + DONTNEED on our files), no
    /// copies, fresh files for sequential writes; the victim's hot file
    /// read through again.
    fn settle(
        &self,
        victim: Option<&mut VictimClient>,
        warnings: &mut Vec<String>,
    ) -> io::Result<()> {
        let kind = self.config.workload.kind;
        if kind == WorkloadKind::Copy {
            self.remove_copies()?;
        }
        let mut left = 0;
        for p in self.layout.sources() {
            if kind == WorkloadKind::SeqWrite {
                remove_if_exists(&p)?;
            } else {
                left += drop_cached(&p)?;
            }
        }
        if left > 256 && !warnings.iter().any(|w| w.contains("stayed cached")) {
            warnings.push(format!(
                "{} KiB of the dataset stayed cached after fsync + fadvise(DONTNEED): runs may not start cold",
                left * sys::page_size() / 1024
            ));
        }
        if let Some(v) = victim {
            v.warm(WARM_TIMEOUT)
                .map_err(|e| io::Error::new(e.kind(), format!("the victim: {e}")))?;
        }
        Ok(())
    }

    fn start_victim(
        &self,
        hot: &Path,
        bytes: u64,
        report: &mut Report,
    ) -> io::Result<VictimClient> {
        self.progress.message(&format!(
            "starting the victim on a {} MiB hot file",
            bytes >> 20
        ));
        write_plain(hot, bytes)?;
        drop_cached(hot)?;
        let mut cmd = Command::new(&self.options.worker_exe);
        cmd.arg("__worker")
            .args(
                Job::Victim {
                    path: hot.to_path_buf(),
                    tick: victim::DEFAULT_TICK,
                }
                .to_args(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut client = VictimClient::new(spawn_in(self.cg, &mut cmd)?)?;
        client.wait_ready(WARM_TIMEOUT)?;
        let cached =
            ubio::residency::count_path(hot, sys::FileRange::WHOLE)?.cached * sys::page_size();
        if cached < bytes / 10 * 9 {
            report.warnings.push(format!(
                "only {} of the victim's {} MiB hot file stayed cached after it read it: the memory limit may be too small for it",
                cached >> 20,
                bytes >> 20
            ));
        }
        Ok(client)
    }

    fn victim_alone(&self, v: &VictimClient) -> io::Result<VictimSolo> {
        let secs = self.options.victim_solo_secs.max(1.0);
        self.progress
            .message(&format!("the victim alone for {secs:.0} s"));
        let from = monotonic_secs();
        std::thread::sleep(Duration::from_secs_f64(secs));
        let to = monotonic_secs();
        wait_for_ticks(v, to);
        let rates = per_second_rates(&v.ticks(), from, to);
        let ops_per_s = Summary::of(&rates)
            .ok_or_else(|| io::Error::other("the victim reported nothing while running alone"))?;
        self.progress.message(&format!(
            "the victim alone: {:.0} reads/s (worst second {:.0})",
            ops_per_s.median, ops_per_s.min
        ));
        Ok(VictimSolo { ops_per_s })
    }

    /// One measured run.
    fn measure(
        &self,
        mode: BenchMode,
        round: u32,
        label: &str,
        victim: Option<&VictimClient>,
        solo: Option<&VictimSolo>,
    ) -> io::Result<Run> {
        let kind = self.config.workload.kind;
        let prefaulted_bytes = if mode.caps().prefault {
            Some(self.back_pages(label)?)
        } else {
            None
        };
        let reported = page_reporting::Reported::start(Path::new(page_reporting::SYSFS));
        self.progress.run_started(label, self.layout.total_bytes());
        let client = self.spawn(self.job(kind, mode))?;
        let start = loop {
            match client.next(START_TIMEOUT) {
                Some(Ok(Event::BenchStarted(s))) => break Ok(s.start_mono_secs),
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e),
                None => break Err(format!("no start within {START_TIMEOUT:?}")),
            }
        };
        let start = match start {
            Ok(s) => s,
            Err(e) => {
                client.wait(true)?;
                let mut run = self.failed_run(mode, round, e);
                run.prefaulted_bytes = prefaulted_bytes;
                return Ok(run);
            }
        };
        let mut sampler = SystemSampler::start(
            self.cg,
            self.reclaim_trace,
            self.layout.watched(kind),
            start,
        )?;
        // Per-second samples see levels only at each second's end; the
        // peaks come from this one.
        let peaks = ResidencySampler::follow_all(self.layout.watched(kind), PEAK_EVERY);
        let mut samples: Vec<Sample> = Vec::new();
        let mut last = EngineProgress {
            t_mono_secs: start,
            bytes: 0,
            cpu_user_secs: 0.0,
            cpu_sys_secs: 0.0,
        };
        let mut next = start + 1.0;
        let outcome: Result<EngineResult, String> = loop {
            let wait = (next - monotonic_secs()).max(0.0);
            match client.next(Duration::from_secs_f64(wait)) {
                Some(Ok(Event::BenchProgress(p))) => last = p,
                Some(Ok(Event::BenchDone(r))) => break Ok(r),
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e),
                None => {}
            }
            if monotonic_secs() >= next {
                let mut s = sampler.sample(
                    next,
                    last.bytes,
                    sampler::cpu(last.cpu_user_secs, last.cpu_sys_secs),
                )?;
                if let Some(v) = victim {
                    sampler::fill_victim(std::slice::from_mut(&mut s), &v.ticks(), start);
                }
                self.progress.sample(&s, &sampler::live_line(&s));
                samples.push(s);
                next += 1.0;
            }
        };
        let status = client.wait(outcome.is_err())?;
        let (end, bytes, cpu) = match &outcome {
            Ok(r) => (
                r.end_mono_secs,
                r.bytes,
                CpuTimes {
                    user_secs: r.cpu_user_secs,
                    sys_secs: r.cpu_sys_secs,
                },
            ),
            Err(_) => (
                monotonic_secs(),
                last.bytes,
                sampler::cpu(last.cpu_user_secs, last.cpu_sys_secs),
            ),
        };
        // The tail since the last whole second (or the only sample of a short run).
        let covered = start + samples.len() as f64;
        if end - covered > 0.005 || samples.is_empty() {
            samples.push(sampler.sample(end.max(covered + 1e-3), bytes, cpu)?);
        }
        let fast_peaks = peaks.finish().map_or_else(
            |e| {
                log::warn!("dataset peak sampler: {e}");
                FastPeaks::default()
            },
            |p| FastPeaks {
                cached_bytes: p.max_cached * sys::page_size(),
                dirty_writeback_bytes: p.max_dirty_writeback * sys::page_size(),
            },
        );
        let final_cached = sampler::dataset_cache(&self.layout.watched(kind)).0;
        if let Some(v) = victim {
            wait_for_ticks(v, end);
            sampler::fill_victim(&mut samples, &v.ticks(), start);
        }
        let (result, error) = match outcome {
            Ok(r) if status.success() => {
                let bad = (self.options.verify && !r.capped)
                    .then(|| self.verify(kind))
                    .and_then(Result::err);
                let error = bad.map(|e| format!("verify: {e}"));
                (Some(r), error)
            }
            Ok(r) => (Some(r), Some(format!("the worker exited with {status}"))),
            Err(e) => (None, Some(e)),
        };
        let secs = end - start;
        let summary = summary::summarize_run(&RunInput {
            samples: &samples,
            bytes,
            secs,
            time_to_durable_secs: kind.writes().then_some(secs),
            final_dataset_cached_bytes: Some(final_cached),
            victim_solo_ops_per_s: solo.map(|s| s.ops_per_s.median),
            fast_peaks: Some(fast_peaks),
            reported_to_host_bytes: reported.bytes_since(),
        });
        let (backend, reason, ubio_stats) = match result {
            Some(r) => (r.backend, r.reason, r.ubio_stats),
            None => (String::new(), String::new(), None),
        };
        let run = Run {
            mode,
            round,
            backend,
            reason,
            error,
            bytes,
            secs,
            samples,
            summary,
            ubio_stats,
            prefaulted_bytes,
        };
        self.progress.run_finished(&run, &run_line(label, &run));
        Ok(run)
    }

    /// For a backed mode, right before its run: memory of the size of the
    /// page cache the run will take (the dataset; source and copy for
    /// copies), as much as is free to spare, faulted in and released, so
    /// the run's pages need no host fault. Returns the bytes.
    fn back_pages(&self, label: &str) -> io::Result<u64> {
        let kind = self.config.workload.kind;
        let copies = if kind == WorkloadKind::Copy { 2 } else { 1 };
        let want = copies * self.layout.total_bytes();
        // Leave a quarter of what is available (and 1 GiB) to everyone else.
        let available = ubio_testenv::procfs::meminfo()
            .ok()
            .and_then(|m| m.get("MemAvailable").copied())
            .unwrap_or(0);
        let spare = (available / 4 * 3).saturating_sub(1 << 30);
        let bytes = want.min(spare);
        self.progress.message(&format!(
            "{label}: backing {} MiB of pages first (fault in, release)",
            bytes >> 20
        ));
        // The pages the settle just freed armed a reporting pass (~2 s
        // later): let it go by first (at most REPORTING_PASS), so that it
        // does not hand the backing back during the run.
        let sysfs = Path::new(page_reporting::SYSFS);
        let waiting = page_reporting::Reported::start(sysfs);
        let since = Instant::now();
        while waiting.bytes_since() == Some(0) && since.elapsed() < REPORTING_PASS {
            std::thread::sleep(Duration::from_millis(20));
        }
        // A pass during the backing hands part of it back at once; the
        // next is at least its delay away, so back again then.
        for _ in 0..3 {
            let before = page_reporting::Reported::start(sysfs);
            crate::backing::prefault_and_release(bytes)?;
            match before.bytes_since() {
                Some(n) if n > 0 => self.progress.message(&format!(
                    "{label}: {} MiB were reported to the host while backing: backing again",
                    n >> 20
                )),
                _ => break,
            }
        }
        Ok(bytes)
    }

    /// The files the run wrote (or copied) hold the dataset.
    fn verify(&self, kind: WorkloadKind) -> io::Result<()> {
        let l = self.layout;
        for t in 0..l.threads {
            for f in 0..l.files_per_thread {
                let id = l.file_id(t, f);
                match kind {
                    WorkloadKind::SeqWrite | WorkloadKind::RandWrite => {
                        engine::data::check_file(&l.source(t, f), l, id)?
                    }
                    WorkloadKind::Copy => engine::data::check_file(&l.copy(t, f), l, id)?,
                    WorkloadKind::SeqRead | WorkloadKind::RandRead => {}
                }
            }
        }
        Ok(())
    }

    fn failed_run(&self, mode: BenchMode, round: u32, error: String) -> Run {
        let summary = summary::summarize_run(&RunInput::NOTHING_MOVED);
        Run {
            mode,
            round,
            backend: String::new(),
            reason: String::new(),
            error: Some(error),
            bytes: 0,
            secs: 0.0,
            samples: Vec::new(),
            summary,
            ubio_stats: None,
            prefaulted_bytes: None,
        }
    }

    /// The report files (JSON, CSV, Markdown, HTML), after every run.
    fn write(&self, report: &Report) -> io::Result<()> {
        match &self.options.out_dir {
            Some(dir) => super::export::write_all(report, dir).map(drop),
            None => Ok(()),
        }
    }
}

/// One line per finished run.
pub fn run_line(label: &str, run: &Run) -> String {
    if let Some(e) = &run.error {
        return format!("{label}: FAILED: {e}");
    }
    let s = &run.summary;
    let mut line = format!(
        "{label}: {:.0} MB/s in {:.1} s, cpu {:.2} s/GB (sys {:.2}), dataset cache peak {} final {}",
        s.mb_per_s,
        run.secs,
        s.cpu_secs_per_gb,
        s.cpu_sys_secs_per_gb,
        sampler::short_bytes(s.peak_dataset_cached_bytes),
        sampler::short_bytes(s.final_dataset_cached_bytes)
    );
    if let Some(v) = &s.victim {
        line.push_str(&format!(
            ", victim {:.0}/s (worst {:.0})",
            v.median_ops_per_s, v.worst_ops_per_s
        ));
    }
    if let Some(b) = s.reported_to_host_bytes {
        line.push_str(&format!(
            ", {} reported to the host",
            sampler::short_bytes(b)
        ));
    }
    line
}

/// fsync, then POSIX_FADV_DONTNEED of the whole file; the pages still cached.
fn drop_cached(path: &Path) -> io::Result<u64> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| path_context(e, "open", path))?;
    f.sync_all().map_err(|e| path_context(e, "fsync", path))?;
    sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed)
        .map_err(|e| path_context(e, "fadvise", path))?;
    Ok(ubio::residency::count(f.as_fd(), sys::FileRange::WHOLE)
        .map_err(|e| path_context(e, "cachestat", path))?
        .cached)
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(path_context(e, "remove", path)),
        _ => Ok(()),
    }
}

/// A file of `bytes` (the fill pattern), durable.
fn write_plain(path: &Path, bytes: u64) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| path_context(e, "create", path))?;
    let mut buf = ubio::AlignedBuf::page_aligned(1 << 20);
    crate::harness::engine::support::fill(&mut buf);
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])
            .map_err(|e| path_context(e, "write", path))?;
        done += n as u64;
    }
    f.sync_all().map_err(|e| path_context(e, "fsync", path))
}

/// The victim reports every 100 ms through a pipe: wait (briefly) until a
/// tick ending after `t` has arrived.
fn wait_for_ticks(v: &VictimClient, t: f64) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if v.ticks().last().is_some_and(|k| k.t1 >= t) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
