//! Memory cgroups as ubio meets them, v1 and v2 alike: the policy's scopes
//! and its page-cache budgets, `ubio run`'s own cgroup, and the harness's
//! confined runs all read them through this module.
//!
//! - cgroup v1: one hierarchy per controller (`memory`, mounted at
//!   /sys/fs/cgroup/memory); a process's line in /proc/PID/cgroup is
//!   `N:memory:/path`. No memory.reclaim, no memory.events of this kind.
//! - cgroup v2: the unified hierarchy (/sys/fs/cgroup), `0::/path`, the
//!   memory controller enabled from the root down (`cgroup.subtree_control`).
//!   As systemd lays it out: `/system.slice/backup.service`; as the kubelet
//!   does: `/kubepods.slice/kubepods-burstable.slice/
//!   kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope` (systemd
//!   driver) or `/kubepods/burstable/pod<uid>/<id>` (cgroupfs driver).
//!
//! Paths are as /proc/PID/cgroup shows them to the reader, which depends
//! on the reader's cgroup namespace: inside a container's own namespace the
//! container's cgroup is `/` and every cgroup outside it reads `/../..`.
//! [`namespace`] tells which view this process has, and
//! [`enter_host_namespace`] takes the host's (a node agent's daemon does
//! this first, as `ubio policy run` in a container).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use ubio::mounts::{self, Mount};
use ubio::procfs::{self, CgroupLine};

/// Which cgroup interface holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Version {
    /// Legacy per-controller hierarchies: `memory.limit_in_bytes`,
    /// `memory.usage_in_bytes`.
    V1,
    /// The unified hierarchy: `memory.max`, `memory.current`.
    V2,
}

impl Version {
    pub fn name(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// A mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    /// The v1 mount's options (`rw,memory`, `rw,name=systemd`); empty for v2.
    pub options: String,
    pub mount_point: PathBuf,
    /// The cgroup mounted there (`/` unless a sub-cgroup is bind-mounted, or
    /// the mount was made in a cgroup namespace).
    pub root: String,
}

impl Hierarchy {
    fn from_mount(m: Mount) -> Option<Hierarchy> {
        let (version, options) = match m.fstype.as_str() {
            "cgroup" => (Version::V1, m.super_opts),
            "cgroup2" => (Version::V2, String::new()),
            _ => return None,
        };
        Some(Hierarchy {
            version,
            options,
            mount_point: m.mount_point,
            root: m.root,
        })
    }

    /// A v1 hierarchy of `controller` (never v2: there the controllers are
    /// per cgroup, `cgroup.controllers`).
    pub fn has_v1(&self, controller: &str) -> bool {
        self.version == Version::V1 && self.options.split(',').any(|o| o == controller)
    }

