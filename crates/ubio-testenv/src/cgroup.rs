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
use ubio_engine::cgroup::{self, Cgroup};

use crate::cleanup::{self, CleanupGuard};
use crate::context;

/// Which cgroup interface the memory controller is reached through (the
/// engine's cgroup layer, ubio_engine::cgroup, reads both).
pub use ubio_engine::cgroup::Version as CgroupVersion;

/// How long drop waits for the cgroup's processes to go before `rmdir`.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(3);

/// The memory cgroup directory this process belongs to, e.g.
/// `/sys/fs/cgroup/memory/process_api/d437…` (v1) or
/// `/sys/fs/cgroup/user.slice/…` (v2).
pub fn own_memory_cgroup() -> io::Result<PathBuf> {
    cgroup::memory_cgroup_of("self").map(|cg| cg.dir)
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
    cg: Cgroup,
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
            .field("path", &self.cg.dir)
            .field("version", &self.cg.version)
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
        let parent = cgroup::memory_cgroup_of("self")?;
        let version = parent.version;
        if version == CgroupVersion::V2 {
            enable_v2_memory_for_children(&parent.dir)?;
        }

        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        let cg = loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let candidate = parent.child(&format!("{name_prefix}-{pid}-{n}"));
            match fs::create_dir(&candidate.dir) {
                Ok(()) => break candidate,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(context(
                        e,
                        format_args!("create cgroup {}", candidate.dir.display()),
                    ))
                }
            }
        };
        let path = cg.dir.clone();
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
        let mut me = MemCgroup {
            cg,
            limit_bytes: 0,
            procs_file,
            spawned,
            _cleanup: cleanup,
        };
        me.set_limit_bytes(limit_bytes)?;
        Ok(me)
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.cg.dir
    }

    /// The cgroup, for the engine's readings of it.
    pub fn cgroup(&self) -> &Cgroup {
        &self.cg
    }

    /// v1 or v2.
    pub fn version(&self) -> CgroupVersion {
        self.cg.version
    }

    /// The limit in force, as read back after setting it (page-rounded;
    /// `u64::MAX` for none).
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Changes the limit (`u64::MAX` for none). Lowering it below the current
    /// usage makes the kernel reclaim first; it fails with EBUSY if it cannot.
    pub fn set_limit_bytes(&mut self, limit_bytes: u64) -> io::Result<()> {
        self.limit_bytes = self.cg.set_max(limit_bytes)?;
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
                    self.cg.dir.display()
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
        self.cg.procs()
    }

    /// `memory.stat` as name -> value. Key names differ between versions: page
    /// cache is `cache` (and `total_cache`) on v1, `file` on v2.
    pub fn memory_stat(&self) -> io::Result<HashMap<String, u64>> {
        self.cg.memory_stat_raw()
    }

    /// Memory charged now, page cache included (`memory.usage_in_bytes` on
    /// v1, `memory.current` on v2).
    pub fn usage_bytes(&self) -> io::Result<u64> {
        self.cg.current()
    }

    /// The high-water mark of usage since creation (`memory.max_usage_in_bytes`
    /// on v1, `memory.peak` on v2, Linux 5.19+).
    pub fn peak_bytes(&self) -> io::Result<u64> {
        self.cg.peak()
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
}
