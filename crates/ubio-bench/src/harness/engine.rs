//! The engine: one run of a workload in one mode, inside a worker process
//! (`ubio __worker bench JOB`, spawned into the memory cgroup).
//!
//! `threads` threads each work through their own files (see
//! [`data::Layout`]): reading them in order or at random block offsets,
//! writing them (fresh for sequential writes, overwriting in place for
//! random ones), or copying them. Writes end with an fsync of every file
//! written, and that time counts: a write run is timed to durability. The
//! in-process modes move every block with their own calls ([`sync_io`] for
//! one request in flight, [`uring`] for `queue_depth`); the tool modes run an
//! external command per file ([`tools`]) and fsync the copies afterwards.
//!
//! While it runs the engine reports every [`PROGRESS_EVERY`] how many bytes
//! it has moved and how much CPU it (and its children) used, so the parent
//! can cut the run into per-second samples.

pub mod data;
pub mod support;
mod sync_io;
mod tools;
// Pushing an SQE is unsafe in the io_uring crate: the buffers must outlive
// the request, which the engine guarantees by waiting for every completion.
#[allow(unsafe_code)]
mod uring;

use super::mode::{Backable, BenchMode, Tool, WorkloadKind};
use super::schema::Workload;
use crate::clock::monotonic_secs;
use crate::cpu::{self, CpuTimes};
use data::Layout;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use support::{fill, DIRECT_ALIGN};

/// How often the engine reports progress.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// One run, as the parent hands it to the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineJob {
    pub workload: Workload,
    pub mode: BenchMode,
    pub layout: Layout,
    /// The `ubio` binary, for the ubio-cat, ubio-cp and ubio-run-* tools
    /// (None: not found, and no such mode runs).
    pub ubio_exe: Option<PathBuf>,
    /// The threads (streams) this process runs, when the workload's streams
    /// are spread over several processes (None: all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<std::ops::Range<u32>>,
    /// Say `bench_ready` and wait for a line on stdin before starting the
    /// clock: the parent starts the processes of one run together.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_go: bool,
}

impl EngineJob {
    /// The threads this process runs.
    pub fn lanes(&self) -> std::ops::Range<u32> {
        self.lanes.clone().unwrap_or(0..self.layout.threads)
    }
}

/// The engine has opened nothing yet and is about to start the clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EngineStart {
    pub start_mono_secs: f64,
}

/// Progress so far: bytes moved and CPU used since the start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EngineProgress {
    pub t_mono_secs: f64,
    pub bytes: u64,
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineResult {
    /// Bytes read, written or copied (a copied byte counts once).
    pub bytes: u64,
    pub start_mono_secs: f64,
    /// After the last request and, for writes, the fsyncs.
    pub end_mono_secs: f64,
    /// After the last request, before the fsyncs.
    pub io_end_mono_secs: f64,
    /// Of the engine process, its threads and its children (tools).
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
    /// What moved the data and why (see [`crate::harness::schema::Run`]).
    pub backend: String,
    pub reason: String,
    /// `ubio::Stats` of every file, for the ubio modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubio_stats: Option<serde_json::Value>,
    /// The duration cap ended the run before the dataset was done.
    #[serde(default)]
    pub capped: bool,
}

impl EngineResult {
    pub fn secs(&self) -> f64 {
        self.end_mono_secs - self.start_mono_secs
    }
}

/// What the engine reports while it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Report {
    Started(EngineStart),
    Progress(EngineProgress),
}

/// State shared by the engine's threads.
pub(crate) struct Shared {
    /// Bytes completed so far, over all threads.
    pub bytes: AtomicU64,
    /// Set by the duration cap or by a failing thread: stop submitting.
    pub stop: AtomicBool,
    /// Pids of tool processes running now (their CPU is not yet in
    /// RUSAGE_CHILDREN).
    pub children: Mutex<Vec<u32>>,
}

impl Shared {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }
}

