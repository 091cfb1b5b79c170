//! `ubio-bench neighbours`: the neighbours users really have (issue 39).
//! PostgreSQL (pgbench read-only and read-write) and nginx (wrk, random
//! files of a set that fits), each measured alone and beside a real
//! stream (tar and restic backups of a tree, rsync and cp of an image),
//! the stream plain, under `ubio run`, under `ubio policy run`, and with
//! its tool's own option where it has one; under global pressure (a
//! balloon) and with the service and the stream in memory cgroups of
//! their own. Nothing of ours runs in the service.
//!
//! Phases, as the benchmark runner's ([`crate::harness::runner`]):
//!
//! 1. prepare: the programs found (a missing one is an error that names
//!    its Debian package), the scratch directory (removed at the end, on
//!    failure and on Ctrl-C, with everything the scenario made in it), the
//!    data the streams read, the plan ([`plan`]);
//! 2. per block (a pressure and a service, in the plan's random order):
//!    the two memory cgroups below our own, the service started in its
//!    own, its set made and cached, the balloon under global pressure;
//! 3. measure: every round runs every cell once in a new random order;
//!    each run settles first (the stream's data dropped from the page
//!    cache, under global pressure free memory refilled with clean cache
//!    as the runner does, the service's set read through again from its
//!    cgroup), starts the load, lets it run alone for the lead-in, runs
//!    the stream to durability (sampling the machine every second: the
//!    set's residency by cachestat, reclaim), lets the load run for the
//!    tail, and reads the load's latencies; the report is written after
//!    every run;
//! 4. conclude: the medians of the rounds ([`report::summarize`]).

pub mod latency;
#[cfg(test)]
pub(crate) mod mock;
pub mod plan;
pub mod report;
pub mod services;
pub mod streams;

use crate::clock::monotonic_secs;
use crate::cpu::{self, CpuTimes};
use crate::harness::runner::{environment, process, target, Progress};
use crate::harness::sampler::{self, SystemSampler};
use crate::harness::schema::{GlobalPressure, Sample, Target};
use crate::page_reporting;
use crate::path_context;
use plan::{Block, Cell, Load, Mode, Pressure, Service, Stream};
use report::{BlockSetup, CellRun, MachineSecond, NeighboursReport, Settings, StreamFigures};
use services::{Nginx, Postgres};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use streams::{Data, PolicyDaemon};
use ubio_testenv::balloon::Balloon;
use ubio_testenv::cgroup::MemCgroup;
use ubio_testenv::reclaim_trace::MemcgReclaimTrace;

/// A stream still running after this long is stopped and its run failed.
const STREAM_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long the daemon may take to let go of what a stream left.
const DAEMON_IDLE: Duration = Duration::from_secs(60);

/// What to run, and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the scratch directory is made.
    pub dir: PathBuf,
    /// Where the report files go (rewritten after every run).
    pub out: Option<PathBuf>,
    /// This program (the balloon's holder is `ubio-bench __worker balloon`).
    pub worker_exe: PathBuf,
    /// The `ubio` of the ubio-run and policy modes.
    pub ubio_exe: Option<PathBuf>,
    pub git_commit: Option<String>,
    pub settings: Settings,
    pub pressures: Vec<Pressure>,
    pub loads: Vec<Load>,
    pub streams: Vec<Stream>,
    pub modes: Vec<Mode>,
}

/// The programs `opts` needs, each with the Debian package that has it.
pub fn programs(opts: &Options) -> Vec<(&'static str, &'static str)> {
    let mut p = vec![
        ("setpriv", "util-linux"),
        ("find", "findutils"),
        ("cat", "coreutils"),
        ("sync", "coreutils"),
        ("id", "coreutils"),
    ];
    if opts.loads.iter().any(|l| l.service() == Service::Nginx) {
        p.extend([("nginx", "nginx"), ("wrk", "wrk")]);
    }
    for s in &opts.streams {
        p.push(match s {
            Stream::Tar => ("tar", "tar"),
            Stream::Restic => ("restic", "restic"),
            Stream::Rsync => ("rsync", "rsync"),
            Stream::Image => ("cp", "coreutils"),
        });
    }
    if opts.modes.contains(&Mode::Own) && opts.streams.contains(&Stream::Image) {
        p.push(("dd", "coreutils"));
    }
    p
}

