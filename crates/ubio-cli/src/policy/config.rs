//! The policy's configuration file (TOML), read into the library's scopes
//! and the daemon's settings. Every mistake is reported with the file, the
//! line and the reason; a file or directory on its path that anyone but
//! root could write is refused (whoever can edit it decides what a root
//! daemon touches).
//!
//! ```toml
//! [daemon]
//! discovery = "auto"          # auto | fanotify | poll
//! marks = "filesystem"        # filesystem | mount
//! poll_interval = "500ms"     # when polling
//! socket = "/run/ubio/policy.sock"
//! window = "16M"              # default write-behind window of the scopes
//! dry_run = false             # follow and report, change nothing
//! cgroup_namespace = "host"   # host | own: whose cgroup paths the scopes name
//! device_dirty_limit = "32M"  # opt-in: every writer of the watched devices held there
//! realtime = true             # the thread that looks runs SCHED_FIFO 1
//!
//! [metrics]                   # a Prometheus endpoint (off without it)
//! listen = "127.0.0.1:9633"   # or "unix:/run/ubio/metrics.sock"
//! cgroups = false             # per-cgroup series of the budgets
//! max_cgroups = 100
//!
//! [exclude]                   # checked first, for every scope
//! cgroups = ["/system.slice/postgresql.service"]
//! paths = ["/var/lib/postgresql"]
//!
//! [[scope]]
//! name = "backup"
//! cgroups = ["/system.slice/backup.service"]
//! uids = ["backup", 34]
//! exes = ["tar", "/usr/bin/restic"]
//! paths = ["/srv"]
//! min_size = "1M"
//! budget = "256M"             # page cache per cgroup of the scope; or "25%" of its memory.max
//! [scope.exclude]
//! paths = ["/srv/db"]
//! ```

use serde::Deserialize;
use std::fmt;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;
use ubio_engine::discover::MarkKind;
use ubio_engine::policy::{DiscoveryMode, PolicyOptions};
use ubio_engine::scope::{
    gid_by_name, uid_by_name, CgroupPattern, Exclusions, ExePattern, FileRules, ProcessRules,
    Scope, Scopes,
};

/// Where the status socket is unless the configuration says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/ubio/policy.sock";

/// A configuration error: the file, the line (when it has one) and why.
#[derive(Debug)]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.path.display(), self.reason),
            None => write!(f, "{}: {}", self.path.display(), self.reason),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub scopes: Scopes,
    pub options: PolicyOptions,
    pub socket: PathBuf,
    pub metrics: Option<Metrics>,
    pub cgroup_namespace: CgroupNamespace,
    /// A strict dirty limit on the devices of the watched filesystems
    /// (ubio_engine::bdi), machine-wide for them: None, unless asked.
    pub device_dirty_limit: Option<u64>,
    /// The thread that looks runs SCHED_FIFO (ubio_engine::realtime).
    pub realtime: bool,
}

/// The Prometheus endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    pub listen: Listen,
    /// Per-cgroup series of the budgets, at most `max_cgroups` of them.
    pub cgroups: bool,
    pub max_cgroups: usize,
    /// The line of `listen` (for the error when the address is taken).
    pub line: Option<usize>,
}

/// Where the metrics are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(std::net::SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Whose cgroup paths the scopes name when the daemon runs in a cgroup
/// namespace of its own (a container's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupNamespace {
    /// The host's: the daemon enters the host's namespace (PID 1's) at
    /// start; the paths are those systemd and the kubelet make.
    Host,
    /// The daemon's own: paths as it sees them (a daemon that governs only
    /// its own container's cgroups).
    Own,
}

/// What the machine mounts, for the checks of cgroup patterns.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// The v1 controllers mounted (`memory`, `cpu`...).
    pub v1_controllers: Vec<String>,
    /// The unified hierarchy is mounted.
    pub unified: bool,
}

