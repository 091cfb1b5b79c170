//! Memory cgroups for confining a benchmarked process.
//!
//! Page-cache growth is what ubio exists to prevent, and a memory limit makes it
//! observable: a buffered copy inside a 256 MiB cgroup fills it and is pushed
//! into reclaim, an uncached one should not be. [`MemCgroup`] makes a uniquely
//! named child of the memory cgroup this process is in (never anywhere else),
//! sets its limit, runs children in it and removes it when dropped.
//!
//! cgroup v1 is tried first (a `memory` hierarchy in /proc/self/mountinfo and a
//! `N:memory:/path` line in /proc/self/cgroup), then v2 (the `0::/path` line and
//! the cgroup2 mount, with the `memory` controller available to us).
//!
//! Only processes spawned through [`MemCgroup::confine`]/[`MemCgroup::spawn`]
//! enter the cgroup, and each moves itself (between fork and exec): no other
//! process is ever moved, and only children spawned by [`MemCgroup::spawn`] are
//! killed on drop.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use ubio::mounts::{self, Mount};

use crate::cleanup::{self, CleanupGuard};
use crate::context;

/// Which cgroup interface the memory controller is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CgroupVersion {
    /// Legacy per-controller hierarchies: `memory.limit_in_bytes`,
    /// `memory.usage_in_bytes`.
    V1,
    /// The unified hierarchy: `memory.max`, `memory.current`.
    V2,
}

/// How long drop waits for the cgroup's processes to go before `rmdir`.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(3);

/// The memory cgroup directory this process belongs to, e.g.
/// `/sys/fs/cgroup/memory/process_api/d437…` (v1) or
/// `/sys/fs/cgroup/user.slice/…` (v2).
pub fn own_memory_cgroup() -> io::Result<PathBuf> {
    locate_own().map(|(path, _)| path)
}

fn locate_own() -> io::Result<(PathBuf, CgroupVersion)> {
    let cgroup_file = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| context(e, "read /proc/self/cgroup"))?;
    let mounts = mounts::mounts()?;

    // v1: "4:memory:/process_api/abc".
    let v1_path = cgroup_file.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls
            .split(',')
            .any(|c| c == "memory")
            .then(|| path.to_owned())
    });
    if let Some(cg_path) = v1_path {
        if let Some(m) = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.super_opts.split(',').any(|o| o == "memory"))
        {
            return Ok((join_cgroup_path(m, &cg_path), CgroupVersion::V1));
        }
    }

    // v2: "0::/user.slice/...".
    let v2_path = cgroup_file
        .lines()
        .find_map(|line| line.strip_prefix("0::").map(str::to_owned));
    if let (Some(cg_path), Some(m)) = (v2_path, mounts.iter().find(|m| m.fstype == "cgroup2")) {
        let dir = join_cgroup_path(m, &cg_path);
        let controllers = fs::read_to_string(dir.join("cgroup.controllers"))
            .map_err(|e| context(e, format_args!("read {}/cgroup.controllers", dir.display())))?;
        if controllers.split_whitespace().any(|c| c == "memory") {
            return Ok((dir, CgroupVersion::V2));
        }
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "memory controller not available in {} (cgroup v2; controllers: {})",
                dir.display(),
                controllers.trim()
            ),
        ));
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no memory cgroup: neither a v1 `memory` hierarchy nor cgroup2 is mounted for this process",
    ))
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
pub(crate) fn unescape_mountinfo(s: &str) -> String {
    ubio::overlay::unescape_mountinfo(s)
}

/// The directory of cgroup `cg_path` under mount `m`, whose root may itself be
/// a sub-cgroup (bind mounts, cgroup namespaces).
fn join_cgroup_path(m: &Mount, cg_path: &str) -> PathBuf {
    let rel = Path::new(cg_path)
        .strip_prefix(&m.root)
        .unwrap_or_else(|_| Path::new(cg_path.trim_start_matches('/')));
    m.mount_point.join(rel)
}