/// What is missing here for `opts`, in words (None: nothing).
pub fn missing(opts: &Options) -> Option<String> {
    let mut gone: Vec<String> = programs(opts)
        .into_iter()
        .filter(|(p, _)| ubio_testenv::require_tool(p).is_err())
        .map(|(p, pkg)| format!("{p} (Debian package {pkg})"))
        .collect();
    if opts.loads.iter().any(|l| l.service() == Service::Postgres) {
        if let Err(e) = services::postgres_bin() {
            gone.push(e);
        }
    }
    if opts.modes.iter().any(|m| m.is_ubio()) && opts.ubio_exe.is_none() {
        gone.push(
            "ubio (for the ubio-run and policy modes: build ubio-cli, or set UBIO_EXE)".into(),
        );
    }
    (!gone.is_empty()).then(|| {
        format!(
            "missing: {} (scripts/install-deps.sh installs them)",
            gone.join(", ")
        )
    })
}

/// Runs the scenario (needs root) and returns its report.
pub fn run(opts: &Options, progress: &dyn Progress) -> io::Result<NeighboursReport> {
    let started = Instant::now();
    if !ubio_testenv::is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "ubio-bench neighbours needs root: it makes memory cgroups, a balloon and runs PostgreSQL as its user",
        ));
    }
    if let Some(m) = missing(opts) {
        return Err(io::Error::new(io::ErrorKind::NotFound, m));
    }
    ubio_testenv::cleanup::install_signal_handler()?;
    let s = &opts.settings;

    // 1. Prepare.
    let need = 4 * s.data_bytes + 2 * target::filler_room(s.memory_bytes) + (1 << 30);
    let scratch = target::make(
        &Target::Dir {
            path: opts.dir.clone(),
        },
        need,
        false,
    )?;
    searchable_by_others(&scratch.dir)?;
    let rsync_help = std::process::Command::new("rsync")
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let has_own = |st: Stream| streams::own_option(st, &rsync_help).is_ok();
    let want = plan::Want {
        pressures: &opts.pressures,
        loads: &opts.loads,
        streams: &opts.streams,
        modes: &opts.modes,
        rounds: s.rounds,
        has_own: &has_own,
    };
    let blocks = plan::plan(s.seed, &want);
    let mut settings = s.clone();
    settings.own_options = opts
        .streams
        .iter()
        .map(|&st| {
            (
                st,
                streams::own_option(st, &rsync_help)
                    .unwrap_or_else(|e| e)
                    .to_owned(),
            )
        })
        .collect();
    let mut report = NeighboursReport {
        schema: report::SCHEMA.into(),
        schema_version: report::SCHEMA_VERSION,
        settings,
        environment: environment::gather(
            &scratch.dir,
            &scratch.filesystem,
            &scratch.device,
            // Set from the first block's cgroups.
            "unknown",
            opts.git_commit.clone(),
        ),
        plan: blocks.clone(),
        setups: Vec::new(),
        runs: Vec::new(),
        summaries: Vec::new(),
        warnings: Vec::new(),
        complete: false,
        wall_secs: 0.0,
    };
    progress.message(&format!(
        "order seed {} (--seed {} runs the same order): {} runs in {} blocks",
        s.seed,
        s.seed,
        plan::runs(&blocks).count(),
        blocks.len()
    ));
    let data = streams::make_data(&scratch.dir.join("data"), s.data_bytes, &|m| {
        progress.message(m)
    })?;
    // Reclaim forced by a cgroup's limit is not in /proc/vmstat.
    let trace = match MemcgReclaimTrace::start() {
        Ok(t) => Some(t),
        Err(e) => {
            report.warnings.push(format!(
                "the memory cgroups' reclaim is not counted (kswapd and direct reclaim only): {e}"
            ));
            None
        }
    };
    let write = |r: &NeighboursReport| match &opts.out {
        Some(dir) => crate::harness::export::neighbours::write_all(r, dir).map(drop),
        None => Ok(()),
    };

    // 2 and 3: the blocks, each set up, measured and taken down.
    for (i, block) in blocks.iter().enumerate() {
        progress.message(&format!(
            "== block {}/{}: {} under {} pressure",
            i + 1,
            blocks.len(),
            block.service,
            block.pressure
        ));
        let mut env = BlockEnv::set_up(
            opts,
            block,
            &scratch.dir.join(format!("block{i}")),
            progress,
        )?;
        report.environment.cgroup_version = match env.stream_cg.version() {
            ubio_testenv::cgroup::CgroupVersion::V1 => "v1",
            ubio_testenv::cgroup::CgroupVersion::V2 => "v2",
        }
        .into();
        report.setups.push(env.setup.clone());
        report.warnings.append(&mut env.warnings);
        write(&report)?;
        for (order, round) in block.rounds.iter().zip(1u32..) {
            for &cell in order {
                let label = format!("{} {round}/{}: {cell}", block.pressure, s.rounds);
                let run =
                    env.measure(opts, &data, trace.as_ref(), round, cell, &label, progress)?;
                progress.message(&run_line(&label, &run));
                if let Some(e) = &run.error {
                    let w = format!("{label} failed: {e}");
                    progress.warning(&w);
                    report.warnings.push(w);
                }
                report.warnings.append(&mut env.warnings);
                report.runs.push(run);
                report.wall_secs = started.elapsed().as_secs_f64();
                write(&report)?;
            }
        }
        if let Some(w) = filler_warning(&env.free_after_filler, i + 1) {
            report.warnings.push(w);
        }
        if let (Some(b), Some(rec)) = (
            &env.balloon,
            report.setups.last_mut().and_then(|s| s.balloon.as_mut()),
        ) {
            rec.held_at_end_bytes = b.held_bytes();
            rec.shrinks = b.events();
            if !rec.shrinks.is_empty() {
                report.warnings.push(format!(
                    "the balloon gave memory back during block {} to keep {} MiB available: later runs had more memory than planned ({:?})",
                    i + 1,
                    rec.floor_bytes >> 20,
                    rec.shrinks
                ));
            }
        }
    }

    // 4. Conclude.
    report.summaries = report::summarize(&report.runs);
    report.complete = true;
    report.wall_secs = started.elapsed().as_secs_f64();
    write(&report)?;
    Ok(report)
}

