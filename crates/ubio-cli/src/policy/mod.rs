//! `ubio policy run|check|status`: the contract for every process of some
//! scopes (a service, a container's cgroup, a user), with no prefix on the
//! command. The engine is ubio-engine's (`ubio_engine::policy`, the same
//! Follower as `ubio run`); this module reads the configuration, runs the
//! loop (signals, SIGHUP reload, systemd's notify protocol), serves the
//! status socket and logs.

mod budget;
mod config;
mod host;
mod metrics;
mod status;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use ubio_engine::policy::{Policy, Status};
use ubio_engine::reclaim;
use ubio_engine::scope::{ProcessFacts, ProcessVerdict};

const DEFAULT_CONFIG: &str = "/etc/ubio/policy.toml";

/// What `ubio policy --help` adds: what it does, what it cannot see.
const ABOUT_POLICY: &str = "\
Examples:
  ubio policy check /etc/ubio/policy.toml
  ubio policy run --config /etc/ubio/policy.toml     # what ubio-policy.service runs
  ubio policy status
  systemctl reload ubio-policy                        # SIGHUP: read the configuration again

The daemon applies ubio's contract to the regular files that the processes of the
configured scopes read and write: pages a stream brought in are dropped behind it,
writeback starts early and each file's dirty + writeback stays near its window, pages
others had cached stay. It finds the processes with fanotify (filesystem or mount
marks: each read, write, open and close with the pid) or, where fanotify cannot be
used, by polling the scopes' cgroups, and follows each file by its position with the
engine of `ubio run`. It never reads or writes the files' data. Reads and writes
through mmap raise no event and move no position: what they bring in stays cached
until the file is closed, then it is written back and dropped. Readers that use pread
alone are followed from the pages they leave, as one-call copies are.";

/// `ubio policy status --help`: what the machine's reclaim part says.
const ABOUT_STATUS: &str = "\
Examples:
  ubio policy status
  ubio policy status --json

Besides the daemon's own figures, the status shows the machine's reclaim since the
daemon started: pages kswapd and direct reclaim scanned and reclaimed, direct reclaim
and compaction stalls (/proc/vmstat), and kswapd's wakes by the order asked, counted in
a trace instance of the daemon's own (or one line saying why they are not counted).
When kswapd reclaims while every zone's free memory is above its high watermark and
most of its wakes are for high-order allocations (such as a program's 2 MiB readahead
folios), the log says so once per episode, at most once a minute. The daemon does not
stop that reclaim and does not ask for compaction.";

/// `ubio policy check --help`: the configuration's format.
const CONFIG_FORMAT: &str = "\
Examples:
  ubio policy check /etc/ubio/policy.toml