/// A memory cgroup made beneath our own, removed on drop.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// use ubio_testenv::cgroup::MemCgroup;
/// let cg = MemCgroup::create("ubio-bench", 256 << 20)?;
/// let mut cmd = std::process::Command::new("cat");
/// cmd.arg("/proc/self/cgroup");
/// let status = cg.spawn(&mut cmd)?.wait()?;
/// println!("peak {} bytes, status {status}", cg.peak_bytes()?);
/// # Ok(()) }
/// ```
pub struct MemCgroup {
    path: PathBuf,
    version: CgroupVersion,
    limit_bytes: u64,
    /// `<path>/cgroup.procs`, prepared before fork for the child to open.
    procs_file: CString,
    /// Children started by [`MemCgroup::spawn`], the only processes drop may kill.
    spawned: Arc<Mutex<Vec<u32>>>,
    _cleanup: CleanupGuard,
}

impl std::fmt::Debug for MemCgroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemCgroup")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("limit_bytes", &self.limit_bytes)
            .finish()
    }
}

impl MemCgroup {
    /// Makes `<own cgroup>/<name_prefix>-<pid>-<n>` and limits it to
    /// `limit_bytes` (`u64::MAX` means no limit). The kernel rounds the limit
    /// down to whole pages; [`MemCgroup::limit_bytes`] reports the rounded value.
    ///
    /// On cgroup v2 the `memory` controller must be enabled for our children
    /// (`+memory` in our `cgroup.subtree_control`); this tries to enable it and
    /// explains the failure if our own cgroup holds processes (the v2 "no
    /// internal processes" rule), since moving ourselves is not allowed here.
    pub fn create(name_prefix: &str, limit_bytes: u64) -> io::Result<MemCgroup> {
        if name_prefix.is_empty() || name_prefix.contains('/') || name_prefix.starts_with('.') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad cgroup name prefix {name_prefix:?}: must be a plain, non-hidden name"),
            ));
        }
        let (parent, version) = locate_own()?;
        if version == CgroupVersion::V2 {
            enable_v2_memory_for_children(&parent)?;
        }

        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        let path = loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let candidate = parent.join(format!("{name_prefix}-{pid}-{n}"));
            match fs::create_dir(&candidate) {
                Ok(()) => break candidate,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(context(
                        e,
                        format_args!("create cgroup {}", candidate.display()),
                    ))
                }
            }
        };
        log::debug!("created memory cgroup {}", path.display());

        let spawned = Arc::new(Mutex::new(Vec::new()));
        let cleanup = {
            let (path, spawned) = (path.clone(), Arc::clone(&spawned));
            cleanup::register(format!("rmdir cgroup {}", path.display()), move || {
                remove_cgroup(&path, version, &spawned)
            })
        };
        let procs_file = CString::new(path.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "cgroup path contains NUL"))?;
        let mut cg = MemCgroup {
            path,
            version,
            limit_bytes: 0,
            procs_file,
            spawned,
            _cleanup: cleanup,
        };
        cg.set_limit_bytes(limit_bytes)?;
        Ok(cg)
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// v1 or v2.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The limit in force, as read back after setting it (page-rounded;
    /// `u64::MAX` for none).
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Changes the limit (`u64::MAX` for none). Lowering it below the current
    /// usage makes the kernel reclaim first; it fails with EBUSY if it cannot.
    pub fn set_limit_bytes(&mut self, limit_bytes: u64) -> io::Result<()> {
        let (file, value) = match (self.version, limit_bytes) {
            (CgroupVersion::V1, u64::MAX) => ("memory.limit_in_bytes", "-1".to_owned()),
            (CgroupVersion::V1, n) => ("memory.limit_in_bytes", n.to_string()),
            (CgroupVersion::V2, u64::MAX) => ("memory.max", "max".to_owned()),
            (CgroupVersion::V2, n) => ("memory.max", n.to_string()),
        };
        self.write(file, &value)?;
        self.limit_bytes = self.read_u64(file)?;
        Ok(())
    }

    /// Arranges for the child of `cmd` to move itself into this cgroup between
    /// fork and exec (it writes its own pid to `cgroup.procs`), so everything
    /// it execs and allocates is charged here from its first instruction. If
    /// the move fails, spawning fails with that error. Returns `cmd`.
    ///
    /// Prefer [`MemCgroup::spawn`], which also records the child so that drop
    /// can kill it if it is still running.
    pub fn confine<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        let procs = self.procs_file.clone();
        // SAFETY: the closure runs in the forked child before exec. It only
        // calls async-signal-safe functions (open, getpid, write, close), does
        // not allocate (the path was made before fork; io::Error from an errno
        // does not allocate) and touches no lock.
        unsafe { cmd.pre_exec(move || join_cgroup_self(&procs)) }
    }

    /// Spawns `cmd` inside this cgroup (see [`MemCgroup::confine`]) and
    /// remembers its pid: on drop, a child still running in the cgroup is
    /// killed (SIGKILL) so the cgroup can be removed. Waiting for the child
    /// stays the caller's business.
    pub fn spawn(&self, cmd: &mut Command) -> io::Result<Child> {
        let child = self.confine(cmd).spawn().map_err(|e| {
            context(
                e,
                format_args!(
                    "spawn {:?} in cgroup {}",
                    cmd.get_program(),
                    self.path.display()
                ),
            )
        })?;
        self.spawned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        Ok(child)
    }

    /// Pids currently in the cgroup (`cgroup.procs`).
    pub fn procs(&self) -> io::Result<Vec<u32>> {
        read_procs(&self.path)
    }

    /// `memory.stat` as name -> value. Key names differ between versions: page
    /// cache is `cache` (and `total_cache`) on v1, `file` on v2.
    pub fn memory_stat(&self) -> io::Result<HashMap<String, u64>> {
        Ok(ubio::procfs::parse_pairs(&self.read("memory.stat")?, 1))
    }

    /// Memory charged now, page cache included (`memory.usage_in_bytes` on
    /// v1, `memory.current` on v2).
    pub fn usage_bytes(&self) -> io::Result<u64> {
        self.read_u64(match self.version {
            CgroupVersion::V1 => "memory.usage_in_bytes",
            CgroupVersion::V2 => "memory.current",
        })
    }

    /// The high-water mark of usage since creation (`memory.max_usage_in_bytes`
    /// on v1, `memory.peak` on v2, Linux 5.19+).
    pub fn peak_bytes(&self) -> io::Result<u64> {
        self.read_u64(match self.version {
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
            CgroupVersion::V2 => "memory.peak",
        })
    }

    fn read(&self, file: &str) -> io::Result<String> {
        let p = self.path.join(file);
        fs::read_to_string(&p).map_err(|e| context(e, format_args!("read {}", p.display())))
    }

    fn read_u64(&self, file: &str) -> io::Result<u64> {
        let text = self.read(file)?;
        let t = text.trim();
        if t == "max" {
            return Ok(u64::MAX);
        }
        t.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}/{file}: not a number: {t:?}", self.path.display()),
            )
        })
    }

    fn write(&self, file: &str, value: &str) -> io::Result<()> {
        let p = self.path.join(file);
        fs::write(&p, value)
            .map_err(|e| context(e, format_args!("write {value:?} to {}", p.display())))
    }
}

