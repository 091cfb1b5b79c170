//! Which processes and files a machine-wide policy (`ubio policy`) manages:
//! named scopes of rules on the process (cgroup, uid, gid, executable) and
//! on the file (path prefix, minimum size), and exclusions of the same
//! kinds, checked first.
//!
//! Within a scope each kind of rule that is given must match (a process in
//! one of the cgroups AND run by one of the uids...); an empty kind matches
//! everything, so a scope with no rules is the whole machine (seed 004's
//! global switch). Within one kind any item may match. An exclusion of any
//! kind that matches excludes. A process or file belongs to the first scope
//! that takes it.
//!
//! Patterns are globs (`*`, `?`, `[...]` within one path component, `**`
//! across components). A cgroup pattern matches the cgroup it names and
//! every cgroup below it (a unit's or a pod's children), in any hierarchy
//! the process is in (cgroup v2's one, or each v1 one); prefixed with a
//! controller (`memory:/pods/*`) it matches only in the v1 hierarchy of
//! that controller. An executable pattern with a `/` matches the path of
//! /proc/PID/exe; without one, its file name. Path prefixes match whole
//! components (`/data` takes `/data/x`, not `/database`).

use glob::{MatchOptions, Pattern};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use ubio::procfs::{self, PidStatus};

const GLOB: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// A glob over a path, with the text it was made from.
#[derive(Clone)]
pub struct PathGlob {
    text: String,
    pattern: Pattern,
}

impl PathGlob {
    pub fn new(text: &str) -> Result<PathGlob, String> {
        let pattern = Pattern::new(text).map_err(|e| format!("bad pattern {text:?}: {}", e.msg))?;
        Ok(PathGlob {
            text: text.to_string(),
            pattern,
        })
    }