The configuration is TOML; only root may be able to write it and its directories
(the daemon refuses it otherwise). Every mistake is named with its line.

  [daemon]
  discovery = \"auto\"        # auto: fanotify where it can be used, else polling (the log says why);
                              # fanotify: fail without it; poll: poll the scopes' cgroups
  marks = \"filesystem\"      # fanotify marks: filesystem (every mount of it) or mount
  poll_interval = \"500ms\"   # when polling
  socket = \"/run/ubio/policy.sock\"
  window = \"16M\"            # dirty + writeback per file, for scopes that set none
  dry_run = false             # follow and report what would be done, change nothing (also: --dry-run)
  cgroup_namespace = \"host\"  # host: in a container's own cgroup namespace, enter the host's
                              # (CAP_SYS_ADMIN); own: name cgroups as the daemon's namespace shows them
  device_dirty_limit = \"32M\" # opt-in (Linux 6.2+): the devices of the watched filesystems hold
                              # dirty + writeback there for EVERY writer (strict_limit, max_bytes),
                              # put back at exit; a writer faster than its device waits
  realtime = true             # the thread that looks runs SCHED_FIFO at priority 1, bounded
                              # (CAP_SYS_NICE); false: at nice -10, as the other threads

  [metrics]                   # a Prometheus endpoint, GET /metrics (off without this table)
  listen = \"127.0.0.1:9633\"  # or \"unix:/run/ubio/metrics.sock\"
  cgroups = false             # per-cgroup series of the budgets ...
  max_cgroups = 100           # ... at most this many (those most over their budget)

  [exclude]                   # never managed, whatever a scope says (checked first)
  cgroups = [\"/system.slice/postgresql.service\"]
  uids = [\"postgres\"]
  paths = [\"/var/lib/postgresql\"]

  [[scope]]                   # one or more; a process's file goes to the first scope that takes it
  name = \"backup\"
  cgroups = [\"/system.slice/backup.service\", \"memory:/kubepods/*/pod*\"]
  uids = [\"backup\", 34]       # real or effective uid; names or numbers
  gids = [\"backup\"]           # real or effective gid, or a supplementary group
  exes = [\"tar\", \"/usr/local/bin/restic\"]   # a name, or a glob over /proc/PID/exe
  paths = [\"/srv\", \"/home\"]   # path prefixes of the files (whole components)
  min_size = \"1M\"           # smaller files are left alone (a file being written is judged again as it grows)
  window = \"16M\"
  budget = \"256M\"           # page cache each cgroup the scope names may hold (or \"25%\" of its
                              # memory.max): kept by memory.reclaim of that cgroup (cgroup v2)
  [scope.exclude]             # the same kinds as [exclude], for this scope only
  paths = [\"/srv/db\"]

Every kind of rule given must match (a process in one of the cgroups AND run by one of
the uids ...); a kind left out matches everything, so a scope with no rules takes every
process. Cgroup patterns are paths as /proc/PID/cgroup shows them, with globs (* and ?
within a component, ** across), and take the cgroups below them too; \"CONTROLLER:/path\"
matches only that cgroup v1 hierarchy, a plain path any hierarchy (v2's, or each v1 one).
Files opened O_DIRECT or O_SYNC, pipes, sockets, devices and files on tmpfs are left
alone; pages others had cached before a stream reached them stay cached. A budget is kept
per cgroup a scope's pattern names (with its children, as memory.stat counts them), first
by dropping the followed streams' own pages, then by the kernel's reclaim of that cgroup
alone, coldest pages first; never in a cgroup that holds one an exclusion names. cgroup v1
has no memory.reclaim: there only the streams' own pages go, and the status says so.";

#[derive(clap::Args)]
#[command(after_long_help = ABOUT_POLICY)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Run the daemon in the foreground (ubio-policy.service runs this)
    #[command(after_help = "Examples:\n  ubio policy run --config /etc/ubio/policy.toml")]
    Run(RunArgs),
    /// Check a configuration and show what it would manage now
    #[command(
        after_help = "Examples:\n  ubio policy check /etc/ubio/policy.toml",
        after_long_help = CONFIG_FORMAT
    )]
    Check(CheckArgs),
    /// Ask the running daemon for its figures, and the machine's reclaim since it started
    #[command(
        after_help = "Examples:\n  ubio policy status\n  ubio policy status --json",
        after_long_help = ABOUT_STATUS
    )]
    Status(StatusArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The configuration (TOML; its format: ubio policy check --help).
    #[arg(long, default_value = DEFAULT_CONFIG)]
    config: PathBuf,
    /// Follow and report what would be dropped and written back, and change
    /// nothing (as `dry_run = true` in [daemon]): try a configuration first.
    #[arg(long)]
    dry_run: bool,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The configuration to check.
    #[arg(default_value = DEFAULT_CONFIG)]
    config: PathBuf,
}

#[derive(clap::Args)]
struct StatusArgs {
    /// The figures as JSON.
    #[arg(long)]
    json: bool,
    /// The daemon's socket (its configuration's `socket`).
    #[arg(long, default_value = config::DEFAULT_SOCKET)]
    socket: PathBuf,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Sub::Run(a) => daemon(&a.config, a.dry_run),
        Sub::Check(a) => check(&a.config),
        Sub::Status(a) => show_status(&a),
    }
}

fn log(line: &str) {
    eprintln!("ubio policy: {line}");
}

/// How long, at exit, the daemon waits for the writeback of what the
/// processes wrote before dropping it.
const FINAL_WRITEBACK: Duration = Duration::from_secs(60);

fn daemon(path: &Path, dry_run: bool) -> Result<ExitCode> {
    let mut cfg = match config::load(path) {
        Ok(c) => c,
        Err(e) => {
            log(&e.to_string());
            return Ok(ExitCode::FAILURE);
        }
    };
    cfg.options.follow.dry_run |= dry_run;
    // Before any thread starts: setns applies to the calling thread and
    // those it starts after.
    match host::take_host_view(&cfg) {
        Ok(Some(line)) => log(&line),
        Ok(None) => {}
        Err(why) => {
            log(&why);
            return Ok(ExitCode::FAILURE);
        }
    }
    for line in host::check(&cfg) {
        log(&line);
    }
    if let Err(e) = ubio::sys::raise_open_files_limit() {
        log(&format!("cannot raise the limit of open files: {e}"));
    }
    // The engine must look every few milliseconds on a busy machine too.
    if let Err(e) = ubio::sys::set_nice(-10) {
        log::debug!("cannot raise the daemon's priority: {e}");
    }
    let dry_run = cfg.options.follow.dry_run;
    let mut policy = Policy::start(cfg.scopes.clone(), cfg.options)?;
    // Put back when dropped, at the end of this function.
    let _limits = match cfg.device_dirty_limit {
        Some(bytes) if !dry_run => device_limits(&policy.status(), bytes),
        _ => Vec::new(),
    };
    let mut windows = scope_windows(&cfg.scopes);
    let mut budgets = budget::BudgetThread::start(&cfg.scopes, dry_run);
    // Its trace instance is removed when it is dropped: at the end of this
    // function, whether the loop ends by a signal or by an error.
    let mut notes = Vec::new();
    let mut machine = reclaim::Machine::start(&mut notes);
    let (wake, waker) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    let shared = status::Shared::new(
        status::DaemonStatus {
            engine: policy.status(),
            machine_reclaim: machine.figures(),
            budgets: budgets.figures(),
            scheduling: String::new(),
        },
        waker.try_clone()?,
    );
    let _server = status::serve(&cfg.socket, Arc::clone(&shared))?;
    let _metrics = match &cfg.metrics {
        None => None,
        Some(m) => match metrics::serve(m, Arc::clone(&shared)) {
            Ok(server) => Some(server),
            Err(e) => {
                let at = m.line.map_or(String::new(), |l| format!(":{l}"));
                log(&format!(
                    "{}{at}: [metrics] listen = \"{}\": {e:#}",
                    path.display(),
                    m.listen
                ));
                return Ok(ExitCode::FAILURE);
            }
        },
    };
    log(&format!(
        "started with {} (scopes: {}); status at {}{}{}",
        path.display(),
        scope_names(&cfg.scopes),
        cfg.socket.display(),
        cfg.metrics.as_ref().map_or(String::new(), |m| format!(
            "; metrics at {}/metrics",
            m.listen
        )),
        if dry_run {
            "; DRY RUN: it follows and reports, and changes nothing"
        } else {
            ""
        }
    ));
    for n in policy.take_notices().into_iter().chain(notes) {
        log(&n);
    }
    let (hup, term) = signals(&waker)?;
    // This thread looks: real-time from here on, the others started before
    // (the status and metrics servers, the budget's) keep their own; those
    // it starts do not inherit it.
    let scheduling = match cfg.realtime {
        true => ubio_engine::realtime::make_looker_realtime().unwrap_or_else(|why| why),
        false => "the thread that looks runs at nice -10 (realtime = false)".to_string(),
    };
    log(&scheduling);
    sd_notify("READY=1");
    let socket = cfg.socket.clone();
    loop {
        let wait = policy.step();
        for n in policy
            .take_notices()
            .into_iter()
            .chain(budgets.take_notices())
        {
            log(&n);
        }
        if let Some(line) = machine.tick(|| streams(&policy.status(), &windows)) {
            log(&line);
        }
        let wait = wait.min(machine.due_in());
        if shared.wanted() {
            let engine = policy.status();
            if let Some(line) = machine.look(|| streams(&engine, &windows)) {
                log(&line);
            }
            shared.publish(status::DaemonStatus {
                engine,
                machine_reclaim: machine.figures(),
                budgets: budgets.figures(),
                scheduling: looker_scheduling(&scheduling),
            });
        }
        let fds: Vec<_> = std::iter::once(wake.as_fd()).chain(policy.fd()).collect();
        let ready = ubio::sys::poll_readable_any(&fds, wait)?;
        if ready[0] {
            let mut buf = [0u8; 64];
            while (&wake).read(&mut buf).is_ok_and(|n| n > 0) {}
        }
        if term.swap(false, Ordering::SeqCst) {
            break;
        }
        if hup.swap(false, Ordering::SeqCst) {
            sd_notify("RELOADING=1");
            let reloaded = config::load(path)
                .map_err(|e| e.to_string())
                .and_then(|mut new| {
                    new.options.follow.dry_run = dry_run;
                    match policy.reload(new.scopes.clone(), new.options) {
                        Ok(()) => Ok(new),
                        Err(e) => Err(e.to_string()),
                    }
                });
            match reloaded {
                Err(e) => log(&format!(
                    "reload refused, the running configuration stays: {e}"
                )),
                Ok(new) => {
                    windows = scope_windows(&new.scopes);
                    budgets.reload(&new.scopes, dry_run);
                    log(&format!(
                        "reloaded {} (scopes: {})",
                        path.display(),
                        scope_names(&new.scopes)
                    ));
                    if new.socket != socket {
                        log(&format!(
                            "the socket stays at {} until a restart (the configuration now says {})",
                            socket.display(),
                            new.socket.display()
                        ));
                    }
                    if new.metrics != cfg.metrics || new.cgroup_namespace != cfg.cgroup_namespace {
                        log("[metrics] and cgroup_namespace stay as they were until a restart");
                    }
                }
            }
            sd_notify("READY=1");
        }
    }
    sd_notify("STOPPING=1");
    let last = policy.finish(FINAL_WRITEBACK);
    for n in policy.take_notices() {
        log(&n);
    }
    if let Some(line) = machine.look(|| streams(&last, &windows)) {
        log(&line);
    }
    let last = status::DaemonStatus {
        engine: last,
        machine_reclaim: machine.figures(),
        budgets: budgets.figures(),
        scheduling: looker_scheduling(&scheduling),
    };
    log("exiting; the figures:");
    for line in status::render(&last).lines() {
        log(line);
    }
    Ok(ExitCode::SUCCESS)
}

/// Strict dirty limits of `bytes` on the devices of the watched filesystems
/// (or of every filesystem holding file data, when polling), each said in
/// the log, or why not.
fn device_limits(st: &Status, bytes: u64) -> Vec<ubio_engine::bdi::DeviceLimit> {
    let paths: Vec<PathBuf> = match st.marks.iter().any(|m| m.how.is_ok()) {
        true => st
            .marks
            .iter()
            .filter(|m| m.how.is_ok())
            .map(|m| m.path.clone())
            .collect(),
        false => ubio_engine::bdi::data_filesystems(),
    };
    let (limits, lines) = ubio_engine::bdi::limit_devices(paths, bytes);
    for l in lines {
        log(&l);
    }
    limits
}

/// How the thread that looks is scheduled: what [`daemon`] made it, or
/// that it was put back to SCHED_OTHER since (it ran too long without
/// blocking).
fn looker_scheduling(made: &str) -> String {
    match ubio_engine::realtime::demoted() {
        true => format!("put back to SCHED_OTHER after running without blocking (was: {made})"),
        false => made.to_string(),
    }
}

/// Each scope's window (dirty + writeback per file), by name.
fn scope_windows(scopes: &ubio_engine::scope::Scopes) -> HashMap<String, u64> {
    scopes
        .scopes
        .iter()
        .map(|s| (s.name.clone(), s.window))
        .collect()
}

/// The managed files' own cache now, from the engine's figures.
fn streams(s: &Status, windows: &HashMap<String, u64>) -> reclaim::Streams {
    let mut out = reclaim::Streams {
        files: s.files.len(),
        ..reclaim::Streams::default()
    };
    for f in &s.files {
        out.own_cached += f.own_cached_bytes;
        if f.own_cached_bytes >= out.largest {
            out.largest = f.own_cached_bytes;
            out.largest_window = windows.get(&f.scope).copied().unwrap_or(0);
        }
    }
    out
}

/// "backup, builds": the scopes' names for the log.
fn scope_names(scopes: &ubio_engine::scope::Scopes) -> String {
    let names: Vec<&str> = scopes.scopes.iter().map(|s| s.name.as_str()).collect();
    names.join(", ")
}

/// SIGHUP and SIGTERM/SIGINT set their flags and wake the loop through
/// `waker` (the loop polls the other end with the event queue).
fn signals(waker: &UnixStream) -> Result<(Arc<AtomicBool>, Arc<AtomicBool>)> {
    let hup = Arc::new(AtomicBool::new(false));
    let term = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGHUP, Arc::clone(&hup))?;
    for sig in [SIGTERM, SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&term))?;
    }
    for sig in [SIGHUP, SIGTERM, SIGINT] {
        signal_hook::low_level::pipe::register(sig, waker.try_clone()?)?;
    }
    Ok((hup, term))
}

/// systemd's readiness protocol (sd_notify(3)) for Type=notify: a datagram
/// to $NOTIFY_SOCKET; nothing when it is not set.
fn sd_notify(state: &str) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(&path),
    };
    let sent = addr.and_then(|a| UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &a));
    if let Err(e) = sent {
        log(&format!("sd_notify {state} to {path}: {e}"));
    }
}

