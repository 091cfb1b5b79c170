//! The running daemon's status socket, its client (`ubio policy status`)
//! and how the figures are shown.
//!
//! The socket is a unix stream socket anyone may connect to; each answer
//! is cut to what the asking user could read in /proc themselves
//! ([`Status::for_reader`], by the peer's credentials from the kernel). A
//! thread of its own answers, so a client that connects and says nothing
//! delays nobody: it asks the engine's loop for fresh figures (waking it)
//! and answers with them, so an answer is never older than its question.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use ubio::size::human;
use ubio_engine::budget::CgroupBudget;
use ubio_engine::policy::Status;
use ubio_engine::reclaim::MachineReclaim;

/// What the socket answers: the engine's figures, the budgets' and the
/// machine's reclaim since the daemon started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    #[serde(flatten)]
    pub engine: Status,
    pub machine_reclaim: MachineReclaim,
    /// Every cgroup a scope's page-cache budget is kept for, now or before.
    #[serde(default)]
    pub budgets: Vec<CgroupBudget>,
    /// How the thread that looks is scheduled (SCHED_FIFO, or why not).
    #[serde(default)]
    pub scheduling: String,
}

impl DaemonStatus {
    /// What a reader with `uid`/`gid` may see ([`Status::for_reader`]);
    /// /proc/vmstat's counters are anyone's to read, kswapd's traced
    /// wakes root's only.
    pub fn for_reader(&self, uid: u32, gid: u32) -> DaemonStatus {
        let mut m = self.machine_reclaim.clone();
        if uid != 0 {
            m.kswapd_wakes = None;
            m.kswapd_wakes_high_order = None;
            m.trace_instance = None;
            m.trace_lost = 0;
            m.why_untraced = Some("kswapd's traced wakes are shown to root only".into());
        }
        DaemonStatus {
            engine: self.engine.for_reader(uid, gid),
            machine_reclaim: m,
            // Other users' cgroups: machine-wide, as the events are.
            budgets: if uid == 0 {
                self.budgets.clone()
            } else {
                Vec::new()
            },
            scheduling: self.scheduling.clone(),
        }
    }
}

/// What a client sends.
const REQUEST: &str = "status";
/// How long a client may take to ask or to read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// The figures, renewed by the engine's loop when the socket's thread asks.
pub struct Shared {
    /// (generation, figures).
    state: Mutex<(u64, DaemonStatus)>,
    renewed: Condvar,
    wanted: AtomicBool,
    /// Wakes the engine's loop (it polls the other end).
    wake: UnixStream,
}

impl Shared {
    pub fn new(first: DaemonStatus, wake: UnixStream) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new((0, first)),
            renewed: Condvar::new(),
            wanted: AtomicBool::new(false),
            wake,
        })
    }

    /// Whether a client waits for fresh figures (the loop then publishes).
    pub fn wanted(&self) -> bool {
        self.wanted.swap(false, Ordering::SeqCst)
    }

    pub fn publish(&self, s: DaemonStatus) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *st = (st.0 + 1, s);
        self.renewed.notify_all();
    }

    /// Figures made after this call (or, if the loop does not answer within
    /// a second, the latest ones).
    pub fn fresh(&self) -> DaemonStatus {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let asked = st.0;
        self.wanted.store(true, Ordering::SeqCst);
        let _ = (&self.wake).write(&[1]);
        let (st, _) = self
            .renewed
            .wait_timeout_while(st, Duration::from_secs(1), |s| s.0 == asked)
            .unwrap_or_else(|p| p.into_inner());
        st.1.clone()
    }
}