/// What one thread did.
#[derive(Debug, Default)]
pub(crate) struct LaneOutcome {
    pub backend: String,
    pub reason: String,
    pub ubio_stats: Vec<serde_json::Value>,
    pub io_end_mono_secs: f64,
    /// After the thread's last fsync.
    pub end_mono_secs: f64,
}

/// Runs `job` in this process, calling `report` at the start and every
/// [`PROGRESS_EVERY`]; an error from `report` stops the run.
pub fn run(
    job: &EngineJob,
    mut report: impl FnMut(Report) -> io::Result<()>,
) -> io::Result<EngineResult> {
    check_job(job)?;
    let shared = Shared {
        bytes: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        children: Mutex::new(Vec::new()),
    };
    let cpu_start = cpu_now(&shared)?;
    let start = monotonic_secs();
    report(Report::Started(EngineStart {
        start_mono_secs: start,
    }))?;
    let deadline = job.workload.duration_secs.map(|d| start + d);
    let (outcomes, report_error) = std::thread::scope(|s| {
        let lanes: io::Result<Vec<_>> = job
            .lanes()
            .map(|t| {
                let shared = &shared;
                std::thread::Builder::new()
                    .name(format!("bench-{t}"))
                    .spawn_scoped(s, move || {
                        let r = lane(job, t, shared).map(|mut o| {
                            o.end_mono_secs = monotonic_secs();
                            o
                        });
                        if r.is_err() {
                            shared.stop.store(true, Ordering::Relaxed);
                        }
                        r
                    })
            })
            .collect::<io::Result<_>>();
        let lanes: Vec<_> = match lanes {
            Ok(l) => l,
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                return (vec![Err(e)], None);
            }
        };
        let mut report_error = None;
        while !lanes.iter().all(|h| h.is_finished()) {
            std::thread::sleep(PROGRESS_EVERY);
            let now = monotonic_secs();
            if deadline.is_some_and(|d| now >= d) {
                shared.stop.store(true, Ordering::Relaxed);
            }
            if report_error.is_some() {
                continue;
            }
            let sent = cpu_now(&shared).and_then(|c| {
                let c = c.since(cpu_start);
                report(Report::Progress(EngineProgress {
                    t_mono_secs: now,
                    bytes: progress_bytes(job, &shared),
                    cpu_user_secs: c.user_secs,
                    cpu_sys_secs: c.sys_secs,
                }))
            });
            if let Err(e) = sent {
                shared.stop.store(true, Ordering::Relaxed);
                report_error = Some(e);
            }
        }
        let outcomes: Vec<io::Result<LaneOutcome>> = lanes
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a bench thread panicked")))
            })
            .collect();
        (outcomes, report_error)
    });
    if let Some(e) = report_error {
        return Err(e);
    }
    let mut done = Vec::new();
    for o in outcomes {
        done.push(o?);
    }
    // The threads' own ends: the progress loop above wakes only every
    // PROGRESS_EVERY, which must not count.
    let end = done.iter().map(|o| o.end_mono_secs).fold(start, f64::max);
    let cpu = cpu_now(&shared)?.since(cpu_start);
    let first = done.first().map(|o| (o.backend.clone(), o.reason.clone()));
    let (backend, reason) = first.unwrap_or_default();
    let stats: Vec<serde_json::Value> = done
        .iter_mut()
        .flat_map(|o| o.ubio_stats.drain(..))
        .collect();
    let bytes = shared.bytes.load(Ordering::Relaxed);
    Ok(EngineResult {
        bytes,
        start_mono_secs: start,
        end_mono_secs: end,
        io_end_mono_secs: done
            .iter()
            .map(|o| o.io_end_mono_secs)
            .fold(start, f64::max),
        cpu_user_secs: cpu.user_secs,
        cpu_sys_secs: cpu.sys_secs,
        backend,
        reason,
        ubio_stats: (!stats.is_empty()).then_some(serde_json::Value::Array(stats)),
        capped: bytes < job.layout.lane_bytes(job.lanes().len() as u32),
    })
}