/// Writes the calling process's pid to `procs` (a cgroup.procs path). Runs in
/// a forked child: async-signal-safe calls only, no allocation.
fn join_cgroup_self(procs: &CStr) -> io::Result<()> {
    // SAFETY: `procs` is a valid NUL-terminated path; open has no other
    // preconditions.
    let fd = unsafe { libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    let mut buf = [0u8; 12];
    let digits = format_u32(pid, &mut buf);
    // SAFETY: `digits` is a valid, initialised slice; fd is open for writing.
    let n = unsafe { libc::write(fd, digits.as_ptr().cast(), digits.len()) };
    let result = if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    };
    // SAFETY: fd was opened above and is closed once.
    unsafe { libc::close(fd) };
    result
}

/// Formats `n` in decimal into the end of `buf` without allocating.
fn format_u32(mut n: u32, buf: &mut [u8; 12]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

fn read_procs(dir: &Path) -> io::Result<Vec<u32>> {
    let p = dir.join("cgroup.procs");
    let text =
        fs::read_to_string(&p).map_err(|e| context(e, format_args!("read {}", p.display())))?;
    Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// On v2, a child cgroup has `memory.*` files only if the parent lists
/// `memory` in `cgroup.subtree_control`.
fn enable_v2_memory_for_children(parent: &Path) -> io::Result<()> {
    let ctl = parent.join("cgroup.subtree_control");
    let current =
        fs::read_to_string(&ctl).map_err(|e| context(e, format_args!("read {}", ctl.display())))?;
    if current.split_whitespace().any(|c| c == "memory") {
        return Ok(());
    }
    fs::write(&ctl, "+memory").map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EBUSY) {
            " (our cgroup holds processes, and cgroup v2 allows controllers for children only in \
             cgroups without processes; run the benchmark from a cgroup whose parent delegates \
             `memory`, e.g. `systemd-run --scope -p Delegate=yes`)"
        } else {
            ""
        };
        context(
            e,
            format_args!("write \"+memory\" to {}{hint}", ctl.display()),
        )
    })
}