/// The listening socket; removed when dropped.
pub struct Server {
    path: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listen at `path` and answer from `shared` in a thread of its own. The
/// socket's directory is made (0755) if missing; one that anyone but root
/// could write is refused, since the socket would be created and removed
/// there.
pub fn serve(path: &Path, shared: Arc<Shared>) -> Result<Server> {
    let dir = path.parent().context("the socket path has no directory")?;
    if !dir.exists() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("create directory {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    let m = std::fs::symlink_metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
    if !m.is_dir() || m.uid() != ubio::sys::geteuid() || m.mode() & 0o022 != 0 {
        bail!(
            "refused: the status socket's directory {} must be a directory of this user's that no one else can write (uid {}, mode {:o})",
            dir.display(),
            m.uid(),
            m.mode() & 0o7777
        );
    }
    // A socket left by a daemon that died: only a socket is removed.
    if let Ok(old) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !old.file_type().is_socket() {
            bail!("{} exists and is not a socket", path.display());
        }
        if UnixStream::connect(path).is_ok() {
            bail!(
                "{}: another ubio policy daemon answers there",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("remove the old socket {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("listen at {}", path.display()))?;
    // Anyone may ask; each answer holds only what the asker may see.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    std::thread::Builder::new()
        .name("ubio-policy-status".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = answer(conn, &shared);
            }
        })?;
    Ok(Server {
        path: path.to_path_buf(),
    })
}

fn answer(conn: UnixStream, shared: &Shared) -> Result<()> {
    conn.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    conn.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let peer = ubio::sys::peer_cred(conn.as_fd())?;
    let mut line = String::new();
    // A request is one short line: read no more than that.
    BufReader::new(std::io::Read::take(&conn, 64)).read_line(&mut line)?;
    let mut out = &conn;
    if line.trim() != REQUEST {
        writeln!(out, "{{\"error\":\"unknown request\"}}")?;
        return Ok(());
    }
    let view = shared.fresh().for_reader(peer.uid, peer.gid);
    writeln!(out, "{}", serde_json::to_string(&view)?)?;
    Ok(())
}

/// Ask the daemon listening at `path`.
pub fn ask(path: &Path) -> Result<DaemonStatus> {
    let conn = UnixStream::connect(path).with_context(|| {
        format!(
            "no ubio policy daemon answers at {} (is it running?)",
            path.display()
        )
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    (&conn).write_all(format!("{REQUEST}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let unexpected = || format!("unexpected answer from {}", path.display());
    let answer: serde_json::Value = serde_json::from_str(&line).with_context(unexpected)?;
    if let Some(e) = answer.get("error") {
        bail!("the daemon at {} says: {e}", path.display());
    }
    serde_json::from_value(answer).with_context(unexpected)
}

/// The figures as lines of text (status, and the log at exit).
pub fn render(d: &DaemonStatus) -> String {
    let s = &d.engine;
    let mut out = String::new();
    if s.dry_run {
        out.push_str(
            "DRY RUN: nothing is dropped or written back; the figures say what would have been\n",
        );
    }
    let cpu = s.cpu_user_s + s.cpu_system_s;
    let _ = write!(
        out,
        "daemon pid {}, up {:.0} s; CPU {:.2} s (user {:.2}, system {:.2})",
        s.pid, s.uptime_s, cpu, s.cpu_user_s, s.cpu_system_s
    );
    if !s.restricted {
        let _ = write!(out, "; discovery {}", s.discovery);
        if let Some(w) = &s.why_poll {
            let _ = write!(out, " ({w})");
        }
        let _ = write!(
            out,
            "; {} events ({:.1}/s), {} overflows, {} scans, {} inodes quieted; {} processes followed",
            s.events, s.events_per_s, s.overflows, s.scans, s.quieted_inodes, s.processes_followed
        );
    }
    out.push('\n');
    if s.restricted {
        out.push_str("(only the files of processes whose /proc you can read are counted)\n");
    }
    let scopes = s.per_scope();
    // Per GiB only once there is enough to divide by.
    let managed: u64 = scopes
        .iter()
        .map(|f| f.totals.bytes_read + f.totals.bytes_written)
        .sum();
    if !s.restricted && managed >= 256 << 20 {
        let gib = managed as f64 / (1u64 << 30) as f64;
        let _ = writeln!(out, "CPU per GiB managed: {:.3} s", cpu / gib);
    }
    let _ = writeln!(
        out,
        "{:<16} {:>9} {:>7} {:>11} {:>11} {:>13} {:>10} {:>11}",
        "scope",
        "files now",
        "files",
        "read",
        "written",
        "pages dropped",
        "pages kept",
        "dirty peak"
    );
    for f in &scopes {
        let t = &f.totals;
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>7} {:>11} {:>11} {:>13} {:>10} {:>11}",
            f.name,
            f.managed_now,
            t.files,
            human(t.bytes_read),
            human(t.bytes_written),
            t.pages_dropped,
            t.pages_kept,
            human(t.dirty_peak_bytes)
        );
    }
    if !s.files.is_empty() {
        out.push_str("managed now:\n");
        for l in &s.files {
            let t = &l.figures;
            let _ = writeln!(
                out,
                "  {} ({}, uid {}): read {}, written {}, pages dropped {}, kept {}, dirty peak {}, own pages cached {}",
                l.path.display(),
                l.scope,
                l.owner.uids[0],
                human(t.bytes_read),
                human(t.bytes_written),
                t.pages_dropped,
                t.pages_kept,
                human(t.dirty_peak_bytes),
                human(l.own_cached_bytes)
            );
        }
    }
    render_budgets(&mut out, &d.budgets);
    if !d.scheduling.is_empty() {
        let _ = writeln!(out, "{}", d.scheduling);
    }
    if let (Some(p50), Some(p99)) = (s.lateness.quantile(0.5), s.lateness.quantile(0.99)) {
        let _ = writeln!(
            out,
            "looks that were due: {}, late by at most {:.1} ms at the median, {:.1} ms at p99, {:.1} ms at worst",
            s.lateness.count,
            p50 * 1e3,
            p99 * 1e3,
            s.lateness.max_s * 1e3
        );
    }
    render_reclaim(&mut out, &d.machine_reclaim);
    out
}

/// The page-cache budgets: one line per cgroup kept now, and the reclaim.
fn render_budgets(out: &mut String, budgets: &[CgroupBudget]) {
    let now: Vec<&CgroupBudget> = budgets.iter().filter(|b| !b.gone).collect();
    if budgets.is_empty() {
        return;
    }
    let gone = budgets.len() - now.len();
    let _ = writeln!(
        out,
        "page-cache budgets: {} cgroups now{}",
        now.len(),
        if gone > 0 {
            format!(", {gone} gone")
        } else {
            String::new()
        }
    );
    for b in budgets {
        let _ = write!(
            out,
            "  {} ({}): page cache {} of {} (peak {}); {} reclaims asked {}, took {}",
            b.cgroup,
            b.scope,
            human(b.file_bytes),
            human(b.budget_bytes),
            human(b.file_peak_bytes),
            b.reclaims,
            human(b.asked_bytes),
            human(b.reclaimed_bytes)
        );
        if b.gone {
            out.push_str("; gone");
        }
        if let Some(why) = &b.not_reclaimed {
            let _ = write!(out, "; not reclaimed: {why}");
        }
        out.push('\n');
    }
}

/// "machine reclaim since start": the counters this kernel has, kswapd's
/// wakes by order (or why they are not counted), the episodes.
fn render_reclaim(out: &mut String, m: &MachineReclaim) {
    let c = |k: &str| m.counters.get(k).copied();
    let _ = write!(
        out,
        "machine reclaim since start ({:.0} s), pages:",
        m.since_s
    );
    if let Some(why) = &m.unreadable {
        let _ = write!(out, " not counted ({why})");
    }
    for (who, scan, steal) in [
        ("kswapd", "pgscan_kswapd", "pgsteal_kswapd"),
        ("direct reclaim", "pgscan_direct", "pgsteal_direct"),
    ] {
        if let (Some(a), Some(b)) = (c(scan), c(steal)) {
            let _ = write!(out, " {who} scanned {a}, reclaimed {b};");
        }
    }
    let stalls: Vec<String> = m
        .counters
        .iter()
        .filter_map(|(k, v)| Some(format!("{} {v}", k.strip_prefix("allocstall_")?)))
        .collect();
    if !stalls.is_empty() {
        let _ = write!(
            out,
            " direct reclaim stalls by zone: {};",
            stalls.join(", ")
        );
    }
    if let (Some(st), Some(f), Some(ok)) =
        (c("compact_stall"), c("compact_fail"), c("compact_success"))
    {
        let _ = write!(
            out,
            " direct compaction stalls {st} (failed {f}, succeeded {ok})"
        );
    }
    out.push('\n');
    match (&m.kswapd_wakes, &m.why_untraced) {
        (Some(w), _) => {
            let by: Vec<String> = w.iter().map(|(o, n)| format!("{o}: {n}")).collect();
            let _ = write!(
                out,
                "kswapd wakes by order: {}; of order {} or more: {}",
                if by.is_empty() {
                    "none".into()
                } else {
                    by.join(", ")
                },
                ubio_engine::reclaim::HIGH_ORDER,
                m.kswapd_wakes_high_order.unwrap_or(0)
            );
            if let Some(i) = &m.trace_instance {
                let _ = write!(out, " (trace instance {i}");
                if m.trace_lost > 0 {
                    let _ = write!(out, ", {} events lost", m.trace_lost);
                }
                out.push(')');
            }
            out.push('\n');
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "kswapd wakes by order: not counted: {why}");
        }
        (None, None) => {}
    }
    let _ = writeln!(
        out,
        "episodes of kswapd reclaiming above every zone's high watermark: {} ({} pages)",
        m.episodes, m.episode_pages_stolen
    );
    if let Some(l) = &m.last_said {
        let _ = writeln!(out, "last said: {l}");
    }
}