fn lane(job: &EngineJob, thread: u32, shared: &Shared) -> io::Result<LaneOutcome> {
    match job.mode {
        BenchMode::Tool(tool) => tools::lane(job, tool, thread, shared),
        // The twin moves its bytes as its mode does (the parent backed its
        // pages before starting the worker).
        BenchMode::Backed(b) => lane(
            &EngineJob {
                mode: b.mode(),
                ..job.clone()
            },
            thread,
            shared,
        ),
        _ if job.mode.caps().uring => uring::lane(job, thread, shared),
        _ => sync_io::lane(job, thread, shared),
    }
}

/// Copy tools write their copies themselves: progress is what the copies
/// hold. (Read tools count each file when it is done.)
fn progress_bytes(job: &EngineJob, shared: &Shared) -> u64 {
    let counted = shared.bytes.load(Ordering::Relaxed);
    let tool = match job.mode {
        BenchMode::Tool(t) | BenchMode::Backed(Backable::Tool(t)) => t,
        _ => return counted,
    };
    if tool.caps().workload != WorkloadKind::Copy {
        return counted;
    }
    let on_disk: u64 = job
        .layout
        .copies()
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    on_disk.max(counted)
}

/// This process's CPU, with its waited-for children and the running ones.
fn cpu_now(shared: &Shared) -> io::Result<CpuTimes> {
    let own = cpu::process_times()?;
    let waited = cpu::children_times()?;
    let running = shared
        .children
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|&pid| cpu::pid_times(pid))
        .fold(CpuTimes::default(), CpuTimes::plus);
    Ok(own.plus(waited).plus(running))
}

fn check_job(job: &EngineJob) -> io::Result<()> {
    let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
    let w = &job.workload;
    if !job.mode.supports(w.kind) {
        return bad(format!(
            "mode {} cannot run a {} workload (a tool runs only its own)",
            job.mode, w.kind
        ));
    }
    if job.lanes().end > job.layout.threads || job.lanes().is_empty() {
        return bad(format!(
            "threads {:?} of a workload of {}",
            job.lanes(),
            job.layout.threads
        ));
    }
    if job.layout.shared && matches!(job.mode, BenchMode::Tool(_)) {
        return bad(format!(
            "{}: a tool reads or writes whole files, not a region of a shared file",
            job.mode
        ));
    }
    if job.layout.block_bytes < data::STAMP_BYTES as u64 || job.layout.block_bytes > 1 << 30 {
        return bad(format!(
            "block size {} out of range (16 B to 1 GiB)",
            job.layout.block_bytes
        ));
    }
    Ok(())
}

/// Whether `mode` can run `w` in `dir` on this machine. Fails up front,
/// with a message that says why and what to do, when it cannot:
/// RWF_DONTCACHE where the kernel or filesystem lacks it (btrfs, tmpfs),
/// O_DIRECT where the filesystem refuses it or the block size does not fit
/// its alignment, a ubio backend that cannot work here, a missing tool.
pub fn check_mode(
    mode: BenchMode,
    w: &Workload,
    dir: &Path,
    ubio_exe: Option<&Path>,
) -> io::Result<()> {
    let unsupported = |m: String| io::Error::new(io::ErrorKind::Unsupported, m);
    if !mode.supports(w.kind) {
        return Err(unsupported(format!(
            "{mode} does not run a {} workload",
            w.kind
        )));
    }
    let mode = match mode {
        BenchMode::Backed(b) => b.mode(),
        m => m,
    };
    if let BenchMode::Tool(tool) = mode {
        if w.shared_file {
            return Err(unsupported(format!(
                "{mode} reads or writes whole files, not a region of a shared file"
            )));
        }
        return check_tool(tool, ubio_exe);
    }
    let probe = dir.join(".ubio-bench-probe");
    let block = w.block_bytes.max(DIRECT_ALIGN);
    let mut buf = ubio::AlignedBuf::page_aligned(block as usize);
    fill(&mut buf);
    std::fs::write(&probe, &buf[..]).map_err(|e| crate::path_context(e, "write", &probe))?;
    let result = check_caps(mode, w.block_bytes, block as usize, &probe);
    let _ = std::fs::remove_file(&probe);
    result
}

