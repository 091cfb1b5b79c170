//! A page-cache budget per scope (`budget = "256M"`, or `"25%"` of each
//! cgroup's memory.max): the page cache charged to each cgroup a scope's
//! `cgroups` patterns name (memory.stat's `file`, which counts the cgroup's
//! children too) is kept within the budget while it streams, also what the
//! engine cannot follow (mmap, pages cached before the daemon started).
//!
//! Two lines of defence. First, as ever, the followed streams' own pages go
//! behind them (the engine). Then, where the cgroup is still over its
//! budget, the kernel's own reclaim of that one cgroup: cgroup v2's
//! memory.reclaim asked for the excess (its coldest pages first: a pod's
//! hot files stay, a stream's pages read or written once go; page cache
//! only where the kernel takes `swappiness=0`, 6.13+), never more than
//! [`STEP`] a write and [`PER_LOOK`] of reclaim per cgroup per look, so
//! that the pod's own work goes on beside it. The reclaim runs on the
//! daemon's budget thread and is charged to the daemon's CPU, not the pod's.
//!
//! A stream fills the cache on while the thread sleeps and reclaims: so the
//! reclaim begins a headroom below the budget (what the cache grows by in
//! [`REACT`] at its last rate) and takes it down to twice that below
//! (pages the cgroup could hold, but the coldest ones). How often a cgroup
//! is looked at follows the same rate: at the latest when it would reach
//! the headroom, between [`MIN_LOOK`] and [`MAX_LOOK`].
//! Only cgroups the scope names are ever asked; one holding a cgroup an
//! exclusion names is not (its reclaim could take the excluded cgroup's
//! pages), and the status says why.
//!
//! cgroup v1 has no memory.reclaim: there the budget is kept by the first
//! line alone, and the status says how far each cgroup is over it.

use crate::cgroup::{self, Cgroup, Hierarchy, Version};
use crate::scope::{CgroupPattern, Scopes};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// How large a scope's budget is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Size {
    Bytes(u64),
    /// A fraction (0 to 1) of each cgroup's memory.max.
    OfMax(f64),
}

impl Size {
    /// "256M", "25%".
    pub fn describe(&self) -> String {
        match self {
            Size::Bytes(n) => ubio::size::human(*n),
            Size::OfMax(f) => format!("{}% of memory.max", f * 100.0),
        }
    }
}

/// The shortest and longest interval between two looks at a cgroup.
pub const MIN_LOOK: Duration = Duration::from_millis(5);
pub const MAX_LOOK: Duration = Duration::from_millis(100);
/// How long the thread may take to react to a cgroup's growth (a look's
/// interval and a reclaim): the headroom kept below the budget is what the
/// cache grows by in that time.
const REACT: Duration = Duration::from_millis(50);
/// How often the cgroups the scopes name are looked for again (pods come
/// and go).
const WALK_EVERY: Duration = Duration::from_secs(2);
/// The most one memory.reclaim write asks for.
pub const STEP: u64 = 32 << 20;
/// The most reclaim time spent on one cgroup in one look.
const PER_LOOK: Duration = Duration::from_millis(40);
/// The least headroom kept below a budget.
const MARGIN: u64 = 1 << 20;

/// One budgeted cgroup's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupBudget {
    pub scope: String,
    /// As /proc/PID/cgroup shows it.
    pub cgroup: String,
    pub budget_bytes: u64,
    /// Page cache charged now (at the last look), and the most seen.
    pub file_bytes: u64,
    pub file_peak_bytes: u64,
    /// memory.reclaim writes, what they asked for and what the page cache
    /// went down by over them.
    pub reclaims: u64,
    pub asked_bytes: u64,
    pub reclaimed_bytes: u64,
    /// Why it is not reclaimed when over its budget (cgroup v1, a cgroup an
    /// exclusion names inside it, no memory.max for a fraction), or the
    /// last reclaim's error.
    pub not_reclaimed: Option<String>,
    /// The cgroup went (a pod that ended), or the budget with a reload:
    /// its figures stay counted.
    #[serde(default)]
    pub gone: bool,
}

/// A scope's budget and the patterns of the cgroups it is kept for.
#[derive(Debug, Clone)]
struct Budgeted {
    scope: String,
    size: Size,
    cgroups: Vec<CgroupPattern>,
    /// The exclusions' cgroup patterns (the scope's and everyone's).
    excluded: Vec<CgroupPattern>,
}

/// One cgroup kept within a budget.
struct Kept {
    cg: Cgroup,
    figures: CgroupBudget,
    /// Said once in the log.
    said: bool,
    /// When to look next, and the page cache at the last look.
    next: Instant,
    last: Option<(Instant, u64)>,
}