    /// The v1 controllers of this hierarchy, comma-separated as
    /// /proc/PID/cgroup names them (`memory`, `cpu,cpuacct`,
    /// `name=systemd`); empty for v2.
    pub fn controllers(&self) -> String {
        self.options
            .split(',')
            .filter(|o| {
                !matches!(*o, "rw" | "ro" | "nosuid" | "nodev" | "noexec" | "relatime")
                    && !o.starts_with("release_agent=")
                    && *o != "clone_children"
                    && *o != "noprefix"
                    && *o != "xattr"
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The directory of cgroup `path` (as /proc/PID/cgroup shows it) under
    /// this mount; None when the mount does not reach it (a sub-cgroup
    /// mounted, or a path outside this process's cgroup namespace).
    pub fn dir_of(&self, path: &str) -> Option<PathBuf> {
        if path.starts_with("/..") {
            return None;
        }
        let rel = Path::new(path).strip_prefix(&self.root).ok()?;
        Some(self.mount_point.join(rel))
    }
}

/// Every cgroup hierarchy mounted in this mount namespace, those at the
/// usual place (/sys/fs/cgroup) first: a container that binds the host's /
/// elsewhere (/host) sees each twice.
pub fn hierarchies() -> io::Result<Vec<Hierarchy>> {
    let mut v: Vec<Hierarchy> = mounts::mounts()?
        .into_iter()
        .filter_map(Hierarchy::from_mount)
        .collect();
    v.sort_by_key(|h| !h.mount_point.starts_with("/sys/fs/cgroup"));
    Ok(v)
}

/// What this machine runs: v2 alone, v1 for the memory controller (alone or
/// beside a v2 hierarchy without it), or no memory controller mounted.
pub fn memory_version() -> io::Result<Version> {
    let h = hierarchies()?;
    if h.iter().any(|h| h.has_v1("memory")) {
        return Ok(Version::V1);
    }
    if h.iter().any(|h| h.version == Version::V2) {
        return Ok(Version::V2);
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no memory cgroup: neither a v1 `memory` hierarchy nor cgroup2 is mounted",
    ))
}

/// A memory cgroup: its path as /proc shows it and its directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cgroup {
    pub version: Version,
    /// As /proc/PID/cgroup shows it (`/system.slice/backup.service`).
    pub path: String,
    pub dir: PathBuf,
}

/// The memory cgroup of process `pid` ("self" for this one): its v1 memory
/// hierarchy's, else its unified one's where the memory controller is
/// available there.
pub fn memory_cgroup_of(pid: &str) -> io::Result<Cgroup> {
    let lines = procfs::pid_cgroup(pid)?;
    memory_cgroup_in(&lines, &hierarchies()?)
}

/// [`memory_cgroup_of`] from a process's cgroup lines and the mounts.
pub fn memory_cgroup_in(lines: &[CgroupLine], hierarchies: &[Hierarchy]) -> io::Result<Cgroup> {
    if let Some(l) = lines.iter().find(|l| l.has_controller("memory")) {
        if let Some(h) = hierarchies.iter().find(|h| h.has_v1("memory")) {
            return Cgroup::at(h, &l.path);
        }
    }
    let unified = lines.iter().find(|l| l.is_unified());
    let h2 = hierarchies.iter().find(|h| h.version == Version::V2);
    if let (Some(l), Some(h)) = (unified, h2) {
        let cg = Cgroup::at(h, &l.path)?;
        let controllers = cg.read("cgroup.controllers")?;
        if controllers.split_whitespace().any(|c| c == "memory") {
            return Ok(cg);
        }
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "memory controller not available in {} (cgroup v2; controllers: {})",
                cg.dir.display(),
                controllers.trim()
            ),
        ));
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no memory cgroup: neither a v1 `memory` hierarchy nor cgroup2 is mounted for this process",
    ))
}

/// Figures of a memory cgroup's memory.stat, in bytes, the same for both
/// versions (v1's hierarchical `total_*` counts, which include the
/// cgroup's children as v2's do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStat {
    /// Page cache charged here (v2 `file`, v1 `total_cache`).
    pub file: u64,
    pub file_dirty: u64,
    pub file_writeback: u64,
    pub active_file: u64,
    pub inactive_file: u64,
    /// Anonymous memory (v2 `anon`, v1 `total_rss`).
    pub anon: u64,
}

impl MemoryStat {
    /// memory.stat's text of a cgroup of `version`.
    pub fn parse(text: &str, version: Version) -> MemoryStat {
        let m = procfs::parse_pairs(text, 1);
        let get = |v2: &str, v1: &str| {
            let key = match version {
                Version::V2 => v2,
                Version::V1 => v1,
            };
            m.get(key).copied().unwrap_or(0)
        };
        MemoryStat {
            file: get("file", "total_cache"),
            file_dirty: get("file_dirty", "total_dirty"),
            file_writeback: get("file_writeback", "total_writeback"),
            active_file: get("active_file", "total_active_file"),
            inactive_file: get("inactive_file", "total_inactive_file"),
            anon: get("anon", "total_rss"),
        }
    }
}

/// v2's memory.events: how often the cgroup met its limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryEvents {
    pub low: u64,
    pub high: u64,
    pub max: u64,
    pub oom: u64,
    pub oom_kill: u64,
}