/// Whether the kernel paths in `mode`'s row of the capability table work on
/// the file `probe`: RWF_DONTCACHE, O_DIRECT (and `block` fitting its
/// alignment), io_uring; a ubio mode opens its backend.
fn check_caps(mode: BenchMode, block: u64, probe_len: usize, probe: &Path) -> io::Result<()> {
    if let BenchMode::Ubio(kind) = mode {
        return ubio::OpenOptions::new()
            .read(true)
            .write(true)
            .backend(kind)
            .open(probe)
            .and_then(|f| f.close())
            .map(drop)
            .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, format!("{mode}: {e}")));
    }
    let caps = mode.caps();
    let direct = caps.open_flags & libc::O_DIRECT != 0;
    if caps.rw_flags & ubio::sys::RwFlags::DONTCACHE.0 != 0 && !caps.uring {
        support::check_dontcache(probe)?;
    }
    if direct {
        if !caps.uring {
            support::check_direct(probe)?;
        }
        check_direct_block(block, probe)?;
    }
    if caps.uring {
        uring::probe(probe, direct, probe_len)?;
    }
    Ok(())
}

/// O_DIRECT moves whole aligned requests: the block must be a multiple of
/// 4096 and of the file's direct I/O alignment, where statx reports one.
fn check_direct_block(block: u64, probe: &Path) -> io::Result<()> {
    let unsupported = |m: String| Err(io::Error::new(io::ErrorKind::Unsupported, m));
    if !block.is_multiple_of(DIRECT_ALIGN) {
        return unsupported(format!(
            "O_DIRECT needs requests in multiples of {DIRECT_ALIGN} bytes; the block is {block}: use --block 4K or larger"
        ));
    }
    let f = std::fs::File::open(probe)?;
    if let Ok(Some(a)) = ubio::sys::statx_dio_align(f.as_fd()) {
        let (mem, off) = (u64::from(a.mem_align), u64::from(a.offset_align));
        if !DIRECT_ALIGN.is_multiple_of(mem.max(1)) || !block.is_multiple_of(off.max(1)) {
            return unsupported(format!(
                "O_DIRECT here needs buffers aligned to {mem} and requests to {off} bytes; the block is {block}"
            ));
        }
    }
    Ok(())
}

fn check_tool(tool: Tool, ubio_exe: Option<&Path>) -> io::Result<()> {
    let unsupported = |m: String| io::Error::new(io::ErrorKind::Unsupported, m);
    let caps = tool.caps();
    for p in caps.programs {
        ubio_testenv::require_tool(p).map_err(|e| {
            unsupported(format!(
                "{}: `{p}` is not installed ({e}); get it with {}",
                tool.name(),
                caps.install
            ))
        })?;
    }
    let ubio_exe = match ubio_exe {
        Some(exe) if exe.is_file() => exe,
        _ if !caps.ubio => return Ok(()),
        Some(exe) => {
            return Err(unsupported(format!(
                "{}: no ubio binary at {}",
                tool.name(),
                exe.display()
            )))
        }
        None => {
            return Err(unsupported(format!(
                "{}: the ubio program was not found (in UBIO_EXE, beside ubio-bench or on PATH): \
                 install the ubio package, or build it with cargo build --release -p ubio-cli",
                tool.name()
            )))
        }
    };
    if caps.shim {
        let out = std::process::Command::new(ubio_exe)
            .args(["run", "--", "true"])
            .stdin(std::process::Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(unsupported(format!(
                "{}: `ubio run -- true` failed ({}): {}",
                tool.name(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}
