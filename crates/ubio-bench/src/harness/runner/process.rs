//! The executor of real benchmarks: root, a target (a subdirectory or a
//! loop filesystem), a memory cgroup beneath our own (or, under global
//! pressure, a balloon of locked memory held by `ubio-bench __worker
//! balloon`), worker processes (`ubio-bench __worker bench JOB`, the
//! victim), samplers, fio's cross-check.
//!
//! - check_modes: make the target, check free space, check each mode on it;
//! - prepare: the memory cgroup or the balloon, the environment, the
//!   memcg reclaim trace, the dataset (untimed, in the cgroup), the victim
//!   on a hot file that fits and its rate alone, fio;
//! - settle: the dataset's own pages dropped (fsync + POSIX_FADV_DONTNEED
//!   on our files only: the machine is shared, so never drop_caches), the
//!   victim's hot file read through again; under global pressure, the
//!   memory just freed filled again with a filler file's clean cache, so
//!   that every run starts with free memory small (see [`FREE_KEPT`]);
//! - warm_up: one untimed buffered pass of the workload, which touches the
//!   memory the runs will use (fresh VM memory is slow on first touch);
//! - measure: a backed mode first faults in and releases memory of the
//!   size its pages will take ([`crate::backing`]); the run is sampled
//!   every second (and the dataset's page-cache peaks every 10 ms), and a
//!   run still going at its time-out is killed;
//! - conclude: the victim stopped, fio's checks.
//!
//! Everything made (loop device, mount, cgroup, balloon, files) is removed
//! when the executor is dropped: at the end, on failure, and on Ctrl-C
//! (through [`ubio_testenv::cleanup`]).

use super::executor::{BalloonState, Concluded, Ended, Executor, ModeCheck, Prepared, RunSpec};
use super::{environment, target, Progress, RunOptions};
use crate::clock::monotonic_secs;
use crate::cpu::CpuTimes;
use crate::harness::engine::data::Layout;
use crate::harness::engine::{self, EngineJob, EngineProgress, EngineResult};
use crate::harness::fio::Fio;
use crate::harness::mode::{BenchMode, WorkloadKind};
use crate::harness::sampler::{self, SystemSampler};
use crate::harness::schema::{
    Config, GlobalPressure, PressureRecord, Report, Run, Sample, VictimSolo, Workload,
};
use crate::harness::summary::{self, FastPeaks, RunInput};
use crate::page_reporting;
use crate::path_context;
use crate::stats::Summary;
use crate::victim::{self, per_second_rates};
use crate::worker::{BenchClient, Event, Job, VictimClient};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use ubio::sys::{self, Advice};
use ubio_testenv::balloon::{self, Balloon};
use ubio_testenv::cgroup::{spawn_in, CgroupVersion, MemCgroup};
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
/// Free memory a settle leaves under global pressure, the rest of what the
/// balloon leaves being a filler file's clean page cache: on a VM with free
/// page reporting, memory left free is handed back to the host about 2 s
/// later (mm/page_reporting.c reports a zone's free 2 MiB blocks while it
/// has more than its low watermark and 64 MiB free), and every page a run
/// then takes from it costs a host fault that bare metal never pays. With
/// free memory under that, every mode takes its pages from what reclaim or
/// its own drops just freed, as on a bare-metal machine whose memory is
/// full of old cache; and it is above kswapd's high watermark here (about
/// 100 MiB on 24 GiB), so no run starts in reclaim.
pub const FREE_KEPT: u64 = 128 << 20;
/// The words of the warning about a dataset that fits in the memory limit
/// (a matrix measures such points on purpose and leaves it out).
pub const FITS_WARNING: &str = "fits in the memory limit";