impl Cgroup {
    /// The cgroup at `path` of hierarchy `h`.
    pub fn at(h: &Hierarchy, path: &str) -> io::Result<Cgroup> {
        let dir = h.dir_of(path).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "cgroup {path} is not reachable under {} (mounted root {}; a path outside this \
                     process's cgroup namespace starts with /..)",
                    h.mount_point.display(),
                    h.root
                ),
            )
        })?;
        Ok(Cgroup {
            version: h.version,
            path: path.to_string(),
            dir,
        })
    }

    /// The child `name` (not made: see [`Cgroup::make_child`]).
    pub fn child(&self, name: &str) -> Cgroup {
        Cgroup {
            version: self.version,
            path: format!("{}/{name}", self.path.trim_end_matches('/')),
            dir: self.dir.join(name),
        }
    }

    /// Read one of its files; the error names it.
    pub fn read(&self, file: &str) -> io::Result<String> {
        let p = self.dir.join(file);
        fs::read_to_string(&p)
            .map_err(|e| io::Error::new(e.kind(), format!("read {}: {e}", p.display())))
    }

    /// Write one of its files; the error names it and the value.
    pub fn write(&self, file: &str, value: &str) -> io::Result<()> {
        let p = self.dir.join(file);
        fs::write(&p, value).map_err(|e| {
            io::Error::new(e.kind(), format!("write {value:?} to {}: {e}", p.display()))
        })
    }

    /// A number file (`max` is u64::MAX).
    pub fn read_u64(&self, file: &str) -> io::Result<u64> {
        let text = self.read(file)?;
        let t = text.trim();
        if t == "max" {
            return Ok(u64::MAX);
        }
        t.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}/{file}: not a number: {t:?}", self.dir.display()),
            )
        })
    }

    /// memory.stat, whole (names differ between versions).
    pub fn memory_stat_raw(&self) -> io::Result<HashMap<String, u64>> {
        Ok(procfs::parse_pairs(&self.read("memory.stat")?, 1))
    }

    /// memory.stat's figures, the same for both versions.
    pub fn memory_stat(&self) -> io::Result<MemoryStat> {
        Ok(MemoryStat::parse(&self.read("memory.stat")?, self.version))
    }

    /// Memory charged now, page cache included (v2 memory.current, v1
    /// memory.usage_in_bytes).
    pub fn current(&self) -> io::Result<u64> {
        self.read_u64(match self.version {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        })
    }

    /// The hard limit (v2 memory.max, v1 memory.limit_in_bytes); u64::MAX
    /// for none (v1 prints a huge number for none: taken as none too).
    pub fn max(&self) -> io::Result<u64> {
        let file = match self.version {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        };
        let v = self.read_u64(file)?;
        Ok(if v >= 1 << 62 { u64::MAX } else { v })
    }

    /// Set the hard limit (`u64::MAX` for none); returns it as the kernel
    /// took it (page-rounded).
    pub fn set_max(&self, bytes: u64) -> io::Result<u64> {
        let (file, value) = match (self.version, bytes) {
            (Version::V1, u64::MAX) => ("memory.limit_in_bytes", "-1".to_owned()),
            (Version::V1, n) => ("memory.limit_in_bytes", n.to_string()),
            (Version::V2, u64::MAX) => ("memory.max", "max".to_owned()),
            (Version::V2, n) => ("memory.max", n.to_string()),
        };
        self.write(file, &value)?;
        self.max()
    }

    /// The high-water mark of usage (v2 memory.peak, 5.19+; v1
    /// memory.max_usage_in_bytes).
    pub fn peak(&self) -> io::Result<u64> {
        self.read_u64(match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        })
    }

    /// What the kubelet and cAdvisor call the working set: usage less the
    /// inactive page cache (memory.current - inactive_file), what pods are
    /// evicted by.
    pub fn working_set(&self) -> io::Result<u64> {
        let st = self.memory_stat()?;
        Ok(self.current()?.saturating_sub(st.inactive_file))
    }

    /// v2's memory.events (hierarchical: the cgroup and its children); v1
    /// has no such file.
    pub fn events(&self) -> io::Result<MemoryEvents> {
        if self.version == Version::V1 {
            return Err(no_v1("memory.events"));
        }
        let m = procfs::parse_pairs(&self.read("memory.events")?, 1);
        let get = |k: &str| m.get(k).copied().unwrap_or(0);
        Ok(MemoryEvents {
            low: get("low"),
            high: get("high"),
            max: get("max"),
            oom: get("oom"),
            oom_kill: get("oom_kill"),
        })
    }

    /// Ask the kernel to reclaim `bytes` from this cgroup alone (v2's
    /// memory.reclaim, Linux 5.19+): its coldest pages first, page cache and
    /// (with swap) anonymous memory, never another cgroup's. `file_only`
    /// adds `swappiness=0` where the kernel takes it (6.13+), so that no
    /// anonymous memory is swapped for it; an older kernel refuses the key
    /// (EINVAL) and is asked again without it. EAGAIN: the kernel reclaimed
    /// less than asked (what it did reclaim stays reclaimed).
    pub fn reclaim(&self, bytes: u64, file_only: bool) -> io::Result<()> {
        if self.version == Version::V1 {
            return Err(no_v1("memory.reclaim"));
        }
        if file_only {
            match self.write("memory.reclaim", &format!("{bytes} swappiness=0")) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                done => return done,
            }
        }
        self.write("memory.reclaim", &bytes.to_string())
    }

    /// Pids in the cgroup itself (not its children).
    pub fn procs(&self) -> io::Result<Vec<u32>> {
        Ok(self
            .read("cgroup.procs")?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// Whether the cgroup exists (a pod's cgroup goes with the pod).
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }
}