    pub fn matches(&self, s: &str) -> bool {
        self.pattern.matches_with(s, GLOB)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for PathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

/// A cgroup pattern: an optional v1 controller and a glob over the path.
#[derive(Debug, Clone)]
pub struct CgroupPattern {
    /// `memory` in `memory:/pods/*`: only that v1 hierarchy.
    pub controller: Option<String>,
    pub path: PathGlob,
}

impl CgroupPattern {
    /// `"/system.slice/backup.service"`, `"/kubepods/*/pod*"`,
    /// `"memory:/process_api/*"`.
    pub fn parse(text: &str) -> Result<CgroupPattern, String> {
        let (controller, path) = match text.split_once(':') {
            Some((c, p)) if !c.contains('/') => (Some(c.to_string()), p),
            _ => (None, text),
        };
        if !path.starts_with('/') {
            return Err(format!(
                "cgroup {text:?}: the path must start with / (as in /proc/PID/cgroup)"
            ));
        }
        let path = path.trim_end_matches('/');
        Ok(CgroupPattern {
            controller,
            path: PathGlob::new(if path.is_empty() { "/" } else { path })?,
        })
    }

    /// Whether the pattern matches `path` of a hierarchy whose controllers
    /// are `controllers` (comma-separated; empty for cgroup v2), or one of
    /// its ancestors.
    pub fn matches(&self, controllers: &str, path: &str) -> bool {
        if !self.in_hierarchy(controllers) {
            return false;
        }
        let mut p = path.trim_end_matches('/');
        loop {
            if self.path.matches(if p.is_empty() { "/" } else { p }) {
                return true;
            }
            match p.rfind('/') {
                Some(i) if !p.is_empty() => p = &p[..i],
                _ => return false,
            }
        }
    }
}

impl CgroupPattern {
    /// Whether the pattern names `path` itself (not through an ancestor):
    /// the cgroups a scope's budget is kept for.
    pub fn names(&self, controllers: &str, path: &str) -> bool {
        let p = path.trim_end_matches('/');
        self.in_hierarchy(controllers) && self.path.matches(if p.is_empty() { "/" } else { p })
    }

    /// A `memory:` pattern is for the v1 memory hierarchy only; a plain one
    /// for any.
    fn in_hierarchy(&self, controllers: &str) -> bool {
        self.controller
            .as_ref()
            .is_none_or(|c| controllers.split(',').any(|x| x == c))
    }
}

/// An executable pattern: a glob over the path, or over the file name when
/// it holds no `/`.
#[derive(Debug, Clone)]
pub struct ExePattern(pub PathGlob);

impl ExePattern {
    pub fn parse(text: &str) -> Result<ExePattern, String> {
        PathGlob::new(text).map(ExePattern)
    }

    pub fn matches(&self, exe: &Path) -> bool {
        let s = if self.0.as_str().contains('/') {
            exe.to_str()
        } else {
            exe.file_name().and_then(|n| n.to_str())
        };
        s.is_some_and(|s| self.0.matches(s))
    }
}

/// Rules on processes. As an inclusion, every kind given must match; as
/// an exclusion, any item of any kind excludes.
#[derive(Debug, Clone, Default)]
pub struct ProcessRules {
    pub cgroups: Vec<CgroupPattern>,
    /// The process's real or effective uid.
    pub uids: Vec<u32>,
    /// Its real or effective gid or one of its supplementary groups.
    pub gids: Vec<u32>,
    pub exes: Vec<ExePattern>,
}

impl ProcessRules {
    pub fn is_empty(&self) -> bool {
        self.cgroups.is_empty()
            && self.uids.is_empty()
            && self.gids.is_empty()
            && self.exes.is_empty()
    }

    /// Each kind given matches (an inclusion).
    fn all_match(&self, p: &mut ProcessFacts) -> bool {
        (self.uids.is_empty() || self.uid_of(p).is_some())
            && (self.gids.is_empty() || self.gid_of(p).is_some())
            && (self.cgroups.is_empty() || self.cgroup_of(p).is_some())
            && (self.exes.is_empty() || self.exe_of(p).is_some())
    }

    /// Some item matches (an exclusion); which, for the log.
    fn any_match(&self, p: &mut ProcessFacts) -> Option<String> {
        if let Some(u) = self.uid_of(p) {
            return Some(format!("uid {u}"));
        }
        if let Some(g) = self.gid_of(p) {
            return Some(format!("gid {g}"));
        }
        if let Some(c) = self.cgroup_of(p) {
            return Some(format!("cgroup {}", c.path.as_str()));
        }
        if let Some(e) = self.exe_of(p) {
            return Some(format!("executable {}", e.0.as_str()));
        }
        None
    }

    // Each `*_of` reads its fact only when a rule of its kind is given:
    // every process that touches a watched filesystem is judged, and each
    // fact is a read of /proc.

    /// The process's uid (real or effective) that a uid rule names.
    fn uid_of(&self, p: &mut ProcessFacts) -> Option<u32> {
        if self.uids.is_empty() {
            return None;
        }
        p.uids().into_iter().find(|u| self.uids.contains(u))
    }

    /// The process's gid (real, effective or supplementary) that a gid
    /// rule names.
    fn gid_of(&self, p: &mut ProcessFacts) -> Option<u32> {
        if self.gids.is_empty() {
            return None;
        }
        p.gids().into_iter().find(|g| self.gids.contains(g))
    }

    /// The first cgroup pattern that takes one of the process's cgroups.
    fn cgroup_of(&self, p: &mut ProcessFacts) -> Option<&CgroupPattern> {
        if self.cgroups.is_empty() {
            return None;
        }
        let cgroups = p.cgroups();
        self.cgroups
            .iter()
            .find(|c| cgroups.iter().any(|(ctl, path)| c.matches(ctl, path)))
    }

    /// The first executable pattern that takes the process's executable.
    fn exe_of(&self, p: &mut ProcessFacts) -> Option<&ExePattern> {
        if self.exes.is_empty() {
            return None;
        }
        let exe = p.exe()?;
        self.exes.iter().find(|e| e.matches(exe))
    }
}

/// Rules on files.
#[derive(Debug, Clone, Default)]
pub struct FileRules {
    /// The file's path starts with one of these (whole components).
    pub paths: Vec<PathBuf>,
    /// Files smaller than this are left alone (a file open for writing is
    /// looked at again as it grows).
    pub min_size: u64,
}

/// Exclusions: processes and paths that are never managed.
#[derive(Debug, Clone, Default)]
pub struct Exclusions {
    pub processes: ProcessRules,
    pub paths: Vec<PathBuf>,
}

impl Exclusions {
    fn excludes_path(&self, path: &Path) -> Option<&Path> {
        self.paths
            .iter()
            .find(|p| path.starts_with(p))
            .map(PathBuf::as_path)
    }
}

/// One named scope.
#[derive(Debug, Clone)]
pub struct Scope {
    pub name: String,
    pub processes: ProcessRules,
    pub files: FileRules,
    pub exclude: Exclusions,
    /// Dirty + writeback bytes per file.
    pub window: u64,
    /// The page cache each of the scope's cgroups may hold ([`crate::budget`]).
    pub budget: Option<crate::budget::Size>,
}

impl Scope {
    /// Whether the file rules' paths take `path` and no exclusion of the
    /// scope leaves it out (its size aside).
    fn takes_path(&self, path: &Path) -> bool {
        self.exclude.excludes_path(path).is_none()
            && (self.files.paths.is_empty() || self.files.paths.iter().any(|p| path.starts_with(p)))
    }
}

/// Every scope of a policy and the exclusions that apply to all.
#[derive(Debug, Clone, Default)]
pub struct Scopes {
    pub exclude: Exclusions,
    pub scopes: Vec<Scope>,
}

/// Whether a process is in a scope, and which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessVerdict {
    /// In these scopes (indices into [`Scopes::scopes`]), in order; its
    /// files go to the first whose file rules take them.
    In(Vec<usize>),
    /// Excluded, or in no scope: why.
    Out(String),
}

/// Whether a file of a process in scope is managed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileVerdict {
    /// Managed under this scope.
    In(usize),
    /// Left alone because of the file itself (its path): for every process.
    OutForAll(String),
    /// Left alone for now: too small (it may grow).
    TooSmall(String),
    /// Left alone for this process (no scope of it takes the file).
    Out(String),
}

