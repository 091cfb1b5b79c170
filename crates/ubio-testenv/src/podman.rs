//! podman (Debian's) with everything of its own in a scratch directory, for
//! tests that run ubio as a container: image storage (the vfs driver: no
//! mount outlives a test), runtime state and settings, and the containers'
//! cgroups below this process's own, removed when dropped or on a
//! termination signal.
//!
//! Settings this kind of machine needs (a hybrid cgroup v1 layout, a shell
//! without CAP_SYS_RESOURCE): runc (crun 1.8 refuses hybrid layouts), the
//! cgroupfs manager (no systemd), file events, and ulimits the caller may
//! grant. Containers are started with `--cgroup-parent` below this
//! process's memory cgroup: runc makes that path in every hierarchy, and
//! what it made where this process sits higher (every v1 hierarchy but
//! memory) is removed again, deepest first, and only what did not exist
//! before.

use crate::cleanup::{self, CleanupGuard};
use crate::{context, require_tool};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A private podman; see the module's documentation.
pub struct Podman {
    dir: tempfile::TempDir,
    /// The cgroup path (as /proc shows it) the containers go below.
    parent: String,
    /// The cgroup directories `parent` adds (this instance's to remove).
    made: Vec<PathBuf>,
    state: Arc<Mutex<State>>,
    _cleanup: CleanupGuard,
}

#[derive(Default)]
struct State {
    /// Containers started (names).
    containers: Vec<String>,
}

impl Podman {
    /// A podman whose storage, state and settings are in a new scratch
    /// directory under `parent_dir` (a disk filesystem: vfs copies layers).
    pub fn new(parent_dir: &Path) -> io::Result<Podman> {
        require_tool("podman")?;
        require_tool("runc")?;
        let dir = tempfile::Builder::new()
            .prefix("ubio-podman-")
            .tempdir_in(parent_dir)?;
        let conf = dir.path().join("containers.conf");
        std::fs::write(
            &conf,
            format!(
                "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\
                 [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
                 tmp_dir = \"{}/tmp\"\n",
                dir.path().display()
            ),
        )
        .map_err(|e| context(e, format_args!("write {}", conf.display())))?;
        let storage = dir.path().join("storage.conf");
        std::fs::write(
            &storage,
            format!(
                "[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n",
                dir.path().display()
            ),
        )
        .map_err(|e| context(e, format_args!("write {}", storage.display())))?;
        let own = ubio_engine::cgroup::memory_cgroup_of("self")?;
        static N: AtomicU64 = AtomicU64::new(0);
        let parent = format!(
            "{}/ubio-podman-{}-{}",
            own.path.trim_end_matches('/'),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let made = made_dirs(&parent);
        let state = Arc::new(Mutex::new(State::default()));
        let cleanup = {
            let (state, env) = (Arc::clone(&state), Env::of(dir.path()));
            let (parent, made_before) = (parent.clone(), made.clone());
            cleanup::register(format!("podman containers below {parent}"), move || {
                let names =
                    std::mem::take(&mut state.lock().unwrap_or_else(|p| p.into_inner()).containers);
                for n in names {
                    let _ = env.command().args(["rm", "-f", "-t", "2", &n]).output();
                }
                remove_cgroups(&parent, &made_before);
            })
        };
        Ok(Podman {
            dir,
            parent,
            made,
            state,
            _cleanup: cleanup,
        })
    }

    /// The scratch directory (storage, state, settings).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `podman` with this instance's settings and storage.
    pub fn command(&self) -> Command {
        Env::of(self.dir.path()).command()
    }

    /// The environment that gives another program (scripts/container.sh)
    /// this instance's settings and storage.
    pub fn envs(&self) -> Vec<(&'static str, PathBuf)> {
        Env::of(self.dir.path()).vars()
    }

    /// Where the kernel has RT_GROUP_SCHED (a v1 `cpu` hierarchy with
    /// cpu.rt_runtime_us, which a new cgroup gets as 0), gives the cgroups
    /// this instance adds for its containers `runtime_us` of real-time time
    /// per second, top down (a cgroup's budget must fit in its parent's), so
    /// that a container run with `--cpu-rt-runtime` may run SCHED_FIFO
    /// threads. Before the first container. Ok(false) where the kernel has
    /// no such budget (every cgroup may run real-time threads); an error
    /// where a cgroup above, not this instance's, has none to give.
    pub fn give_real_time(&self, runtime_us: u64) -> io::Result<bool> {
        let hierarchies = ubio_engine::cgroup::hierarchies()?;
        let Some(cpu) = hierarchies.iter().find(|h| h.has_v1("cpu")) else {
            return Ok(false);
        };
        let budget = |dir: &Path| dir.join("cpu.rt_runtime_us");
        let mut path = String::new();
        for part in self.parent.split('/').filter(|s| !s.is_empty()) {
            path.push('/');
            path.push_str(part);
            let Some(dir) = cpu.dir_of(&path) else {
                return Ok(false);
            };
            if !self.made.contains(&dir) {
                let theirs = std::fs::read_to_string(budget(&dir)).unwrap_or_default();
                if theirs.trim() == "0" {
                    return Err(io::Error::other(format!(
                        "{}: no real-time time to give (not this test's cgroup)",
                        budget(&dir).display()
                    )));
                }
                continue;
            }
            std::fs::create_dir_all(&dir)
                .map_err(|e| context(e, format_args!("mkdir {}", dir.display())))?;
            if !budget(&dir).exists() {
                return Ok(false);
            }
            std::fs::write(budget(&dir), runtime_us.to_string())
                .map_err(|e| context(e, format_args!("write {}", budget(&dir).display())))?;
        }
        Ok(true)
    }

    /// `podman run -d --name NAME --cgroup-parent ... ARGS...`: a container
    /// below this process's cgroup, removed with this instance.
    pub fn run_detached(&self, name: &str, args: &[&str]) -> io::Result<Output> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .containers
            .push(name.to_string());
        self.command()
            .args(["run", "-d", "--name", name, "--cgroup-parent", &self.parent])
            .args(args)
            .output()
            .map_err(|e| context(e, "run podman"))
    }