fn no_v1(file: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cgroup v1 has no {file} (cgroup v2 only)"),
    )
}

/// The real-time budget of this process's cgroup v1 cpu cgroup
/// (cpu.rt_runtime_us, on kernels with RT_GROUP_SCHED) and its directory;
/// None where there is none.
pub fn rt_runtime_of_self() -> Option<(u64, PathBuf)> {
    let lines = procfs::pid_cgroup("self").ok()?;
    let line = lines.iter().find(|l| l.has_controller("cpu"))?;
    let h = hierarchies().ok()?.into_iter().find(|h| h.has_v1("cpu"))?;
    let dir = h.dir_of(&line.path)?;
    let v = fs::read_to_string(dir.join("cpu.rt_runtime_us")).ok()?;
    Some((v.trim().parse().ok()?, dir))
}

/// This process's view of cgroup paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespace {
    /// The initial cgroup namespace's (the host's): paths are the host's.
    Host,
    /// A namespace of its own (a container's): paths of cgroups outside its
    /// root read `/..`.
    Own,
}

/// The inode of the initial cgroup namespace, fixed in the kernel
/// (PROC_CGROUP_INIT_INO, include/linux/proc_ns.h).
const INITIAL_NAMESPACE: u64 = 0xEFFF_FFFB;

/// The inode of process `pid`'s cgroup namespace ("self" for this one;
/// another's needs ptrace access to it).
fn namespace_inode(pid: &str) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}/ns/cgroup")).map(|m| m.ino())
}

/// Which view of cgroup paths this process has.
pub fn namespace() -> Namespace {
    match namespace_inode("self") {
        Ok(INITIAL_NAMESPACE) | Err(_) => Namespace::Host,
        Ok(_) => Namespace::Own,
    }
}