impl Scopes {
    /// The scopes that take process `p` (exclusions first).
    pub fn process(&self, p: &mut ProcessFacts) -> ProcessVerdict {
        if let Some(why) = self.exclude.processes.any_match(p) {
            return ProcessVerdict::Out(format!("excluded ({why})"));
        }
        let mut ins = Vec::new();
        let mut why = None;
        for (i, s) in self.scopes.iter().enumerate() {
            if let Some(w) = s.exclude.processes.any_match(p) {
                why.get_or_insert_with(|| format!("excluded from scope {} ({w})", s.name));
                continue;
            }
            if s.processes.all_match(p) {
                ins.push(i);
            }
        }
        if ins.is_empty() {
            ProcessVerdict::Out(why.unwrap_or_else(|| "in no scope".into()))
        } else {
            ProcessVerdict::In(ins)
        }
    }

    /// The scope, among `scopes` (a process's), that takes the file at
    /// `path` of `size` bytes.
    pub fn file(&self, scopes: &[usize], path: &Path, size: u64) -> FileVerdict {
        if let Some(x) = self.exclude.excludes_path(path) {
            return FileVerdict::OutForAll(format!("excluded path {}", x.display()));
        }
        if !self.scopes.iter().any(|s| s.takes_path(path)) {
            return FileVerdict::OutForAll("under no scope's paths".into());
        }
        let mut small = None;
        for &i in scopes {
            let s = &self.scopes[i];
            if !s.takes_path(path) {
                continue;
            }
            if size < s.files.min_size {
                small.get_or_insert_with(|| {
                    format!(
                        "smaller than scope {}'s min_size ({} < {})",
                        s.name, size, s.files.min_size
                    )
                });
                continue;
            }
            return FileVerdict::In(i);
        }
        match small {
            Some(why) => FileVerdict::TooSmall(why),
            None => FileVerdict::Out("its process's scopes do not take this path".into()),
        }
    }

    /// The path prefixes the scopes are limited to, or None when some
    /// scope takes files anywhere.
    pub fn path_prefixes(&self) -> Option<Vec<PathBuf>> {
        self.every_scope_limits(|s| &s.files.paths)
    }

    /// Every scope limits its processes to cgroups: the processes to scan
    /// are those of the cgroups (else every process is looked at).
    pub fn cgroup_patterns(&self) -> Option<Vec<CgroupPattern>> {
        self.every_scope_limits(|s| &s.processes.cgroups)
    }