impl Machine {
    /// This machine's cgroup hierarchies.
    pub fn this() -> Machine {
        let hs = ubio_engine::cgroup::hierarchies().unwrap_or_default();
        Machine {
            v1_controllers: hs
                .iter()
                .flat_map(|h| {
                    h.controllers()
                        .split(',')
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .filter(|c| !c.is_empty())
                .collect(),
            unified: hs
                .iter()
                .any(|h| h.version == ubio_engine::cgroup::Version::V2),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    daemon: RawDaemon,
    metrics: Option<RawMetrics>,
    #[serde(default)]
    exclude: RawExclude,
    #[serde(default)]
    scope: Vec<RawScope>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    discovery: Option<Spanned<String>>,
    marks: Option<Spanned<String>>,
    poll_interval: Option<Spanned<String>>,
    socket: Option<Spanned<String>>,
    window: Option<Spanned<SizeSpec>>,
    dry_run: Option<bool>,
    cgroup_namespace: Option<Spanned<String>>,
    device_dirty_limit: Option<Spanned<SizeSpec>>,
    realtime: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: Spanned<String>,
    #[serde(default)]
    cgroups: bool,
    max_cgroups: Option<Spanned<u64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExclude {
    #[serde(default)]
    cgroups: Vec<Spanned<String>>,
    #[serde(default)]
    uids: Vec<Spanned<IdSpec>>,
    #[serde(default)]
    gids: Vec<Spanned<IdSpec>>,
    #[serde(default)]
    exes: Vec<Spanned<String>>,
    #[serde(default)]
    paths: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    name: Spanned<String>,
    #[serde(default)]
    cgroups: Vec<Spanned<String>>,
    #[serde(default)]
    uids: Vec<Spanned<IdSpec>>,
    #[serde(default)]
    gids: Vec<Spanned<IdSpec>>,
    #[serde(default)]
    exes: Vec<Spanned<String>>,
    #[serde(default)]
    paths: Vec<Spanned<String>>,
    min_size: Option<Spanned<SizeSpec>>,
    window: Option<Spanned<SizeSpec>>,
    budget: Option<Spanned<SizeSpec>>,
    #[serde(default)]
    exclude: RawExclude,
}

/// A uid or gid: a number or a name.
#[derive(Deserialize)]
#[serde(untagged)]
enum IdSpec {
    Number(u32),
    Name(String),
}

/// A size: bytes, or a string with a suffix ("16M").
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeSpec {
    Bytes(u64),
    Text(String),
}

/// Read, check and parse the configuration at `path`, for this machine.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let err = |line: Option<usize>, reason: String| ConfigError {
        path: path.to_path_buf(),
        line,
        reason,
    };
    check_owner(path).map_err(|r| err(None, r))?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(None, format!("cannot read: {}", crate::msg::reason(&e))))?;
    parse(path, &text, &Machine::this())
}

/// Parse configuration `text` (from `path`, for the messages) for a
/// machine that mounts `machine`'s cgroup hierarchies.
pub fn parse(path: &Path, text: &str, machine: &Machine) -> Result<Config, ConfigError> {
    let line_of =
        |span: Range<usize>| Some(text[..span.start.min(text.len())].matches('\n').count() + 1);
    let err = |span: Option<Range<usize>>, reason: String| ConfigError {
        path: path.to_path_buf(),
        line: span.and_then(line_of),
        reason,
    };
    let raw: RawConfig =
        toml::from_str(text).map_err(|e| err(e.span(), e.message().to_string()))?;
    let d = &raw.daemon;
    let default_window = match &d.window {
        Some(w) => window(w).map_err(|r| err(Some(w.span()), r))?,
        None => ubio::DEFAULT_WINDOW,
    };
    let discovery = one_of(
        &d.discovery,
        "discovery",
        &[
            ("auto", DiscoveryMode::Auto),
            ("fanotify", DiscoveryMode::Fanotify),
            ("poll", DiscoveryMode::Poll),
        ],
    )
    .map_err(|(sp, r)| err(Some(sp), r))?
    .unwrap_or(DiscoveryMode::Auto);
    let marks = one_of(
        &d.marks,
        "marks",
        &[
            ("filesystem", MarkKind::Filesystem),
            ("mount", MarkKind::Mount),
        ],
    )
    .map_err(|(sp, r)| err(Some(sp), r))?
    .unwrap_or(MarkKind::Filesystem);
    let poll_interval = match d.poll_interval.as_ref() {
        None => PolicyOptions::default().poll_interval,
        Some(s) => duration(s.get_ref()).map_err(|r| err(Some(s.span()), r))?,
    };
    let socket = match d.socket.as_ref() {
        None => PathBuf::from(DEFAULT_SOCKET),
        Some(s) if s.get_ref().starts_with('/') => PathBuf::from(s.get_ref()),
        Some(s) => {
            return Err(err(
                Some(s.span()),
                format!("socket = {:?}: must be an absolute path", s.get_ref()),
            ))
        }
    };
    let cgroup_namespace = one_of(
        &d.cgroup_namespace,
        "cgroup_namespace",
        &[
            ("host", CgroupNamespace::Host),
            ("own", CgroupNamespace::Own),
        ],
    )
    .map_err(|(sp, r)| err(Some(sp), r))?
    .unwrap_or(CgroupNamespace::Host);
    let metrics = match &raw.metrics {
        None => None,
        Some(m) => Some(Metrics {
            listen: listen(&m.listen).map_err(|r| err(Some(m.listen.span()), r))?,
            cgroups: m.cgroups,
            max_cgroups: match &m.max_cgroups {
                None => 100,
                Some(n) if *n.get_ref() == 0 || *n.get_ref() > 10_000 => {
                    return Err(err(
                        Some(n.span()),
                        format!("max_cgroups = {}: from 1 to 10000", n.get_ref()),
                    ))
                }
                Some(n) => *n.get_ref() as usize,
            },
            line: line_of(m.listen.span()),
        }),
    };
    check_cgroup_versions(&raw, machine).map_err(|(sp, r)| err(Some(sp), r))?;
    let exclude = exclusions(&raw.exclude).map_err(|(s, r)| err(Some(s), r))?;
    let mut scopes = Vec::new();
    for s in &raw.scope {
        let name = s.name.get_ref().trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(err(
                Some(s.name.span()),
                format!("scope name {:?}: a word without spaces", s.name.get_ref()),
            ));
        }
        if scopes.iter().any(|x: &Scope| x.name == name) {
            return Err(err(
                Some(s.name.span()),
                format!("scope {name:?} is defined twice"),
            ));
        }
        let processes = process_rules(&s.cgroups, &s.uids, &s.gids, &s.exes)
            .map_err(|(sp, r)| err(Some(sp), r))?;
        let files = FileRules {
            paths: paths(&s.paths).map_err(|(sp, r)| err(Some(sp), r))?,
            min_size: match &s.min_size {
                Some(m) => size(m).map_err(|r| err(Some(m.span()), r))?,
                None => 0,
            },
        };
        let window = match &s.window {
            Some(w) => window(w).map_err(|r| err(Some(w.span()), r))?,
            None => default_window,
        };
        let budget = match &s.budget {
            None => None,
            Some(b) => Some(budget(b, window, &processes).map_err(|r| err(Some(b.span()), r))?),
        };
        scopes.push(Scope {
            name: name.to_string(),
            processes,
            files,
            exclude: exclusions(&s.exclude).map_err(|(sp, r)| err(Some(sp), r))?,
            window,
            budget,
        });
    }
    if scopes.is_empty() {
        return Err(err(None, "no [[scope]]: nothing would be managed".into()));
    }
    let mut options = PolicyOptions {
        discovery,
        marks,
        poll_interval,
        ..PolicyOptions::default()
    };
    options.follow.window = default_window;
    options.follow.dry_run = d.dry_run.unwrap_or(false);
    Ok(Config {
        scopes: Scopes { exclude, scopes },
        options,
        socket,
        metrics,
        cgroup_namespace,
        device_dirty_limit: match &d.device_dirty_limit {
            None => None,
            Some(l) => Some(
                window(l).map_err(|r| err(Some(l.span()), format!("device_dirty_limit: {r}")))?,
            ),
        },
        realtime: d.realtime.unwrap_or(true),
    })
}

/// `listen = "127.0.0.1:9633"` or `"unix:/run/ubio/metrics.sock"`.
fn listen(v: &Spanned<String>) -> Result<Listen, String> {
    let s = v.get_ref();
    if let Some(p) = s.strip_prefix("unix:") {
        if !p.starts_with('/') {
            return Err(format!(
                "listen = {s:?}: a unix socket's path must be absolute"
            ));
        }
        return Ok(Listen::Unix(PathBuf::from(p)));
    }
    s.parse().map(Listen::Tcp).map_err(|_| {
        format!("listen = {s:?}: an address and port (\"127.0.0.1:9633\", \"[::1]:9633\") or \"unix:/path\"")
    })
}

/// A scope's budget: bytes ("256M") or a percentage of each cgroup's
/// memory.max ("25%"); kept per cgroup, so the scope must name cgroups,
/// and never below the scope's write-behind window (a stream's own dirty
/// pages alone fill that).
fn budget(
    b: &Spanned<SizeSpec>,
    window: u64,
    p: &ProcessRules,
) -> Result<ubio_engine::budget::Size, String> {
    use ubio_engine::budget::Size;
    if p.cgroups.is_empty() {
        return Err("budget: the scope must name cgroups (a budget is kept per cgroup)".into());
    }
    if let SizeSpec::Text(t) = b.get_ref() {
        if let Some(pct) = t.trim().strip_suffix('%') {
            let f: f64 = pct
                .trim()
                .parse()
                .map_err(|_| format!("budget = {t:?}: a percentage is a number and % (\"25%\")"))?;
            if !(f > 0.0 && f <= 100.0) {
                return Err(format!("budget = {t:?}: more than 0% and at most 100%"));
            }
            return Ok(Size::OfMax(f / 100.0));
        }
    }
    let n = size(b)?;
    if n < window {
        return Err(format!(
            "budget = {}: below the scope's window ({}): a stream's own dirty pages alone may fill that",
            ubio::size::human(n),
            ubio::size::human(window)
        ));
    }
    Ok(Size::Bytes(n))
}

/// A cgroup pattern for a v1 controller (`memory:/x`) on a machine
/// without that v1 hierarchy (cgroup v2 alone, as every current systemd
/// distribution and Kubernetes node) matches nothing: refused, with the
/// plain path to use instead.
fn check_cgroup_versions(raw: &RawConfig, machine: &Machine) -> Result<(), Bad> {
    let mut all: Vec<&Spanned<String>> = raw.exclude.cgroups.iter().collect();
    for s in &raw.scope {
        all.extend(&s.cgroups);
        all.extend(&s.exclude.cgroups);
    }
    for c in all {
        let Ok(p) = CgroupPattern::parse(c.get_ref()) else {
            continue; // said by the parse itself
        };
        if let Some(ctl) = &p.controller {
            if !machine.v1_controllers.contains(ctl) {
                let v2 = if machine.unified {
                    " (this machine runs cgroup v2: name the path alone)"
                } else {
                    ""
                };
                return Err((
                    c.span(),
                    format!(
                        "cgroup {:?}: no cgroup v1 {ctl} hierarchy is mounted here{v2}",
                        c.get_ref()
                    ),
                ));
            }
        }
    }
    Ok(())
}

type Bad = (Range<usize>, String);

/// The value of `key` among its `choices` (None when it is not set).
fn one_of<T: Copy>(
    v: &Option<Spanned<String>>,
    key: &str,
    choices: &[(&str, T)],
) -> Result<Option<T>, Bad> {
    let Some(v) = v else { return Ok(None) };
    match choices.iter().find(|(name, _)| name == v.get_ref()) {
        Some((_, t)) => Ok(Some(*t)),
        None => {
            let names: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
            Err((
                v.span(),
                format!(
                    "{key} = {:?}: must be one of {}",
                    v.get_ref(),
                    names.join(", ")
                ),
            ))
        }
    }
}

fn process_rules(
    cgroups: &[Spanned<String>],
    uids: &[Spanned<IdSpec>],
    gids: &[Spanned<IdSpec>],
    exes: &[Spanned<String>],
) -> Result<ProcessRules, Bad> {
    Ok(ProcessRules {
        cgroups: cgroups
            .iter()
            .map(|c| CgroupPattern::parse(c.get_ref()).map_err(|r| (c.span(), r)))
            .collect::<Result<_, _>>()?,
        uids: uids
            .iter()
            .map(|u| id(u, uid_by_name, "user"))
            .collect::<Result<_, _>>()?,
        gids: gids
            .iter()
            .map(|g| id(g, gid_by_name, "group"))
            .collect::<Result<_, _>>()?,
        exes: exes
            .iter()
            .map(|e| ExePattern::parse(e.get_ref()).map_err(|r| (e.span(), r)))
            .collect::<Result<_, _>>()?,
    })
}

fn exclusions(x: &RawExclude) -> Result<Exclusions, Bad> {
    Ok(Exclusions {
        processes: process_rules(&x.cgroups, &x.uids, &x.gids, &x.exes)?,
        paths: paths(&x.paths)?,
    })
}

fn id(
    spec: &Spanned<IdSpec>,
    by_name: fn(&str) -> std::io::Result<u32>,
    kind: &str,
) -> Result<u32, Bad> {
    match spec.get_ref() {
        IdSpec::Number(n) => Ok(*n),
        IdSpec::Name(n) => by_name(n).map_err(|e| {
            (
                spec.span(),
                format!("{kind} {n:?}: {}", crate::msg::reason(&e)),
            )
        }),
    }
}

/// Absolute, normalised path prefixes (no `..`: a prefix must say plainly
/// what it covers).
fn paths(list: &[Spanned<String>]) -> Result<Vec<PathBuf>, Bad> {
    list.iter()
        .map(|p| {
            let s = p.get_ref();
            let path = Path::new(s);
            if !path.is_absolute() {
                return Err((p.span(), format!("path {s:?}: must be absolute")));
            }
            if path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err((p.span(), format!("path {s:?}: no '..' in a path prefix")));
            }
            Ok(path.components().collect())
        })
        .collect()
}