/// The real executor. Its fields are dropped in the order they are
/// declared: the victim and the balloon, then the cgroup, then the target.
pub struct ProcessExecutor {
    options: RunOptions,
    /// Set by check_modes.
    config: Option<Config>,
    layout: Option<Layout>,
    victim: Option<VictimClient>,
    victim_solo: Option<VictimSolo>,
    fio: Option<Fio>,
    balloon: Option<Balloon>,
    /// Under global pressure: the file whose clean cache fills what the
    /// settle frees (see [`FREE_KEPT`]).
    filler: Option<std::path::PathBuf>,
    reclaim_trace: Option<MemcgReclaimTrace>,
    cg: Option<MemCgroup>,
    target: Option<target::BenchTarget>,
}

impl ProcessExecutor {
    /// Needs root: the executor makes memory cgroups and loop filesystems.
    pub fn new(options: &RunOptions) -> io::Result<ProcessExecutor> {
        if !ubio_testenv::is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "ubio-bench needs root: it makes a memory cgroup beneath its own (and loop filesystems)",
            ));
        }
        ubio_testenv::cleanup::install_signal_handler()?;
        Ok(ProcessExecutor {
            options: options.clone(),
            config: None,
            layout: None,
            victim: None,
            victim_solo: None,
            fio: None,
            balloon: None,
            filler: None,
            reclaim_trace: None,
            cg: None,
            target: None,
        })
    }

    fn config(&self) -> &Config {
        self.config.as_ref().expect("check_modes ran first")
    }

    fn layout(&self) -> &Layout {
        self.layout.as_ref().expect("check_modes ran first")
    }

    fn job(&self, kind: WorkloadKind, mode: BenchMode) -> EngineJob {
        EngineJob {
            workload: Workload {
                kind,
                ..self.config().workload.clone()
            },
            mode,
            layout: self.layout().clone(),
            ubio_exe: self.options.ubio_exe.clone(),
            lanes: None,
            wait_go: false,
        }
    }

    /// The run's worker: one process, or with `processes` above 1 a group
    /// of processes that each run their share of the streams and start
    /// together (see [`crate::worker::combine`]).
    fn spawn(&self, job: EngineJob) -> io::Result<BenchClient> {
        let procs = job.workload.processes.max(1);
        if procs == 1 {
            let mut cmd = Command::new(&self.options.worker_exe);
            cmd.arg("__worker")
                .args(Job::Bench(Box::new(job)).to_args())
                .stdin(Stdio::null())
                .stdout(Stdio::piped());
            return BenchClient::new(spawn_in(self.cg.as_ref(), &mut cmd)?);
        }
        let mut children = Vec::new();
        for i in 0..procs {
            let part = EngineJob {
                lanes: Some(job.workload.process_lanes(i)),
                wait_go: true,
                ..job.clone()
            };
            let mut cmd = Command::new(&self.options.worker_exe);
            cmd.arg("__worker")
                .args(Job::Bench(Box::new(part)).to_args())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            match spawn_in(self.cg.as_ref(), &mut cmd) {
                Ok(c) => children.push(c),
                Err(e) => {
                    for mut c in children {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                    return Err(e);
                }
            }
        }
        BenchClient::group(children)
    }

    /// An untimed buffered pass of `kind` (the dataset writer, the
    /// warm-up), without duration cap.
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
        self.layout()
            .copies()
            .iter()
            .try_for_each(|p| remove_if_exists(p))
    }

    fn start_victim(
        &self,
        hot: &Path,
        bytes: u64,
        warnings: &mut Vec<String>,
        progress: &dyn Progress,
    ) -> io::Result<VictimClient> {
        progress.message(&format!(
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
        let mut client = VictimClient::new(spawn_in(self.cg.as_ref(), &mut cmd)?)?;
        client.wait_ready(WARM_TIMEOUT)?;
        let cached =
            ubio::residency::count_path(hot, sys::FileRange::WHOLE)?.cached * sys::page_size();
        if cached < bytes / 10 * 9 {
            warnings.push(format!(
                "only {} of the victim's {} MiB hot file stayed cached after it read it: the memory limit may be too small for it",
                cached >> 20,
                bytes >> 20
            ));
        }
        Ok(client)
    }

    fn victim_alone(&self, v: &VictimClient, progress: &dyn Progress) -> io::Result<VictimSolo> {
        let secs = self.options.victim_solo_secs.max(1.0);
        progress.message(&format!("the victim alone for {secs:.0} s"));
        let from = monotonic_secs();
        std::thread::sleep(Duration::from_secs_f64(secs));
        let to = monotonic_secs();
        wait_for_ticks(v, to);
        let rates = per_second_rates(&v.ticks(), from, to);
        let ops_per_s = Summary::of(&rates)
            .ok_or_else(|| io::Error::other("the victim reported nothing while running alone"))?;
        progress.message(&format!(
            "the victim alone: {:.0} reads/s (worst second {:.0})",
            ops_per_s.median, ops_per_s.min
        ));
        Ok(VictimSolo { ops_per_s })
    }

    /// For a backed mode, right before its run: memory of the size of the
    /// page cache the run will take (the dataset; source and copy for
    /// copies), as much as is free to spare, faulted in and released, so
    /// the run's pages need no host fault. Returns the bytes.
    fn back_pages(&self, label: &str, progress: &dyn Progress) -> io::Result<u64> {
        let kind = self.config().workload.kind;
        let want = kind.copies() * self.layout().total_bytes();
        // Leave a quarter of what is available (and 1 GiB) to everyone else.
        let available = ubio::procfs::meminfo_field("MemAvailable").unwrap_or(0);
        let spare = (available / 4 * 3).saturating_sub(1 << 30);
        let bytes = want.min(spare);
        progress.message(&format!(
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
                Some(n) if n > 0 => progress.message(&format!(
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
        let l = self.layout();
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
}

impl Executor for ProcessExecutor {
    fn check_modes(
        &mut self,
        config: &Config,
        progress: &dyn Progress,
    ) -> io::Result<Vec<ModeCheck>> {
        let w = &config.workload;
        let need = target::space_needed(w, config.victim_hot_bytes, config.global_pressure);
        progress.message("making the target");
        // Under global pressure a /dev/shm backing file is taken whole
        // before the balloon is sized, as pmem is carved out of RAM at
        // boot; sparse, it would grow into the memory the balloon leaves.
        let made = target::make(&config.target, need, config.global_pressure.is_some())?;
        let layout = Layout::new(&made.dir, w);
        for d in [layout.data_dir(), layout.copy_dir()] {
            std::fs::create_dir(&d).map_err(|e| path_context(e, "mkdir", &d))?;
        }
        let checks = config
            .modes
            .iter()
            .map(|&mode| {
                let why = engine::check_mode(mode, w, &made.dir, self.options.ubio_exe.as_deref())
                    .err()
                    .map(|e| e.to_string());
                (mode, why)
            })
            .collect();
        self.config = Some(config.clone());
        self.layout = Some(layout);
        self.target = Some(made);
        Ok(checks)
    }

    fn prepare(&mut self, _modes: &[BenchMode], progress: &dyn Progress) -> io::Result<Prepared> {
        let config = self.config().clone();
        let w = &config.workload;
        let mut warnings = Vec::new();
        if let Some(limit) = config.memory_limit_bytes {
            if self.layout().total_bytes() <= limit {
                warnings.push(format!(
                    "the dataset ({} MiB) {FITS_WARNING} ({} MiB): buffered I/O is not pushed into \
                     reclaim; use a --dataset several times --limit to see what a dataset larger than memory does",
                    self.layout().total_bytes() >> 20,
                    limit >> 20
                ));
            }
        }
        // Global pressure: no cgroup (kswapd reclaims for the whole
        // machine), the balloon instead.
        let hot = config.victim_hot_bytes.unwrap_or(0);
        let mut pressure = None;
        match config.global_pressure {
            None => {
                self.cg = Some(MemCgroup::create(
                    "ubio-bench",
                    config.memory_limit_bytes.unwrap_or(u64::MAX),
                )?)
            }
            Some(p) => {
                let (b, record) = inflate(
                    &self.options.worker_exe,
                    p,
                    w.kind.copies() * w.dataset_bytes + hot,
                    progress,
                )?;
                self.balloon = Some(b);
                let made = self.target.as_ref().expect("check_modes made it");
                let filler = made.dir.join("filler");
                // As large as what the balloon left (which can be more than
                // asked), within the room the target was given for it.
                let bytes = (record.available_after_bytes + (256 << 20))
                    .max(p.leave_bytes)
                    .min(target::filler_room(p.leave_bytes));
                progress.message(&format!(
                    "writing a {} MiB filler file, whose clean cache will hold free memory at {} MiB before every run",
                    bytes >> 20,
                    FREE_KEPT >> 20
                ));
                write_plain(&filler, bytes)?;
                drop_cached(&filler)?;
                self.filler = Some(filler);
                pressure = Some(record);
            }
        }
        let cg_version = match self.cg.as_ref().map(MemCgroup::version) {
            Some(CgroupVersion::V1) => "v1",
            Some(CgroupVersion::V2) => "v2",
            None => "none (global pressure)",
        };
        let made = self.target.as_ref().expect("check_modes made it");
        let environment = environment::gather(
            &made.dir,
            &made.filesystem,
            &made.device,
            cg_version,
            self.options.git_commit.clone(),
        );
        // Reclaim forced by the cgroup's limit is not in /proc/vmstat.
        match MemcgReclaimTrace::start() {
            Ok(t) => self.reclaim_trace = Some(t),
            Err(e) => warnings.push(format!(
                "the memory cgroup's reclaim is not counted (reclaimed pages cover kswapd and direct reclaim only): {e}"
            )),
        }
        if w.kind != WorkloadKind::SeqWrite {
            progress.message(&format!(
                "writing the dataset ({} MiB, untimed)",
                self.layout().total_bytes() >> 20
            ));
            self.untimed(WorkloadKind::SeqWrite)?;
        }
        if let Some(hot) = config.victim_hot_bytes {
            let path = made.dir.join("hot");
            let v = self.start_victim(&path, hot, &mut warnings, progress)?;
            self.victim_solo = Some(self.victim_alone(&v, progress)?);
            self.victim = Some(v);
        }
        if self.options.fio && (w.shared_file || w.processes > 1) {
            warnings
                .push("no fio cross-check: its jobs are a file per thread of one process".into());
        } else if self.options.fio {
            match Fio::find(w.kind) {
                Ok(f) => self.fio = Some(f),
                Err(e) => warnings.push(e),
            }
        }
        Ok(Prepared {
            warnings,
            environment,
            pressure,
            victim_solo: self.victim_solo.clone(),
        })
    }

    fn settle(&mut self, warnings: &mut Vec<String>) -> io::Result<()> {
        let kind = self.config().workload.kind;
        if kind == WorkloadKind::Copy {
            self.remove_copies()?;
        }
        let mut left = 0;
        for p in self.layout().sources() {
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
        if let Some(filler) = &self.filler {
            let free = refill(filler, FREE_KEPT)?;
            if free > 2 * FREE_KEPT && !warnings.iter().any(|w| w.contains("filler")) {
                warnings.push(format!(
                    "{} MiB stayed free after the filler file was read through (it holds what the balloon \
                     leaves): runs may take pages the VM handed back to its host",
                    free >> 20
                ));
            }
        }
        // After the filler: reading the filler through took the hot file
        // out of the cache in every mode (bench/runs/2026-11-26-demo-2), so
        // every run started with the neighbour's file gone.
        if let Some(v) = self.victim.as_mut() {
            v.warm(WARM_TIMEOUT)
                .map_err(|e| io::Error::new(e.kind(), format!("the victim: {e}")))?;
        }
        Ok(())
    }

    fn warm_up(&mut self, _progress: &dyn Progress) -> io::Result<()> {
        self.untimed(self.config().workload.kind)
    }

    fn measure(&mut self, spec: &RunSpec, progress: &dyn Progress) -> io::Result<Ended> {
        let (mode, label) = (spec.mode, spec.label);
        let kind = self.config().workload.kind;
        let prefaulted_bytes = if mode.caps().prefault {
            Some(self.back_pages(label, progress)?)
        } else {
            None
        };
        let reported = page_reporting::Reported::start(Path::new(page_reporting::SYSFS));
        progress.run_started(label, self.layout().total_bytes());
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
                let mut run = failed_run(mode, spec.round, e);
                run.prefaulted_bytes = prefaulted_bytes;
                return Ok(Ended::Finished(run));
            }
        };
        let deadline = spec.timeout.map(|t| start + t.as_secs_f64());
        let watched = self.layout().watched(kind);
        let mut sampler = SystemSampler::start(
            self.cg.as_ref(),
            self.reclaim_trace.as_ref(),
            watched.clone(),
            start,
        )?;
        // Per-second samples see levels only at each second's end; the
        // peaks come from this one.
        let peaks = ResidencySampler::follow_all(watched.clone(), PEAK_EVERY);
        let mut samples: Vec<Sample> = Vec::new();
        let mut last = EngineProgress {
            t_mono_secs: start,
            bytes: 0,
            cpu_user_secs: 0.0,
            cpu_sys_secs: 0.0,
        };
        let mut next = start + 1.0;
        let mut timed_out = false;
        let outcome: Result<EngineResult, String> = loop {
            let until = deadline.map_or(next, |d| next.min(d));
            let wait = (until - monotonic_secs()).max(0.0);
            match client.next(Duration::from_secs_f64(wait)) {
                Some(Ok(Event::BenchProgress(p))) => last = p,
                Some(Ok(Event::BenchDone(r))) => break Ok(r),
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e),
                None => {}
            }
            if deadline.is_some_and(|d| monotonic_secs() >= d) {
                timed_out = true;
                break Err("timed out".into());
            }
            if monotonic_secs() >= next {
                let mut s = sampler.sample(
                    next,
                    last.bytes,
                    sampler::cpu(last.cpu_user_secs, last.cpu_sys_secs),
                )?;
                if let Some(v) = &self.victim {
                    sampler::fill_victim(std::slice::from_mut(&mut s), &v.ticks(), start);
                }
                progress.sample(&s, &sampler::live_line(&s));
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
                dirty_writeback_bytes: Some(p.max_dirty_writeback * sys::page_size()),
            },
        );
        let final_cached = sampler::dataset_cache(&watched).0;
        if let Some(v) = &self.victim {
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
            // The runner words a time-out.
            Err(_) if timed_out => (None, None),
            Err(e) => (None, Some(e)),
        };
        let secs = end - start;
        let summary = summary::summarize_run(&RunInput {
            samples: &samples,
            bytes,
            secs,
            time_to_durable_secs: kind.writes().then_some(secs),
            final_dataset_cached_bytes: Some(final_cached),
            victim_solo_ops_per_s: self.victim_solo.as_ref().map(|s| s.ops_per_s.median),
            fast_peaks: Some(fast_peaks),
            reported_to_host_bytes: reported.bytes_since(),
        });
        let (backend, reason, ubio_stats) = match result {
            Some(r) => (r.backend, r.reason, r.ubio_stats),
            None => (String::new(), String::new(), None),
        };
        let run = Run {
            mode,
            round: spec.round,
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
        Ok(if timed_out {
            Ended::TimedOut(run)
        } else {
            Ended::Finished(run)
        })
    }

    fn balloon(&self) -> Option<BalloonState> {
        self.balloon.as_ref().map(|b| BalloonState {
            held_bytes: b.held_bytes(),
            shrinks: b.events(),
        })
    }

    fn cross_checks(&mut self, mode: BenchMode) -> bool {
        self.fio.as_mut().is_some_and(|f| f.mirrors(mode))
    }

    fn cross_check(&mut self, mode: BenchMode) {
        let w = self.config().workload.clone();
        let layout = self.layout().clone();
        if let Some(fio) = self.fio.as_mut() {
            fio.run(mode, &w, &layout, self.cg.as_ref());
        }
    }

    fn conclude(&mut self, report: &Report) -> io::Result<Concluded> {
        let mut concluded = Concluded::default();
        if let Some(fio) = self.fio.take() {
            let (checks, warnings) = fio.checks(report);
            concluded.fio = checks;
            concluded.warnings.extend(warnings);
        }
        if let Some(v) = self.victim.take() {
            let status = v.stop(Duration::from_secs(5))?;
            if !status.success() {
                concluded
                    .warnings
                    .push(format!("the victim exited with {status}"));
            }
        }
        Ok(concluded)
    }
}

/// Inflates the balloon of a global-pressure run, for `dataset` bytes
/// of files (all the run puts in the page cache): what it leaves, its
/// floor and its size are refused if unsafe (see [`balloon::plan`]).
/// Whether the dataset is large enough to be pressed is the caller's
/// question (a matrix measures small datasets on purpose).
pub(crate) fn inflate(
    worker_exe: &Path,
    p: GlobalPressure,
    dataset: u64,
    progress: &dyn Progress,
) -> io::Result<(Balloon, PressureRecord)> {
    let plan = balloon::plan_here(p.leave_bytes, p.floor_bytes)?;
    progress.message(&format!(
        "global pressure: locking {} MiB of memory so that {} MiB of the {} MiB available remain \
         (floor {} MiB; the dataset is {:.1}x what remains)",
        plan.balloon_bytes >> 20,
        plan.leave_bytes >> 20,
        plan.available_bytes >> 20,
        plan.floor_bytes >> 20,
        dataset as f64 / plan.leave_bytes as f64
    ));
    let mut holder = Command::new(worker_exe);
    holder
        .args(["__worker", "balloon"])
        .stderr(Stdio::inherit());
    let since = Instant::now();
    let b = Balloon::inflate(holder, plan.balloon_bytes, plan.floor_bytes)
        .map_err(|e| io::Error::new(e.kind(), format!("global pressure: {e}")))?;
    let inflate_secs = since.elapsed().as_secs_f64();
    let after = ubio::procfs::meminfo()?
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

/// A run that failed before it moved anything.
fn failed_run(mode: BenchMode, round: u32, error: String) -> Run {
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

/// fsync, then POSIX_FADV_DONTNEED of the whole file; the pages still cached.
pub(crate) fn drop_cached(path: &Path) -> io::Result<u64> {
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

/// Drops `filler`'s cached pages and reads it again until free memory is
/// down to `keep` (or the file ends): the memory just freed taken at once
/// by clean cache, before free page reporting hands it to the host.
/// Returns the free memory left.
pub(crate) fn refill(filler: &Path, keep: u64) -> io::Result<u64> {
    use std::io::Read;
    const CHUNK: usize = 8 << 20;
    let free = || ubio::procfs::meminfo_field("MemFree");
    drop_cached(filler)?;
    let mut f = std::fs::File::open(filler).map_err(|e| path_context(e, "open", filler))?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let now = free()?;
        if now <= keep {
            return Ok(now);
        }
        let want = usize::try_from(now - keep).unwrap_or(CHUNK).min(CHUNK);
        if f.read(&mut buf[..want])
            .map_err(|e| path_context(e, "read", filler))?
            == 0
        {
            return free();
        }
    }
}

pub(crate) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(path_context(e, "remove", path)),
        _ => Ok(()),
    }
}

/// A file of `bytes` (the fill pattern), durable.
pub(crate) fn write_plain(path: &Path, bytes: u64) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| path_context(e, "create", path))?;
    let mut buf = ubio::AlignedBuf::page_aligned(1 << 20);
    engine::support::fill(&mut buf);
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