    /// The items of the rule `rule` of every scope together, or None when
    /// some scope leaves the rule empty (it takes anything).
    fn every_scope_limits<T: Clone>(&self, rule: impl Fn(&Scope) -> &[T]) -> Option<Vec<T>> {
        let mut all = Vec::new();
        for s in &self.scopes {
            let items = rule(s);
            if items.is_empty() {
                return None;
            }
            all.extend_from_slice(items);
        }
        Some(all)
    }
}

/// What the rules look at in a process, read from /proc on first use.
#[derive(Debug)]
pub struct ProcessFacts {
    pub pid: u32,
    proc_dir: PathBuf,
    status: Option<PidStatus>,
    cgroups: Option<Vec<(String, String)>>,
    exe: Option<Option<PathBuf>>,
}

impl ProcessFacts {
    pub fn new(pid: u32) -> ProcessFacts {
        Self::in_proc(Path::new("/proc"), pid)
    }

    /// The same, from another proc directory (tests).
    pub fn in_proc(proc: &Path, pid: u32) -> ProcessFacts {
        ProcessFacts {
            pid,
            proc_dir: proc.join(pid.to_string()),
            status: None,
            cgroups: None,
            exe: None,
        }
    }

    fn status(&mut self) -> &PidStatus {
        let dir = &self.proc_dir;
        self.status.get_or_insert_with(|| {
            std::fs::read_to_string(dir.join("status"))
                .map(|s| procfs::parse_pid_status(&s))
                .unwrap_or_default()
        })
    }

    /// Real and effective uid.
    pub fn uids(&mut self) -> Vec<u32> {
        let u = self.status().uids;
        vec![u[0], u[1]]
    }

    /// Real and effective gid and the supplementary groups.
    pub fn gids(&mut self) -> Vec<u32> {
        let s = self.status();
        let mut v = vec![s.gids[0], s.gids[1]];
        v.extend(&s.groups);
        v
    }

    /// The uids and gids /proc/PID's access check compares with a
    /// reader's (real, effective, saved; Documentation: ptrace access
    /// mode, "fscreds"): a reader whose uid and gid equal all of them may
    /// read this process's /proc/PID/fd.
    pub fn id_sets(&mut self) -> ([u32; 3], [u32; 3]) {
        let s = self.status();
        (
            [s.uids[0], s.uids[1], s.uids[2]],
            [s.gids[0], s.gids[1], s.gids[2]],
        )
    }