/// Enter the host's (the initial) cgroup namespace, through the first
/// process in it whose /proc/PID/ns/cgroup can be opened (PID 1 where the
/// host's init lets it; CAP_SYS_ADMIN and ptrace access are needed), so
/// that cgroup paths read here are the host's. For this thread and the
/// threads it starts after: call it before starting any.
pub fn enter_host_namespace() -> io::Result<()> {
    let mut last = None;
    for pid in procfs::all_pids()? {
        match namespace_inode(&pid.to_string()) {
            Ok(INITIAL_NAMESPACE) => {}
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                last.get_or_insert_with(|| {
                    io::Error::new(
                        e.kind(),
                        "other processes' /proc/PID/ns cannot be read (CAP_SYS_PTRACE is needed)",
                    )
                });
                continue;
            }
            Err(_) => continue,
        }
        let path = format!("/proc/{pid}/ns/cgroup");
        match fs::File::open(&path).and_then(|ns| {
            ubio::sys::setns(std::os::fd::AsFd::as_fd(&ns), ubio::sys::Namespaces::CGROUP)
        }) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(io::Error::new(e.kind(), format!("setns({path}): {e}"))),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no process of the host's cgroup namespace is visible (a PID namespace of its own?)",
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hierarchy(line: &str) -> Hierarchy {
        Hierarchy::from_mount(mounts::parse_line(line).unwrap()).unwrap()
    }

    #[test]
    fn both_versions_map_paths_to_directories() {
        let v1 = hierarchy(
            "35 31 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory",
        );
        assert!(v1.has_v1("memory") && v1.controllers() == "memory");
        assert_eq!(
            v1.dir_of("/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/a/b"))
        );
        let v2 = hierarchy("30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot");
        assert!(!v2.has_v1("memory") && v2.version == Version::V2);
        let pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-ab.scope";
        assert_eq!(
            v2.dir_of(pod),
            Some(Path::new("/sys/fs/cgroup").join(&pod[1..]))
        );
        // A sub-cgroup bind-mounted (a container's view): paths below it only.
        let sub = hierarchy("1 2 0:3 /kubepods /mnt/with\\040space rw - cgroup2 cgroup2 rw");
        assert_eq!(
            sub.dir_of("/kubepods/besteffort/pod9"),
            Some(PathBuf::from("/mnt/with space/besteffort/pod9"))
        );
        assert_eq!(sub.dir_of("/system.slice"), None);
        assert_eq!(
            v2.dir_of("/../../system.slice"),
            None,
            "outside the namespace"
        );
        let sd = hierarchy(
            "36 31 0:32 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd",
        );
        assert_eq!(sd.controllers(), "name=systemd");
    }

    #[test]
    fn the_memory_cgroup_is_v1s_where_memory_is_there() {
        let v1 = hierarchy("35 31 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory");
        let lines = procfs::parse_cgroup("4:memory:/process_api/abc\n0::/\n");
        let cg = memory_cgroup_in(&lines, &[v1]).unwrap();
        assert_eq!(
            (cg.version, cg.path.as_str()),
            (Version::V1, "/process_api/abc")
        );
        assert_eq!(cg.child("x").path, "/process_api/abc/x");
        assert!(memory_cgroup_in(&lines, &[]).is_err());
    }

    #[test]
    fn memory_stat_reads_the_same_in_both_versions() {
        let v2 = MemoryStat::parse("anon 10\nfile 4096\nfile_dirty 8\nfile_writeback 2\nactive_file 1000\ninactive_file 3096\n", Version::V2);
        assert_eq!(
            v2,
            MemoryStat {
                file: 4096,
                file_dirty: 8,
                file_writeback: 2,
                active_file: 1000,
                inactive_file: 3096,
                anon: 10
            }
        );
        let v1 = MemoryStat::parse("cache 5\nrss 1\ntotal_cache 4096\ntotal_rss 10\ntotal_dirty 8\ntotal_writeback 2\ntotal_active_file 1000\ntotal_inactive_file 3096\n", Version::V1);
        assert_eq!(v1, v2);
    }

    #[test]
    fn this_process_has_a_memory_cgroup_and_a_view() {
        match memory_cgroup_of("self") {
            Ok(cg) => {
                assert!(cg.exists(), "{cg:?}");
                assert!(cg.current().unwrap() > 0);
                assert!(cg.memory_stat().is_ok());
                assert!(cg.procs().is_ok());
            }
            Err(e) => eprintln!("no memory cgroup here: {e}"),
        }
        // The tests run on the host, or in a guest's /init: the initial
        // namespace's view.
        assert_eq!(namespace(), Namespace::Host);
    }
}