/// Keeps the budgets: the daemon's budget thread calls [`Keeper::tick`]
/// and sleeps for as long as it says.
pub struct Keeper {
    budgets: Vec<Budgeted>,
    memory: Option<Hierarchy>,
    kept: BTreeMap<String, Kept>,
    /// Figures of cgroups that went away (their reclaims still count).
    gone: Vec<CgroupBudget>,
    next_walk: Instant,
    dry_run: bool,
    notices: Vec<String>,
}

impl Keeper {
    /// The budgets of `scopes` (none: a keeper with nothing to do). A dry
    /// run reads and reports, and never asks for reclaim.
    pub fn new(scopes: &Scopes, dry_run: bool) -> Keeper {
        let mut k = Keeper {
            budgets: Vec::new(),
            memory: None,
            kept: BTreeMap::new(),
            gone: Vec::new(),
            next_walk: Instant::now(),
            dry_run,
            notices: Vec::new(),
        };
        k.reload(scopes);
        k
    }

    /// Take the budgets of a new configuration; cgroups it no longer
    /// budgets keep their figures among the gone ones.
    pub fn reload(&mut self, scopes: &Scopes) {
        self.budgets = scopes
            .scopes
            .iter()
            .filter_map(|s| {
                let size = s.budget?;
                let mut excluded = scopes.exclude.processes.cgroups.clone();
                excluded.extend(s.exclude.processes.cgroups.iter().cloned());
                Some(Budgeted {
                    scope: s.name.clone(),
                    size,
                    cgroups: s.processes.cgroups.clone(),
                    excluded,
                })
            })
            .collect();
        self.memory = None;
        if !self.budgets.is_empty() {
            match memory_hierarchy() {
                Ok(h) => self.memory = Some(h),
                Err(e) => self.notices.push(format!("no budget is kept: {e}")),
            }
        }
        self.next_walk = Instant::now();
    }

    /// Whether some scope has a budget.
    pub fn is_idle(&self) -> bool {
        self.budgets.is_empty() || self.memory.is_none()
    }

    /// Lines for the log since the last call.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Look at the budgeted cgroups that are due and reclaim where one is
    /// over; returns how long until the next is due.
    pub fn tick(&mut self) -> Duration {
        let Some(h) = self.memory.clone() else {
            return MAX_LOOK;
        };
        if Instant::now() >= self.next_walk {
            self.next_walk = Instant::now() + WALK_EVERY;
            self.walk(&h);
        }
        let dry_run = self.dry_run;
        let now = Instant::now();
        let mut next = self.next_walk;
        for k in self.kept.values_mut() {
            if k.next <= now {
                keep(k, dry_run, &mut self.notices);
            }
            next = next.min(k.next);
        }
        next.saturating_duration_since(Instant::now())
    }

    /// The figures of every cgroup budgeted now or before.
    pub fn figures(&self) -> Vec<CgroupBudget> {
        let mut v: Vec<CgroupBudget> = self.gone.clone();
        v.extend(self.kept.values().map(|k| k.figures.clone()));
        v
    }

    /// Find the cgroups the budgets are for: the topmost ones a budget's
    /// pattern names, in the memory hierarchy.
    fn walk(&mut self, h: &Hierarchy) {
        let controllers = h.controllers();
        let mut found: BTreeMap<String, (usize, Cgroup)> = BTreeMap::new();
        let root = h.root.clone();
        walk_dirs(&h.mount_point, &root, &mut |path, dir| {
            for (i, b) in self.budgets.iter().enumerate() {
                if b.cgroups.iter().any(|p| p.names(&controllers, path)) {
                    let cg = Cgroup {
                        version: h.version,
                        path: path.to_string(),
                        dir: dir.to_path_buf(),
                    };
                    found.insert(path.to_string(), (i, cg));
                    return false; // its children are counted in it
                }
            }
            true
        });
        let gone: Vec<String> = self
            .kept
            .keys()
            .filter(|p| !found.contains_key(*p))
            .cloned()
            .collect();
        for p in gone {
            if let Some(mut k) = self.kept.remove(&p) {
                k.figures.gone = true;
                self.gone.push(k.figures);
            }
        }
        for (path, (i, cg)) in found {
            let b = &self.budgets[i];
            let why = self.why_not_reclaimed(b, &cg, &controllers);
            let bytes = match b.size {
                Size::Bytes(n) => Some(n),
                Size::OfMax(f) => cg
                    .max()
                    .ok()
                    .filter(|m| *m != u64::MAX)
                    .map(|m| (m as f64 * f) as u64),
            };
            let k = self.kept.entry(path.clone()).or_insert_with(|| Kept {
                cg: cg.clone(),
                figures: CgroupBudget {
                    scope: b.scope.clone(),
                    cgroup: path.clone(),
                    ..CgroupBudget::default()
                },
                said: false,
                next: Instant::now(),
                last: None,
            });
            k.figures.scope = b.scope.clone();
            match bytes {
                Some(n) => k.figures.budget_bytes = n,
                None => {
                    k.figures.budget_bytes = 0;
                    k.figures.not_reclaimed = Some(format!(
                        "no memory.max: a budget of {} has no size",
                        b.size.describe()
                    ));
                    continue;
                }
            }
            k.figures.not_reclaimed = why;
        }
    }