    /// `(controllers, path)` per hierarchy, as /proc/PID/cgroup lists them
    /// (`""` for cgroup v2's).
    pub fn cgroups(&mut self) -> &[(String, String)] {
        let dir = &self.proc_dir;
        self.cgroups.get_or_insert_with(|| {
            std::fs::read_to_string(dir.join("cgroup"))
                .map(|s| {
                    procfs::parse_cgroup(&s)
                        .into_iter()
                        .map(|l| (l.controllers, l.path))
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    pub fn exe(&mut self) -> Option<&Path> {
        let dir = &self.proc_dir;
        self.exe
            .get_or_insert_with(|| std::fs::read_link(dir.join("exe")).ok())
            .as_deref()
    }

    /// Whether the process could be read at all (it exists).
    pub fn exists(&self) -> bool {
        self.proc_dir.exists()
    }
}

/// The uid of user `name` (a number is taken as it is).
pub fn uid_by_name(name: &str) -> io::Result<u32> {
    name.parse().or_else(|_| ubio::sys::user_id(name))
}

/// The gid of group `name` (a number is taken as it is).
pub fn gid_by_name(name: &str) -> io::Result<u32> {
    name.parse().or_else(|_| ubio::sys::group_id(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(s: &str) -> CgroupPattern {
        CgroupPattern::parse(s).unwrap()
    }

    #[test]
    fn cgroup_patterns_take_the_cgroup_and_below() {
        let p = cg("/system.slice/backup.service");
        assert!(p.matches("", "/system.slice/backup.service"));
        assert!(p.matches("", "/system.slice/backup.service/sub"));
        assert!(!p.matches("", "/system.slice/backup.service2"));
        assert!(!p.matches("", "/system.slice"));
        let p = cg("/kubepods/*/pod*");
        assert!(p.matches("", "/kubepods/burstable/pod12/abc"));
        assert!(!p.matches("", "/kubepods/pod12"));
        let p = cg("memory:/process_api/*");
        assert!(p.matches("memory", "/process_api/x/test-1"));
        assert!(!p.matches("cpu,cpuacct", "/process_api/x"));
        assert!(!p.matches("", "/process_api/x"));
        assert!(cg("/").matches("", "/anything"));
        assert!(cg("/**").matches("", "/a/b"));
        assert!(CgroupPattern::parse("relative").is_err());
        assert!(CgroupPattern::parse("/a[").is_err());
    }

    #[test]
    fn exe_patterns_by_path_or_name() {
        let e = ExePattern::parse("tar").unwrap();
        assert!(e.matches(Path::new("/usr/bin/tar")));
        assert!(!e.matches(Path::new("/usr/bin/star")));
        let e = ExePattern::parse("/usr/*/rest*").unwrap();
        assert!(e.matches(Path::new("/usr/bin/restic")));
        assert!(!e.matches(Path::new("/usr/local/bin/restic")));
        let e = ExePattern::parse("/usr/**/restic").unwrap();
        assert!(e.matches(Path::new("/usr/local/bin/restic")));
    }

    fn scope(name: &str, processes: ProcessRules, files: FileRules) -> Scope {
        Scope {
            name: name.into(),
            processes,
            files,
            exclude: Exclusions::default(),
            window: 16 << 20,
            budget: None,
        }
    }

    #[test]
    fn exclusions_come_first_and_rules_combine() {
        let me = std::process::id();
        let mut facts = ProcessFacts::new(me);
        let my_cg = facts.cgroups()[0].1.clone();
        let uid = facts.uids()[0];
        let mut s = Scopes {
            exclude: Exclusions {
                processes: ProcessRules::default(),
                paths: vec![PathBuf::from("/data/db")],
            },
            scopes: vec![scope(
                "mine",
                ProcessRules {
                    cgroups: vec![cg(&my_cg)],
                    uids: vec![uid],
                    ..ProcessRules::default()
                },
                FileRules {
                    paths: vec![PathBuf::from("/data")],
                    min_size: 1 << 20,
                },
            )],
        };
        assert_eq!(
            s.process(&mut ProcessFacts::new(me)),
            ProcessVerdict::In(vec![0])
        );
        assert_eq!(
            s.file(&[0], Path::new("/data/x"), 2 << 20),
            FileVerdict::In(0)
        );
        assert!(matches!(
            s.file(&[0], Path::new("/data/x"), 10),
            FileVerdict::TooSmall(_)
        ));
        assert!(matches!(
            s.file(&[0], Path::new("/data/db/t"), 2 << 20),
            FileVerdict::OutForAll(_)
        ));
        assert!(matches!(
            s.file(&[0], Path::new("/database"), 2 << 20),
            FileVerdict::OutForAll(_)
        ));
        // A second kind that does not match: out.
        s.scopes[0].processes.uids = vec![uid + 1];
        assert!(matches!(
            s.process(&mut ProcessFacts::new(me)),
            ProcessVerdict::Out(_)
        ));
        // An exclusion beats an inclusion.
        s.scopes[0].processes.uids = vec![];
        s.exclude.processes.uids = vec![uid];
        assert!(
            matches!(s.process(&mut ProcessFacts::new(me)), ProcessVerdict::Out(w) if w.contains("uid"))
        );
        assert_eq!(s.path_prefixes(), Some(vec![PathBuf::from("/data")]));
        assert!(s.cgroup_patterns().is_some());
    }

    #[test]
    fn a_judgment_reads_only_the_facts_the_rules_ask_about() {
        // Scopes by cgroup, no exclusions: the cgroups are read, neither
        // the status nor the executable (every process that touches a
        // watched filesystem is judged, a busy one again each second).
        let me = std::process::id();
        let s = Scopes {
            exclude: Exclusions::default(),
            scopes: vec![scope(
                "elsewhere",
                ProcessRules {
                    cgroups: vec![cg("/ubio-test-no-such-cgroup")],
                    ..ProcessRules::default()
                },
                FileRules::default(),
            )],
        };
        let mut facts = ProcessFacts::new(me);
        assert!(matches!(s.process(&mut facts), ProcessVerdict::Out(_)));
        assert!(facts.cgroups.is_some());
        assert!(facts.status.is_none(), "status read");
        assert!(facts.exe.is_none(), "executable read");
    }
}