    /// `podman ARGS...`, its output.
    pub fn output(&self, args: &[&str]) -> io::Result<Output> {
        self.command()
            .args(args)
            .output()
            .map_err(|e| context(e, format_args!("podman {}", args.join(" "))))
    }
}

/// The settings' files of an instance, passed to podman by environment.
#[derive(Clone)]
struct Env {
    dir: PathBuf,
}

impl Env {
    fn of(dir: &Path) -> Env {
        Env {
            dir: dir.to_path_buf(),
        }
    }

    fn vars(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("CONTAINERS_CONF", self.dir.join("containers.conf")),
            ("CONTAINERS_STORAGE_CONF", self.dir.join("storage.conf")),
        ]
    }

    fn command(&self) -> Command {
        let mut c = Command::new("podman");
        c.envs(self.vars());
        c
    }
}

/// The cgroup directories `path` would add in each mounted hierarchy: for
/// each, the missing prefixes of `path`, deepest last.
fn made_dirs(path: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in ubio_engine::cgroup::hierarchies().unwrap_or_default() {
        let mut p = String::new();
        for part in path.split('/').filter(|s| !s.is_empty()) {
            p.push('/');
            p.push_str(part);
            if let Some(dir) = h.dir_of(&p) {
                if !dir.exists() {
                    out.push(dir);
                }
            }
        }
    }
    out
}

/// Remove what runc made below `parent` (the containers' and conmon's
/// cgroups) and the directories of `made` (what `parent` added), deepest
/// first, in every hierarchy.
fn remove_cgroups(parent: &str, made: &[PathBuf]) {
    for h in ubio_engine::cgroup::hierarchies().unwrap_or_default() {
        if let Some(dir) = h.dir_of(parent) {
            remove_tree(&dir);
        }
    }
    for dir in made.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// rmdir a cgroup and its children, deepest first. A process still in
/// them (a container `podman rm` did not end, conmon) is killed first:
/// only this instance's containers were ever started there.
fn remove_tree(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&e.path());
        }
    }
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        for pid in procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            log::warn!("killing pid {pid}, left in {}", dir.display());
            let _ = ubio::sys::kill(pid, libc::SIGKILL);
        }
    }
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    log::warn!("cannot remove cgroup {}", dir.display());
}