/// PostgreSQL runs as the user postgres and nginx's worker as nobody: they
/// must reach the scratch directory.
fn searchable_by_others(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for d in dir.ancestors() {
        let meta = std::fs::metadata(d).map_err(|e| path_context(e, "stat", d))?;
        if meta.permissions().mode() & 0o001 == 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not searchable by other users (mode {:o}): PostgreSQL runs as the user postgres \
                     and must reach {}; use a --dir whose every parent has o+x",
                    d.display(),
                    meta.permissions().mode() & 0o7777,
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// A block's fixtures. Dropped in the order declared: the balloon, the
/// services, then the cgroups.
struct BlockEnv {
    setup: BlockSetup,
    warnings: Vec<String>,
    dir: PathBuf,
    balloon: Option<Balloon>,
    filler: Option<PathBuf>,
    /// Free memory after the filler was read through, before each run.
    free_after_filler: Vec<u64>,
    pg: Option<Postgres>,
    web: Option<Nginx>,
    /// The directory whose files are the service's set.
    set_dir: PathBuf,
    service_cg: MemCgroup,
    stream_cg: MemCgroup,
}

impl BlockEnv {
    fn set_up(
        opts: &Options,
        block: &Block,
        dir: &Path,
        progress: &dyn Progress,
    ) -> io::Result<BlockEnv> {
        let s = &opts.settings;
        std::fs::create_dir_all(dir).map_err(|e| path_context(e, "mkdir", dir))?;
        let half = s.memory_bytes / 2;
        let (service_limit, stream_limit) = match block.pressure {
            Pressure::Cgroup => (half, half),
            Pressure::Global => (u64::MAX, u64::MAX),
        };
        // The stream has a cgroup under global pressure too: the policy
        // daemon's scope names it.
        let service_cg = MemCgroup::create("ubio-bench-service", service_limit)?;
        let stream_cg = MemCgroup::create("ubio-bench-stream", stream_limit)?;
        let mut warnings = Vec::new();
        let (mut pg, mut web) = (None, None);
        let set_dir = match block.service {
            Service::Postgres => {
                progress.message(&format!(
                    "starting PostgreSQL in {} and making a pgbench database of scale {}",
                    dir.display(),
                    s.pgbench_scale
                ));
                // Small shared buffers: the database lives in the page cache,
                // as a default 128 MB does beside a database of gigabytes.
                let shared = (s.memory_bytes / 32).max(16 << 20);
                let p = Postgres::start(&dir.join("pg"), &service_cg, shared)?;
                p.make_database(s.pgbench_scale)?;
                let d = p.data.join("base");
                pg = Some(p);
                d
            }
            Service::Nginx => {
                let count = (s.web_set_bytes / s.web_file_bytes).max(1);
                progress.message(&format!(
                    "starting nginx in {} with {count} files of {} KiB",
                    dir.display(),
                    s.web_file_bytes >> 10
                ));
                std::fs::create_dir_all(dir.join("web/tmp"))
                    .map_err(|e| path_context(e, "mkdir", dir))?;
                let n = Nginx::start(&dir.join("web"), &service_cg, count, s.web_file_bytes)?;
                let d = n.www.clone();
                web = Some(n);
                d
            }
        };
        let set_bytes = services::files_under(&set_dir)?
            .iter()
            .filter_map(|f| f.metadata().ok())
            .map(|m| m.len())
            .sum();
        let (mut balloon, mut record, mut filler) = (None, None, None);
        if block.pressure == Pressure::Global {
            let p = GlobalPressure {
                leave_bytes: s.memory_bytes,
                floor_bytes: (s.memory_bytes / 2).max(ubio_testenv::balloon::min_floor(
                    ubio::procfs::meminfo_field("MemTotal").unwrap_or(0),
                )),
            };
            let (b, rec) = inflate(&opts.worker_exe, p, s.data_bytes, progress, &mut warnings)?;
            // The runner's filler: the clean cache that holds free memory
            // small before every run (see process::FREE_KEPT).
            let f = dir.join("filler");
            let bytes = (rec.available_after_bytes + (256 << 20))
                .max(p.leave_bytes)
                .min(target::filler_room(p.leave_bytes));
            process::write_plain(&f, bytes)?;
            process::drop_cached(&f)?;
            balloon = Some(b);
            record = Some(rec);
            filler = Some(f);
        }
        if set_bytes > s.memory_bytes / 2 {
            warnings.push(format!(
                "the {} set ({} MiB) is more than half the {} MiB left: it may not stay cached even alone",
                block.service,
                set_bytes >> 20,
                s.memory_bytes >> 20
            ));
        }
        Ok(BlockEnv {
            setup: BlockSetup {
                pressure: block.pressure,
                service: block.service,
                set_bytes,
                service_limit_bytes: (service_limit != u64::MAX).then(|| service_cg.limit_bytes()),
                stream_limit_bytes: (stream_limit != u64::MAX).then(|| stream_cg.limit_bytes()),
                balloon: record,
            },
            warnings,
            dir: dir.to_path_buf(),
            balloon,
            filler,
            free_after_filler: Vec::new(),
            pg,
            web,
            set_dir,
            service_cg,
            stream_cg,
        })
    }

    /// Before a run: the streams' data and last output out of the page
    /// cache, free memory refilled under global pressure, the service's
    /// set read through from its cgroup, PostgreSQL checkpointed.
    fn settle(&mut self, data: &Data, out: &Path) -> io::Result<()> {
        if out.exists() {
            std::fs::remove_dir_all(out).map_err(|e| path_context(e, "remove", out))?;
        }
        for f in data.tree_files.iter().chain(std::iter::once(&data.image)) {
            process::drop_cached(f)?;
        }
        if let Some(pg) = &self.pg {
            pg.checkpoint()?;
        }
        if let Some(f) = &self.filler {
            self.free_after_filler
                .push(process::refill(f, process::FREE_KEPT)?);
        }
        services::warm(&self.service_cg, &self.set_dir)
    }

    #[allow(clippy::too_many_arguments)]
    fn measure(
        &mut self,
        opts: &Options,
        data: &Data,
        trace: Option<&MemcgReclaimTrace>,
        round: u32,
        cell: Cell,
        label: &str,
        progress: &dyn Progress,
    ) -> io::Result<CellRun> {
        let s = &opts.settings;
        let out = self.dir.join("out");
        self.settle(data, &out)?;
        let mut run = CellRun {
            pressure: self.setup.pressure,
            round,
            cell,
            error: None,
            service: None,
            stream: None,
            set_cached_start_bytes: 0,
            set_cached_min_bytes: 0,
            set_cached_end_bytes: 0,
            seconds: Vec::new(),
            machine: Vec::new(),
        };
        if let Some(b) = cell.beside {
            streams::prepare_output(b.stream, &out)?;
        }
        let daemon = match cell.beside {
            Some(b) if b.mode == Mode::Policy => Some(PolicyDaemon::start(
                ubio_exe(opts)?,
                &self.dir.join("policy"),
                &self.stream_cg,
            )?),
            _ => None,
        };
        progress.message(&format!("{label}: the load alone for {:.0} s", s.lead_secs));
        let load = services::start_load(
            cell.load,
            self.pg.as_ref(),
            self.web.as_ref(),
            s.clients,
            &self.dir.join("load"),
        )?;
        sleep(s.lead_secs);
        let set_files = services::files_under(&self.set_dir)?;
        let reported = page_reporting::Reported::start(Path::new(page_reporting::SYSFS));
        let (t0_us, t0) = (services::now_us(), monotonic_secs());
        let daemon_cpu_at_start = daemon.as_ref().and_then(PolicyDaemon::cpu_times);
        let mut stream_cpu: Option<CpuTimes> = None;
        let mut sampler =
            SystemSampler::start(Some(&self.stream_cg), trace, set_files.clone(), t0)?;
        run.set_cached_start_bytes = sampler::dataset_cache(&set_files).0;
        let mut samples: Vec<Sample> = Vec::new();
        let mut next = t0 + 1.0;
        let mut sample_until = |samples: &mut Vec<Sample>,
                                end: f64,
                                done: &mut dyn FnMut() -> io::Result<bool>|
         -> io::Result<()> {
            loop {
                if done()? {
                    return Ok(());
                }
                if monotonic_secs() >= next {
                    samples.push(sampler.sample(next, 0, sampler::cpu(0.0, 0.0))?);
                    next += 1.0;
                }
                if monotonic_secs() >= end {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let outcome: io::Result<()> = match cell.beside {
            None => {
                let end = t0 + s.alone_secs;
                let mut done = || Ok(monotonic_secs() >= end);
                sample_until(&mut samples, end + 1.0, &mut done)
            }
            Some(b) => {
                progress.message(&format!("{label}: the stream"));
                let ubio = opts.ubio_exe.clone().unwrap_or_default();
                let mut cmd = streams::command(b.stream, b.mode, data, &out, &ubio);
                let err_path = self.dir.join("stream.err");
                let err = std::fs::File::create(&err_path)
                    .map_err(|e| path_context(e, "create", &err_path))?;
                cmd.stderr(err);
                let mut child = self.stream_cg.spawn(&mut cmd)?;
                let exited = ubio::sys::pidfd_open(child.id())?;
                let mut status = None;
                let mut done = || -> io::Result<bool> {
                    if !ubio::sys::poll_readable(exited.as_fd(), Duration::ZERO)? {
                        return Ok(false);
                    }
                    // Exited, not reaped yet: its /proc/PID/stat still
                    // holds the whole command's CPU time.
                    stream_cpu = cpu::pid_tree_times(child.id());
                    status = child.try_wait()?;
                    Ok(status.is_some())
                };
                let r = sample_until(&mut samples, t0 + STREAM_TIMEOUT.as_secs_f64(), &mut done);
                let r = match (r, status) {
                    (Err(e), _) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        Err(e)
                    }
                    (Ok(()), Some(st)) if !st.success() => {
                        let mut text = String::new();
                        let _ = std::fs::File::open(&err_path)
                            .and_then(|mut f| f.read_to_string(&mut text));
                        Err(io::Error::other(format!(
                            "{} exited with {st}: {}",
                            b.stream,
                            text.trim()
                        )))
                    }
                    (Ok(()), _) => streams::make_durable(&out),
                };
                r
            }
        };
        let (t1_us, t1) = (services::now_us(), monotonic_secs());
        if t1 - (next - 1.0) > 0.005 || samples.is_empty() {
            samples.push(sampler.sample(t1.max(next - 1.0 + 1e-3), 0, sampler::cpu(0.0, 0.0))?);
        }
        run.set_cached_end_bytes = sampler::dataset_cache(&set_files).0;
        let mut daemon_cpu = None;
        if let Some(d) = daemon {
            if !d.wait_idle(DAEMON_IDLE) {
                self.warnings.push(format!("{label}: the policy daemon still managed files {DAEMON_IDLE:?} after the stream"));
            }
            daemon_cpu = d
                .cpu_times()
                .zip(daemon_cpu_at_start)
                .map(|(b, a)| b.since(a));
        }
        sleep(s.lead_secs);
        let measured = load.finish();
        if let Err(e) = outcome {
            run.error = Some(e.to_string());
        }
        let measured = match measured {
            Ok(m) => m,
            Err(e) => {
                run.error.get_or_insert(e.to_string());
                return Ok(run);
            }
        };
        run.service = Some(measured.window(t0_us, t1_us));
        run.seconds = measured.seconds(t0_us);
        run.set_cached_min_bytes = samples
            .iter()
            .map(|x| x.dataset_cached_bytes)
            .chain([run.set_cached_start_bytes, run.set_cached_end_bytes])
            .min()
            .unwrap_or(0);
        let reclaimed = |x: &Sample| {
            x.pgsteal_kswapd + x.pgsteal_direct + x.memcg_limit_reclaimed_pages.unwrap_or(0)
        };
        run.machine = samples
            .iter()
            .map(|x| MachineSecond {
                t_secs: x.t_secs,
                set_cached_bytes: x.dataset_cached_bytes,
                reclaimed_pages: reclaimed(x),
                free_bytes: x.free_bytes,
                dirty_writeback_bytes: x.dirty_bytes + x.writeback_bytes,
            })
            .collect();
        if cell.beside.is_some() && run.error.is_none() {
            let bytes = data.bytes;
            let secs = t1 - t0;
            let pages: u64 = samples.iter().map(reclaimed).sum();
            run.stream = Some(StreamFigures {
                bytes,
                secs,
                mb_per_s: bytes as f64 / 1e6 / secs.max(1e-9),
                reclaimed_pages: pages,
                reclaimed_pages_per_gb: pages as f64 / (bytes as f64 / 1e9),
                cgroup_cache_peak_bytes: samples.iter().filter_map(|x| x.cgroup_cached_bytes).max(),
                reported_to_host_bytes: reported.bytes_since(),
                cpu_secs: stream_cpu.map(CpuTimes::total_secs),
                daemon_cpu_secs: daemon_cpu.map(CpuTimes::total_secs),
                kswapd_cpu_secs: Some(samples.iter().map(|x| x.kswapd_cpu_secs).sum()),
            });
        }
        Ok(run)
    }
}

/// The balloon, planned again from what is available now when others took
/// memory while it inflated (the holder then refuses to pass its floor):
/// on a shared machine that happens.
fn inflate(
    worker_exe: &Path,
    p: GlobalPressure,
    dataset: u64,
    progress: &dyn Progress,
    warnings: &mut Vec<String>,
) -> io::Result<(Balloon, crate::harness::schema::PressureRecord)> {
    const TRIES: u32 = 3;
    let mut attempt = 1;
    loop {
        match process::inflate(worker_exe, p, dataset, progress) {
            Err(e) if attempt < TRIES && e.to_string().contains("less to spare than planned") => {
                let w =
                    format!("global pressure, attempt {attempt} of {TRIES}: {e}; planning again");
                progress.warning(&w);
                warnings.push(w);
                attempt += 1;
                std::thread::sleep(Duration::from_secs(2));
            }
            r => return r,
        }
    }
}

fn ubio_exe(opts: &Options) -> io::Result<&Path> {
    opts.ubio_exe.as_deref().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no ubio binary for the ubio-run and policy modes",
        )
    })
}

/// One warning for a block whose runs started with more free memory than
/// the filler should leave.
fn filler_warning(free: &[u64], block: usize) -> Option<String> {
    let high: Vec<u64> = free
        .iter()
        .copied()
        .filter(|&f| f > 2 * process::FREE_KEPT)
        .collect();
    let (lo, hi) = (high.iter().min()?, high.iter().max()?);
    Some(format!(
        "block {block}: {} MiB stayed free after the filler file was read through before {} of its {} runs \
         ({} MiB meant): those runs had more memory than planned and may take pages the VM handed back to its host",
        if lo == hi { format!("{}", lo >> 20) } else { format!("{}-{}", lo >> 20, hi >> 20) },
        high.len(),
        free.len(),
        process::FREE_KEPT >> 20
    ))
}

fn sleep(secs: f64) {
    std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
}

/// One line per finished run.
pub fn run_line(label: &str, run: &CellRun) -> String {
    if let Some(e) = &run.error {
        return format!("{label}: FAILED: {e}");
    }
    let mut line = format!("{label}:");
    if let Some(sv) = &run.service {
        if let Some(l) = sv.latency {
            line += &format!(
                " {:.0} {}, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms",
                sv.rate,
                run.cell.load.unit(),
                l.p50_ms,
                l.p99_ms,
                l.p999_ms
            );
        }
    }
    line += &format!(
        "; set cached {} -> min {}",
        sampler::short_bytes(run.set_cached_start_bytes),
        sampler::short_bytes(run.set_cached_min_bytes)
    );
    if let Some(st) = &run.stream {
        line += &format!(
            "; stream {:.0} MB/s in {:.1} s, {:.0} pages reclaimed/GB",
            st.mb_per_s, st.secs, st.reclaimed_pages_per_gb
        );
        if let Some(c) = st.cpu_secs_per_gb() {
            line += &format!(", CPU {c:.2} s/GB");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_filler_warning_per_block_with_the_range() {
        let meant = process::FREE_KEPT;
        assert_eq!(filler_warning(&[meant, meant / 2], 1), None);
        let w = filler_warning(&[meant, 600 << 20, 800 << 20], 2).unwrap();
        assert!(w.starts_with("block 2: 600-800 MiB stayed free"), "{w}");
        assert!(w.contains("before 2 of its 3 runs"), "{w}");
    }
}
