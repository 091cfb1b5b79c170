//! `ubio run [--window SIZE] [--backend NAME] [--log] -- CMD [ARGS...]` and
//! `ubio run --pid PID`: uncached I/O for unmodified programs, two ways at
//! once. The LD_PRELOAD shim (libubio_preload.so) goes into every
//! dynamically linked program of the tree and manages the files the
//! program reads and writes through read()/write() and their kin: exactly,
//! and it can make a writer wait. The engine (ubio_engine::follow), in this
//! process, watches the file positions of every process of the tree and
//! covers what the shim cannot see: stdio, statically linked programs,
//! inherited descriptors; files the shim manages are claimed by it and left
//! alone. `ubio` stays the program's parent until it exits, then exits as
//! it did (same code, or killed by the same signal).

use anyhow::{bail, Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use ubio_engine::{FollowOptions, FollowStats, Follower};

/// `--help`: the examples (as `-h` shows them), then what is exact and what is
/// best effort.
const EXAMPLES_EXACT_AND_BEST_EFFORT: &str = "\
Examples:
  ubio run -- tar cf /mnt/backup.tar /data
  ubio run --window 64M --log -- rsync -a src/ dst/
  ubio run --pid 4242          # a backup that is already running (or: ubio attach 4242)

Two mechanisms cover the program and every process it starts:
  - the shim (LD_PRELOAD), in dynamically linked programs, for files they read and
    write with read()/write() and their kin (cat, cp, gzip, tar, python, perl, node):
    exact. Reads: drop-behind, pages cached before kept. Writes: dirty + writeback
    stays within --window; the writer waits for its writeback when it is ahead.
  - the engine, in `ubio`, for everything else: stdio (fread/fwrite: sha256sum, md5sum,
    zstd, base64), statically linked programs (Go, musl), descriptors inherited from
    the shell or passed across fork and exec. It watches each open file's position
    (/proc/PID/fdinfo) every 2-10 ms (faster streams, shorter intervals) and applies
    the same policies through its own descriptor. A copy the kernel makes in one
    long call (copy_file_range, sendfile: Go's io.Copy between two files) or with
    explicit offsets (splice) moves no position while it runs: where no position
    moved, the engine follows the pages it leaves (cachestat, 2 MiB at a time) and
    applies the same policies to them. Best effort: pages passed before it first saw
    a file are the stream's own only if the rest of the file is cold (else kept);
    readers through mmap() or scattered pread() are seen only when they close the
    file; a writer cannot be made to wait. Writeback starts within a look of half a
    window written, and pages go once written back, so a writer's
    dirty + writeback stays within --window + what it wrote - what the device has
    written back since: about --window + its speed x (a look + the device's latency)
    on a device as fast as the writer, growing by (writer - device) bytes a second on
    a slower one, up to the kernel's dirty limits, which then make the writer wait.
With --pid, only the engine (a running process cannot load the shim); leaving (when
the process exits, or on Ctrl-C) sends it no signal and leaves nothing open in it.";

#[derive(clap::Args)]
#[command(after_long_help = EXAMPLES_EXACT_AND_BEST_EFFORT)]
pub struct Args {
    /// Dirty + writeback bytes per file (e.g. 16M).
    #[arg(long, value_parser = crate::size::parse_nonzero)]
    window: Option<u64>,
    /// Backend: auto, kernel, emulated, direct or buffered.
    #[arg(long)]
    backend: Option<ubio::BackendKind>,
    /// Log each managed file's backend and statistics at close (to stderr,
    /// or to the file named by UBIO_LOG_FILE), and the engine's work and CPU
    /// time at the end.
    #[arg(long)]
    log: bool,
    /// Attach to a running process and its children instead of starting a
    /// command, until it exits or ubio is interrupted (Ctrl-C).
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pid: Option<u32>,
    /// Hold every writer of every disk at this much dirty + writeback
    /// (e.g. 64M) while the command runs: the kernel makes a writer faster
    /// than its device wait, which the engine cannot (Linux 6.2+:
    /// /sys/class/bdi strict_limit and max_bytes; machine-wide for those
    /// devices, put back at the end; needs root).
    #[arg(long, value_name = "SIZE", value_parser = crate::size::parse_nonzero)]
    device_dirty_limit: Option<u64>,
    /// The command and its arguments.
    #[arg(
        required_unless_present = "pid",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// `ubio attach PID`: the same as `ubio run --pid PID`.
#[derive(clap::Args)]
pub struct AttachArgs {
    /// Dirty + writeback bytes per file (e.g. 16M).
    #[arg(long, value_parser = crate::size::parse_nonzero)]
    window: Option<u64>,
    /// Log the engine's work per file and its CPU time at the end.
    #[arg(long)]
    log: bool,
    /// The running process (its children are followed too).
    #[arg(value_name = "PID")]
    pid: u32,
}

pub fn attach_cmd(a: AttachArgs) -> Result<ExitCode> {
    run(Args {
        window: a.window,
        backend: None,
        log: a.log,
        pid: Some(a.pid),
        device_dirty_limit: None,
        command: Vec::new(),
    })
}

/// How long the engine waits, at the end, for the writeback of what the
/// program wrote before dropping it (what is still dirty then stays).
const FINAL_WRITEBACK: Duration = Duration::from_secs(600);

pub fn run(args: Args) -> Result<ExitCode> {
    let opts = FollowOptions {
        window: args.window.unwrap_or(ubio::DEFAULT_WINDOW),
        ..FollowOptions::default()
    };
    // Put back when dropped: at the end of this function, or before ubio
    // dies of the program's signal.
    let limits = match args.device_dirty_limit {
        Some(bytes) => {
            let (limits, lines) =
                ubio_engine::bdi::limit_devices(ubio_engine::bdi::data_filesystems(), bytes);
            for l in lines {
                log::info!("{l}");
            }
            if limits.is_empty() {
                bail!("--device-dirty-limit: no device could be limited (root and Linux 6.2 are needed; UBIO_LOG=info says why)");
            }
            limits
        }
        None => Vec::new(),
    };
    if let Some(pid) = args.pid {
        return attach(pid, opts, args.log);
    }
    let lib = crate::shim::find()?;
    let (cmd, rest) = args.command.split_first().expect("clap requires CMD");
    let Some(exe) = which(cmd) else {
        eprintln!("ubio run: {}: command not found", Path::new(cmd).display());
        return Ok(ExitCode::from(127));
    };
    if exe.is_dir() {
        eprintln!("ubio run: {}: Is a directory", exe.display());
        return Ok(ExitCode::from(126));
    }
    let mut engine = Follower::new(opts);
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let mut c = std::process::Command::new(cmd);
    c.args(rest).env("LD_PRELOAD", preload);
    match engine.listen() {
        Ok(name) => {
            c.env(ubio::claims::ENV, name);
        }
        // Without claims both may manage a file: harmless (each drops only
        // what it may), but say so.
        Err(e) => log::warn!("engine: cannot listen for the shim's claims: {e}"),
    }
    if let Some(w) = args.window {
        c.env("UBIO_WINDOW", w.to_string());
    }
    if let Some(b) = args.backend {
        c.env("UBIO_BACKEND", b.name());
    }
    if args.log {
        c.env("UBIO_LOG", "debug");
    }
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(err) => {
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            eprintln!("ubio run: {}", crate::msg::on("run", Path::new(cmd), &err));
            return Ok(ExitCode::from(code));
        }
    };
    let pid = child.id();
    // Ctrl-C and Ctrl-\ reach the program from the terminal: ubio only
    // outlives them to clean up. TERM and HUP sent to ubio are passed on.
    let caught = catch(&[SIGINT, SIGQUIT, SIGTERM, SIGHUP])?;
    engine.add_root(pid);
    // The pidfd wakes us the moment the program exits. Without pidfd_open
    // (Linux < 5.3, or valgrind, which does not know the call) we are still
    // the program's parent and poll for its exit between looks.
    let pidfd = match ubio::sys::pidfd_open(pid) {
        Ok(fd) => Some(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
        Err(e) => return Err(e).context("pidfd_open of the program"),
    };
    let how = keep_up();
    log::debug!("engine: {how}");
    loop {
        let wait = engine.look();
        let sig = caught.swap(0, Ordering::SeqCst) as i32;
        if sig == SIGTERM || sig == SIGHUP {
            let _ = ubio::sys::kill(pid, sig);
        }
        let exited = match &pidfd {
            Some(fd) => ubio::sys::poll_readable(fd.as_fd(), wait)?,
            None => {
                std::thread::sleep(wait);
                child
                    .try_wait()
                    .context("waiting for the program")?
                    .is_some()
            }
        };
        if exited {
            break;
        }
    }
    let status = child.wait().context("waiting for the program")?;
    let stats = engine.finish(FINAL_WRITEBACK);
    if args.log {
        report(&stats, &how);
    }
    if let Some(code) = status.code() {
        return Ok(ExitCode::from(code as u8));
    }
    let sig = status.signal().unwrap_or(libc::SIGKILL);
    drop(limits);
    ubio::sys::raise_default(sig);
    Ok(ExitCode::from(128 + sig as u8))
}

/// `ubio run --pid PID`: the engine alone, on a process that is running
/// already, until it exits or ubio is interrupted.
fn attach(pid: u32, opts: FollowOptions, log: bool) -> Result<ExitCode> {
    if pid == std::process::id() {
        bail!("--pid {pid}: that is ubio itself");
    }
    let pidfd =
        ubio::sys::pidfd_open(pid).with_context(|| format!("--pid {pid}: no such process"))?;
    let caught = catch(&[SIGINT, SIGTERM, SIGHUP])?;
    let mut engine = Follower::new(opts);
    engine.add_root(pid);
    let how = keep_up();
    log::debug!("engine: {how}");
    loop {
        let wait = engine.look();
        if caught.load(Ordering::SeqCst) != 0 || ubio::sys::poll_readable(pidfd.as_fd(), wait)? {
            break;
        }
    }
    let stats = engine.finish(FINAL_WRITEBACK);
    if log {
        report(&stats, &how);
    }
    Ok(ExitCode::SUCCESS)
}

/// The engine must look every few milliseconds, also while the program
/// and others keep both cores busy: the thread that looks runs SCHED_FIFO
/// at the lowest priority, bounded (ubio_engine::realtime; the program,
/// started before, and the threads started after keep their own), or where
/// that is not allowed asks for a better nice value. Returns how it runs,
/// for the log.
fn keep_up() -> String {
    match ubio_engine::realtime::make_looker_realtime() {
        Ok(line) => line,
        Err(why) => {
            let nice = match ubio::sys::set_nice(-10) {
                Ok(()) => "nice -10".to_string(),
                Err(e) => format!("its nice value (-10 refused: {e})"),
            };
            format!("{why}; it runs at {nice}")
        }
    }
}

/// The last of `signals` that arrived (0: none yet), instead of their
/// default action.
fn catch(signals: &[i32]) -> Result<Arc<AtomicUsize>> {
    let caught = Arc::new(AtomicUsize::new(0));
    for &sig in signals {
        signal_hook::flag::register_usize(sig, Arc::clone(&caught), sig as usize)?;
    }
    Ok(caught)
}

/// The engine's work, per file and in total, with its own CPU time, how it
/// was scheduled (`how`) and how late its looks came: to UBIO_LOG_FILE when
/// set (with the shim's log), else to stderr.
fn report(s: &FollowStats, how: &str) {
    let mut out = String::new();
    const MIB: f64 = (1u64 << 20) as f64;
    for f in &s.files {
        let _ = writeln!(
            out,
            "ubio run: engine: {}: {}; read {:.1} MiB, written {:.1} MiB; pages dropped {}, preserved {}; writeback starts {}{}",
            f.path.display(),
            if f.managed { "managed" } else { "not managed" },
            f.bytes_read as f64 / MIB,
            f.bytes_written as f64 / MIB,
            f.pages_dropped,
            f.pages_preserved,
            f.writeback_starts,
            if f.managed { String::new() } else { format!(" ({})", f.why) }
                + &f.residency_unknown.as_ref().map(|r| format!("; {r}")).unwrap_or_default(),
        );
    }
    let (user, sys) = ubio::sys::cpu_time(ubio::sys::Usage::Process).unwrap_or_default();
    let cpu = user + sys;
    let gib = (s.bytes_read + s.bytes_written) as f64 / (1u64 << 30) as f64;
    let _ = writeln!(
        out,
        "ubio run: engine: {} looks, every {:.1}-{:.1} ms; followed {:.1} MiB read, {:.1} MiB written; \
         CPU {:.1} ms (user {:.1}, system {:.1}){}",
        s.looks,
        s.min_interval.as_secs_f64() * 1e3,
        s.max_interval.as_secs_f64() * 1e3,
        s.bytes_read as f64 / MIB,
        s.bytes_written as f64 / MIB,
        cpu.as_secs_f64() * 1e3,
        user.as_secs_f64() * 1e3,
        sys.as_secs_f64() * 1e3,
        if gib > 0.0 {
            format!(", {:.1} ms per GiB", cpu.as_secs_f64() * 1e3 / gib)
        } else {
            String::new()
        }
    );
    let l = &s.lateness;
    let _ = writeln!(
        out,
        "ubio run: engine: {how}; {} looks were due, late by {}",
        l.count,
        match (l.quantile(0.5), l.quantile(0.99)) {
            (Some(p50), Some(p99)) => format!(
                "at most {:.1} ms at the median, {:.1} ms at p99, {:.1} ms at worst",
                p50 * 1e3,
                p99 * 1e3,
                l.max_s * 1e3
            ),
            _ => "nothing".into(),
        }
    );
    // Where the shim's log goes (UBIO_LOG_FILE), else stderr.
    let to_file = std::env::var_os("UBIO_LOG_FILE").and_then(|p| {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(p)
            .ok()
    });
    match to_file {
        Some(mut f) => {
            let _ = f.write_all(out.as_bytes());
        }
        None => eprint!("{out}"),
    }
}

/// The program `cmd` names, searched in PATH as exec does.
fn which(cmd: &OsStr) -> Option<PathBuf> {
    let p = Path::new(cmd);
    if p.components().count() > 1 || cmd.to_string_lossy().contains('/') {
        // Anything that exists: exec's own error (EACCES, ELOOP) says why
        // it cannot run, better than "command not found".
        return p.symlink_metadata().is_ok().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
}