/// Drop and signal path: kill our own children still inside, wait until the
/// cgroup is empty, reclaim (v1) and remove it. Failures are reported on
/// stderr, since nobody is left to return them to.
fn remove_cgroup(path: &Path, version: CgroupVersion, spawned: &Mutex<Vec<u32>>) {
    let ours = spawned.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Ok(procs) = read_procs(path) {
        for pid in procs.iter().filter(|p| ours.contains(p)) {
            // A pid listed in our cgroup's cgroup.procs that we spawned is still
            // that child (or its exec'd image): it cannot have been reused by a
            // process outside, since only our children ever enter this cgroup.
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
    }
    let deadline = Instant::now() + EMPTY_TIMEOUT;
    loop {
        match read_procs(path) {
            Ok(p) if p.is_empty() => break,
            Ok(p) if Instant::now() >= deadline => {
                eprintln!(
                    "ubio-bench: cgroup {} still holds processes {p:?} after {EMPTY_TIMEOUT:?}; trying rmdir anyway",
                    path.display()
                );
                break;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => break,
        }
    }
    if version == CgroupVersion::V1 {
        // Reclaim the page cache charged here, so it does not linger as an
        // offline memcg. Best effort: it fails with EBUSY if tasks remain.
        let _ = fs::write(path.join("memory.force_empty"), "0");
    }
    let mut tries = 0;
    loop {
        match fs::remove_dir(path) {
            Ok(()) => {
                log::debug!("removed memory cgroup {}", path.display());
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                eprintln!("ubio-bench: cannot remove cgroup {}: {e}", path.display());
                return;
            }
        }
    }
}

/// Spawns `cmd` in `cg` ([`MemCgroup::spawn`]), or, without a cgroup (a
/// benchmark under global pressure), as a child that the kernel kills when
/// the spawning thread dies ([`crate::cleanup::die_with_parent`]): either
/// way it cannot outlive what made it.
pub fn spawn_in(cg: Option<&MemCgroup>, cmd: &mut Command) -> io::Result<Child> {
    match cg {
        Some(cg) => cg.spawn(cmd),
        None => crate::cleanup::die_with_parent(cmd)
            .spawn()
            .map_err(|e| context(e, format_args!("spawn {:?}", cmd.get_program()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_pids() {
        let mut buf = [0u8; 12];
        assert_eq!(format_u32(0, &mut buf), b"0");
        assert_eq!(format_u32(4_294_967_295, &mut buf), b"4294967295");
        assert_eq!(format_u32(2913, &mut buf), b"2913");
    }

    #[test]
    fn parses_mountinfo() {
        let m = mounts::parse_line(
            "35 31 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory",
        )
        .unwrap();
        assert_eq!(m.fstype, "cgroup");
        assert_eq!(m.super_opts, "rw,memory");
        assert_eq!(m.mount_point, Path::new("/sys/fs/cgroup/memory"));
        assert_eq!(
            join_cgroup_path(&m, "/a/b"),
            Path::new("/sys/fs/cgroup/memory/a/b")
        );
        let m =
            mounts::parse_line("1 2 0:3 /a /mnt/with\\040space rw - cgroup2 cgroup2 rw").unwrap();
        assert_eq!(m.mount_point, Path::new("/mnt/with space"));
        assert_eq!(join_cgroup_path(&m, "/a/b"), Path::new("/mnt/with space/b"));
    }
}