    /// Why the budget of `cg` cannot be kept by reclaim, if it cannot.
    fn why_not_reclaimed(&self, b: &Budgeted, cg: &Cgroup, controllers: &str) -> Option<String> {
        if cg.version == Version::V1 {
            return Some(
                "cgroup v1 has no memory.reclaim: only the followed streams' own pages go".into(),
            );
        }
        let mut inside = None;
        walk_dirs(&cg.dir, &cg.path, &mut |path, _| {
            if inside.is_none() && b.excluded.iter().any(|x| x.matches(controllers, path)) {
                inside = Some(path.to_string());
            }
            inside.is_none()
        });
        inside.map(|x| format!("it holds {x}, which an exclusion names: not reclaimed"))
    }
}

/// Read `k`'s page cache; reclaim the excess if it is over its budget;
/// set when to look next.
fn keep(k: &mut Kept, dry_run: bool, notices: &mut Vec<String>) {
    let now = Instant::now();
    k.next = now + MAX_LOOK;
    let Ok(st) = k.cg.memory_stat() else {
        return; // gone meanwhile: the next walk says so
    };
    // Bytes a second the page cache grew since the last look.
    let rate = match k.last.replace((now, st.file)) {
        Some((t, was)) if now > t => st.file.saturating_sub(was) as f64 / (now - t).as_secs_f64(),
        _ => 0.0,
    };
    let f = &mut k.figures;
    f.file_bytes = st.file;
    f.file_peak_bytes = f.file_peak_bytes.max(st.file);
    if f.budget_bytes == 0 {
        return;
    }
    let most = (f.budget_bytes / 4).max(1);
    let headroom = ((rate * REACT.as_secs_f64()) as u64).clamp(MARGIN.min(most), most);
    let high = f.budget_bytes - headroom;
    if st.file <= high {
        let room = (high - st.file) as f64;
        let until = Duration::try_from_secs_f64(room / rate).unwrap_or(MAX_LOOK);
        k.next = now + until.clamp(MIN_LOOK, MAX_LOOK);
        return;
    }
    k.next = now + MIN_LOOK;
    if let Some(why) = f
        .not_reclaimed
        .as_ref()
        .filter(|_| st.file > f.budget_bytes)
    {
        if !k.said {
            k.said = true;
            notices.push(format!(
                "budget of {}: {} holds {} of page cache, over its {}: {why}",
                f.scope,
                f.cgroup,
                ubio::size::human(st.file),
                ubio::size::human(f.budget_bytes)
            ));
        }
        return;
    }
    if f.not_reclaimed.is_some() {
        return;
    }
    let target = f.budget_bytes.saturating_sub(2 * headroom);
    if dry_run {
        f.reclaims += 1;
        f.asked_bytes += st.file - target;
        return;
    }
    let started = Instant::now();
    let mut file = st.file;
    while file > target && started.elapsed() < PER_LOOK {
        let ask = (file - target).min(STEP);
        let res = k.cg.reclaim(ask, true);
        f.reclaims += 1;
        f.asked_bytes += ask;
        let now = k.cg.memory_stat().map_or(file, |s| s.file);
        f.reclaimed_bytes += file.saturating_sub(now);
        f.file_bytes = now;
        file = now;
        k.last = Some((Instant::now(), now));
        match res {
            Ok(()) => {}
            // Less than asked was reclaimable now: the next look asks again.
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
            Err(e) => {
                f.not_reclaimed = Some(format!("memory.reclaim: {e}"));
                break;
            }
        }
    }
}

/// The memory controller's hierarchy: v1's memory one, else v2's.
fn memory_hierarchy() -> io::Result<Hierarchy> {
    let hs = cgroup::hierarchies()?;
    hs.iter()
        .find(|h| h.has_v1("memory"))
        .or_else(|| hs.iter().find(|h| h.version == Version::V2))
        .cloned()
        .ok_or_else(|| io::Error::other("no memory cgroup hierarchy is mounted"))
}

/// Visit `dir` (cgroup `path`) and, while `visit` says so, its children.
fn walk_dirs(dir: &Path, path: &str, visit: &mut dyn FnMut(&str, &Path) -> bool) {
    if !visit(path, dir) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let name = e.file_name();
            let child = format!("{}/{}", path.trim_end_matches('/'), name.to_string_lossy());
            walk_dirs(&e.path(), &child, visit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fraction_and_bytes_are_described() {
        assert_eq!(Size::OfMax(0.25).describe(), "25% of memory.max");
        assert!(Size::Bytes(256 << 20).describe().starts_with("256"));
    }
}