fn size(s: &Spanned<SizeSpec>) -> Result<u64, String> {
    match s.get_ref() {
        SizeSpec::Bytes(n) => Ok(*n),
        SizeSpec::Text(t) => ubio::size::parse(t),
    }
}

/// A write-behind window: a size of more than 0.
fn window(w: &Spanned<SizeSpec>) -> Result<u64, String> {
    match size(w)? {
        0 => Err("window must be more than 0".into()),
        n => Ok(n),
    }
}

/// "500ms", "2s", "1.5s".
fn duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("duration {s:?}: a number with ms or s (\"500ms\", \"2s\")");
    let (num, unit) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if v.is_nan() || v <= 0.0 || v * unit > 3600.0 {
        return Err(format!(
            "duration {s:?}: must be more than 0 and at most an hour"
        ));
    }
    Ok(Duration::from_secs_f64(v * unit))
}

/// Refuse a configuration that anyone but root could change: the file and
/// every directory above it must belong to root and be writable by no
/// group or other user (as sshd's StrictModes asks of its keys). A sticky
/// directory (/tmp) may be writable by all: no one else can rename or
/// remove the root-owned entry below it, which the walk checked before.
/// What is on a read-only mount may have any mode.
pub fn check_owner(path: &Path) -> Result<(), String> {
    let real = std::fs::canonicalize(path)
        .map_err(|e| format!("cannot open: {}", crate::msg::reason(&e)))?;
    let mut p = real.as_path();
    loop {
        let m = std::fs::symlink_metadata(p)
            .map_err(|e| format!("{}: {}", p.display(), crate::msg::reason(&e)))?;
        let what = if p == real {
            "the configuration"
        } else {
            "its directory"
        };
        if m.uid() != 0 {
            return Err(format!(
                "refused: {what} {} belongs to uid {}, not root: whoever can change it decides what a root daemon touches",
                p.display(),
                m.uid()
            ));
        }
        let sticky_dir = p != real && m.mode() & 0o1000 != 0;
        // On a read-only mount no one can change it, whatever its mode: a
        // Kubernetes ConfigMap volume (files and directories 0777 on a
        // read-only tmpfs, the file behind two symlinks, which the walk
        // follows as canonicalize did).
        let read_only = std::fs::File::open(p)
            .and_then(|f| ubio::sys::mounted_read_only(std::os::fd::AsFd::as_fd(&f)))
            .unwrap_or(false);
        if m.mode() & 0o022 != 0 && !sticky_dir && !read_only {
            return Err(format!(
                "refused: {what} {} is writable by {} (mode {:o}): make it writable by root only",
                p.display(),
                if m.mode() & 0o002 != 0 {
                    "everyone"
                } else {
                    "its group"
                },
                m.mode() & 0o7777
            ));
        }
        match p.parent() {
            Some(parent) => p = parent,
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Config, ConfigError> {
        let v1 = Machine {
            v1_controllers: vec!["memory".into(), "cpu".into()],
            unified: false,
        };
        parse(Path::new("/etc/ubio/policy.toml"), s, &v1)
    }

    #[test]
    fn a_full_configuration_is_read() {
        let c = parse_str(
            r#"
[daemon]
discovery = "poll"
marks = "mount"
poll_interval = "250ms"
socket = "/run/x.sock"
window = "8M"

[exclude]
cgroups = ["/system.slice/postgresql.service"]
uids = ["root", 70]
paths = ["/var/lib/postgresql/"]

[[scope]]
name = "backup"
cgroups = ["memory:/backup/*"]
exes = ["tar"]
paths = ["/srv"]
min_size = "1M"
window = 33554432
[scope.exclude]
paths = ["/srv/db"]

[[scope]]
name = "everything"
"#,
        )
        .unwrap();
        assert_eq!(c.options.discovery, DiscoveryMode::Poll);
        assert_eq!(c.options.marks, MarkKind::Mount);
        assert_eq!(c.options.poll_interval, Duration::from_millis(250));
        assert_eq!(c.options.follow.window, 8 << 20);
        assert_eq!(c.socket, PathBuf::from("/run/x.sock"));
        assert_eq!(c.scopes.exclude.processes.uids, vec![0, 70]);
        assert_eq!(
            c.scopes.exclude.paths,
            vec![PathBuf::from("/var/lib/postgresql")]
        );
        let s = &c.scopes.scopes;
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].files.min_size, s[0].window), (1 << 20, 32 << 20));
        assert_eq!(
            s[0].processes.cgroups[0].controller.as_deref(),
            Some("memory")
        );
        assert_eq!(s[1].window, 8 << 20);
        assert!(s[1].processes.is_empty());
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let line = |s: &str| {
            let e = parse_str(s).unwrap_err();
            (e.line, e.to_string())
        };
        let (l, m) = line("[[scope]]\nname = \"a\"\ncgroups = [\"relative\"]\n");
        assert_eq!(l, Some(3), "{m}");
        assert!(m.contains("must start with /"), "{m}");
        let (l, m) = line("[[scope]]\nname = \"a\"\n\nuids = [\"no-such-user-ubio\"]\n");
        assert_eq!(l, Some(4), "{m}");
        assert!(m.contains("no such user"), "{m}");
        let (l, m) = line("[daemon]\nwindw = \"16M\"\n");
        assert_eq!(l, Some(2), "{m}");
        assert!(m.contains("unknown field"), "{m}");
        let (l, m) = line("[[scope]]\nname = \"a\"\nmin_size = \"12Q\"\n");
        assert_eq!(l, Some(3), "{m}");
        let (l, m) = line("[[scope]]\nname = \"a\"\npaths = [\"/a/../b\"]\n");
        assert_eq!(l, Some(3), "{m}");
        let (l, m) = line("[[scope]\n");
        assert_eq!(l, Some(1), "{m}");
        let (_, m) = line("[daemon]\n");
        assert!(m.contains("no [[scope]]"), "{m}");
        let (l, m) = line("[[scope]]\nname = \"a\"\n[[scope]]\nname = \"a\"\n");
        assert_eq!(l, Some(4), "{m}");
        let (l, m) = line("[daemon]\npoll_interval = \"soon\"\n[[scope]]\nname = \"a\"\n");
        assert_eq!(l, Some(2), "{m}");
        assert!(m.starts_with("/etc/ubio/policy.toml:2: "), "{m}");
    }

    #[test]
    fn budgets_metrics_and_the_dry_run_are_read_and_checked() {
        let c = parse_str(
            "[daemon]\ndry_run = true\ncgroup_namespace = \"own\"\n[metrics]\nlisten = \"unix:/run/ubio/m.sock\"\ncgroups = true\nmax_cgroups = 7\n\
             [[scope]]\nname = \"a\"\ncgroups = [\"/kubepods/*/pod*\"]\nbudget = \"25%\"\n\
             [[scope]]\nname = \"b\"\ncgroups = [\"/b\"]\nbudget = \"256M\"\n",
        )
        .unwrap();
        assert!(c.options.follow.dry_run);
        assert_eq!(c.cgroup_namespace, CgroupNamespace::Own);
        let m = c.metrics.unwrap();
        assert_eq!(m.listen, Listen::Unix("/run/ubio/m.sock".into()));
        assert_eq!((m.cgroups, m.max_cgroups, m.line), (true, 7, Some(5)));
        use ubio_engine::budget::Size;
        assert_eq!(c.scopes.scopes[0].budget, Some(Size::OfMax(0.25)));
        assert_eq!(c.scopes.scopes[1].budget, Some(Size::Bytes(256 << 20)));
        let tcp =
            parse_str("[metrics]\nlisten = \"[::1]:9633\"\n[[scope]]\nname = \"a\"\n").unwrap();
        assert_eq!(
            tcp.metrics.unwrap().listen,
            Listen::Tcp("[::1]:9633".parse().unwrap())
        );
        assert!(parse_str("[[scope]]\nname = \"a\"\n")
            .unwrap()
            .metrics
            .is_none());
    }

    #[test]
    fn bad_budgets_listens_and_cgroups_of_the_wrong_version_name_their_line() {
        let line = |s: &str| {
            let e = parse_str(s).unwrap_err();
            (e.line, e.to_string())
        };
        let (l, m) = line("[[scope]]\nname = \"a\"\ncgroups = [\"/a\"]\nbudget = \"8M\"\n");
        assert_eq!(l, Some(4), "{m}");
        assert!(m.contains("below the scope's window (16.0 MiB)"), "{m}");
        let (l, m) = line("[[scope]]\nname = \"a\"\nbudget = \"1G\"\n");
        assert_eq!(l, Some(3), "{m}");
        assert!(m.contains("must name cgroups"), "{m}");
        let (_, m) = line("[[scope]]\nname = \"a\"\ncgroups = [\"/a\"]\nbudget = \"150%\"\n");
        assert!(m.contains("at most 100%"), "{m}");
        let (l, m) = line("[metrics]\nlisten = \"localhost\"\n[[scope]]\nname = \"a\"\n");
        assert_eq!(l, Some(2), "{m}");
        assert!(m.contains("an address and port"), "{m}");
        let (_, m) = line("[metrics]\nlisten = \"unix:relative.sock\"\n[[scope]]\nname = \"a\"\n");
        assert!(m.contains("must be absolute"), "{m}");
        let (l, m) =
            line("[metrics]\nlisten = \"127.0.0.1:1\"\nmax_cgroups = 0\n[[scope]]\nname = \"a\"\n");
        assert_eq!(l, Some(3), "{m}");
        let (l, m) = line("[daemon]\ncgroup_namespace = \"mine\"\n[[scope]]\nname = \"a\"\n");
        assert_eq!(l, Some(2), "{m}");
        // A v1 controller's pattern on a machine with cgroup v2 alone.
        let v2 = Machine {
            v1_controllers: Vec::new(),
            unified: true,
        };
        let e = parse(
            Path::new("/etc/ubio/policy.toml"),
            "[[scope]]\nname = \"a\"\ncgroups = [\"/ok\", \"memory:/kubepods/*\"]\n",
            &v2,
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("no cgroup v1 memory hierarchy is mounted here (this machine runs cgroup v2: name the path alone)"), "{e}");
    }

    #[test]
    fn a_configuration_others_can_write_is_refused() {
        if !ubio_testenv::is_root() {
            ubio_testenv::skip(
                "a_configuration_others_can_write_is_refused",
                "needs root (files owned by root and by others)",
            );
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let f = dir.path().join("policy.toml");
        std::fs::write(&f, "[[scope]]\nname = \"a\"\n").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        if let Err(e) = check_owner(&f) {
            // A directory above target/ that is not root's alone: nothing
            // here can be tested.
            ubio_testenv::skip(
                "a_configuration_others_can_write_is_refused",
                &format!("the work tree itself is refused: {e}"),
            );
            return;
        }
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check_owner(&f)
            .unwrap_err()
            .contains("writable by everyone"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(check_owner(&f)
            .unwrap_err()
            .contains("writable by its group"));
        // Sticky and writable by all (as /tmp): others cannot replace the
        // root-owned entries in it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check_owner(&f), Ok(()));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o1666)).unwrap();
        assert!(check_owner(&f)
            .unwrap_err()
            .contains("writable by everyone"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
        assert!(check_owner(&f)
            .unwrap_err()
            .contains("belongs to uid 65534"));
        std::os::unix::fs::chown(&f, Some(0), None).unwrap();
        // A Kubernetes ConfigMap: files and directory 0777, on a read-only
        // mount (here a read-only bind mount of the directory onto itself).
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_owner(&f).is_err());
        let d = dir.path().to_str().unwrap();
        let mount = |args: &[&str]| {
            let ok = std::process::Command::new("mount")
                .args(args)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "mount {args:?}");
        };
        mount(&["--bind", d, d]);
        let ro = std::process::Command::new("mount")
            .args(["-o", "remount,ro,bind", d])
            .status()
            .is_ok_and(|s| s.success());
        let res = check_owner(&f);
        let _ = std::process::Command::new("umount").arg(d).status();
        assert!(ro, "remount read-only");
        assert_eq!(res, Ok(()), "on a read-only mount");
    }
}