fn check(path: &Path) -> Result<ExitCode> {
    let cfg = match config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ubio policy check: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("{}: valid", path.display());
    print!("{}", describe(&cfg));
    Ok(ExitCode::SUCCESS)
}

/// What a configuration says and what it would take now.
fn describe(cfg: &config::Config) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "any".to_string()
        } else {
            v.join(", ")
        }
    };
    let rules =
        |out: &mut String, p: &ubio_engine::scope::ProcessRules, paths: &[PathBuf]| {
            let _ =
                writeln!(
            out,
            "    cgroups: {}\n    uids: {}\n    gids: {}\n    executables: {}\n    paths: {}",
            list(p.cgroups.iter().map(|c| match &c.controller {
                Some(ctl) => format!("{ctl}:{}", c.path.as_str()),
                None => c.path.as_str().to_string(),
            }).collect()),
            list(p.uids.iter().map(u32::to_string).collect()),
            list(p.gids.iter().map(u32::to_string).collect()),
            list(p.exes.iter().map(|e| e.0.as_str().to_string()).collect()),
            list(paths.iter().map(|p| p.display().to_string()).collect()),
        );
        };
    let o = &cfg.options;
    let _ =
        writeln!(
        out,
        "daemon: discovery {:?}, {} marks, poll every {} ms, status socket {}{}; cgroup paths: {}",
        o.discovery,
        o.marks.name(),
        o.poll_interval.as_millis(),
        cfg.socket.display(),
        if o.follow.dry_run { "; DRY RUN (changes nothing)" } else { "" },
        match cfg.cgroup_namespace {
            config::CgroupNamespace::Host => "the host's",
            config::CgroupNamespace::Own => "the daemon's own namespace's",
        }
    );
    if let Some(m) = &cfg.metrics {
        let _ = writeln!(
            out,
            "metrics: http://{}/metrics{}",
            m.listen,
            if m.cgroups {
                format!(
                    ", per-cgroup series of the budgets (at most {})",
                    m.max_cgroups
                )
            } else {
                String::new()
            }
        );
    }
    let x = &cfg.scopes.exclude;
    if !x.processes.is_empty() || !x.paths.is_empty() {
        out.push_str("excluded everywhere (checked first):\n");
        rules(&mut out, &x.processes, &x.paths);
    }
    for s in &cfg.scopes.scopes {
        let _ = writeln!(
            out,
            "scope {}: window {}, files of at least {}{}",
            s.name,
            ubio::size::human(s.window),
            ubio::size::human(s.files.min_size),
            s.budget.map_or(String::new(), |b| format!(
                ", page-cache budget {} per cgroup",
                b.describe()
            ))
        );
        rules(&mut out, &s.processes, &s.files.paths);
        if !s.exclude.processes.is_empty() || !s.exclude.paths.is_empty() {
            out.push_str("  excluded:\n");
            rules(&mut out, &s.exclude.processes, &s.exclude.paths);
        }
    }
    let patterns = cfg.scopes.cgroup_patterns();
    let mut taken = Vec::new();
    for pid in ubio_engine::discover::scope_pids(patterns.as_deref()) {
        if pid == std::process::id() {
            continue;
        }
        let mut f = ProcessFacts::new(pid);
        if let ProcessVerdict::In(ix) = cfg.scopes.process(&mut f) {
            let names: Vec<&str> = ix
                .iter()
                .map(|&i| cfg.scopes.scopes[i].name.as_str())
                .collect();
            let exe = f
                .exe()
                .map_or_else(|| "?".into(), |e| e.display().to_string());
            taken.push(format!("  {pid} {exe} ({})", names.join(", ")));
        }
    }
    let _ = writeln!(out, "processes in scope now: {}", taken.len());
    for t in taken {
        let _ = writeln!(out, "{t}");
    }
    out
}

fn show_status(a: &StatusArgs) -> Result<ExitCode> {
    let s = status::ask(&a.socket)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s).context("JSON")?);
    } else {
        print!("{}", status::render(&s));
    }
    Ok(ExitCode::SUCCESS)
}
