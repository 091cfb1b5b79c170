//! The policy daemon's test fixture: a scratch directory, two memory
//! cgroups below this process's (one in scope, a sibling out of scope),
//! configurations naming them, and a daemon run and asked as the service
//! runs it (tests/policy.rs, tests/policy_fleet.rs).

use super::engine::*;
use super::{skip, workdir, UBIO};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ubio::sys;
use ubio_testenv::cgroup::{CgroupVersion, MemCgroup};

/// How long the daemon may take to finish a file after its last process
/// closed it (writeback of the tail, then the drop).
pub const FINISH_WITHIN: Duration = Duration::from_secs(60);

/// One test at a time: each starts a daemon watching the whole filesystem.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cold file of `size` bytes of varied data.
pub fn write_input(path: &Path, size: u64) {
    let mut f = File::create(path).unwrap();
    let mut block = vec![0u8; MIB as usize];
    for i in 0..size / MIB {
        for (j, b) in block.iter_mut().enumerate() {
            *b = ((j as u64 * 2654435761 + i * 97) >> 7) as u8;
        }
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    evict(path);
}

/// A scratch directory others can enter (the daemon's socket is in it and
/// another user asks it), and our two cgroups.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// `dir` without `..` or symlinks: as the daemon names the files.
    pub root: PathBuf,
    pub inside: MemCgroup,
    pub outside: MemCgroup,
}

/// Root, fanotify and cgroups, or a skip.
pub fn fixture(name: &str) -> Option<Fixture> {
    if !ubio_testenv::is_root() {
        skip(name, "needs root (fanotify marks, cgroups)");
        return None;
    }
    let inside = match MemCgroup::create("ubio-policy-in", u64::MAX) {
        Ok(c) => c,
        Err(e) => {
            skip(name, &format!("no memory cgroup: {e}"));
            return None;
        }
    };
    let outside = MemCgroup::create("ubio-policy-out", u64::MAX).unwrap();
    let dir = workdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().canonicalize().unwrap();
    Some(Fixture {
        _dir: dir,
        root,
        inside,
        outside,
    })
}

/// The pattern of a configuration that names cgroup `cg` (as
/// /proc/PID/cgroup shows it; v1's with its controller).
pub fn pattern(cg: &MemCgroup) -> String {
    match cg.version() {
        CgroupVersion::V1 => format!("memory:{}", cg.cgroup().path),
        CgroupVersion::V2 => cg.cgroup().path.clone(),
    }
}

impl Fixture {
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    pub fn socket(&self) -> PathBuf {
        self.path("run/policy.sock")
    }

    /// A configuration (mode 0644) whose scope `t` is the inside cgroup,
    /// with `daemon` lines in [daemon] and `extra` lines in the scope.
    pub fn config(&self, name: &str, daemon: &str, extra: &str) -> PathBuf {
        self.config_for(name, daemon, &[pattern(&self.inside)], extra)
    }

    /// The same with the scope's cgroup patterns given.
    pub fn config_for(&self, name: &str, daemon: &str, cgroups: &[String], extra: &str) -> PathBuf {
        let p = self.path(name);
        let list: Vec<String> = cgroups.iter().map(|c| format!("{c:?}")).collect();
        let text = format!(
            "[daemon]\nsocket = \"{}\"\n{daemon}\n[[scope]]\nname = \"t\"\ncgroups = [{}]\n{extra}\n",
            self.socket().display(),
            list.join(", ")
        );
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p
    }

    /// A reader of `in`, in scope, paced: 256 MiB in about 2 s (1 MiB
    /// reads, 8 ms apart).
    pub fn paced_reader(&self) -> Child {
        let mut c = Command::new("python3");
        c.args([
            "-c",
            "import time\nf=open('in','rb',buffering=0)\nwhile f.read(1<<20): time.sleep(0.008)\n",
        ])
        .current_dir(&self.root);
        self.inside.spawn(&mut c).unwrap()
    }

    /// A process in scope that reads `bytes` of `in` and holds it open
    /// until its stdin (piped) is closed.
    pub fn holder(&self, bytes: u64) -> Child {
        let mut c = Command::new("python3");
        c.args([
            "-c",
            &format!(
                "import sys\nf=open('in','rb',buffering=0)\nf.read({bytes})\nsys.stdin.read()\n"
            ),
        ])
        .current_dir(&self.root)
        .stdin(Stdio::piped());
        self.inside.spawn(&mut c).unwrap()
    }

    /// `sh -c cmd` in `cg`, in the scratch directory.
    pub fn sh(&self, cg: &MemCgroup, cmd: &str) -> Output {
        let mut c = Command::new("sh");
        c.args(["-c", cmd])
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cg.spawn(&mut c).unwrap();
        child.wait_with_output().unwrap()
    }
}

/// A running daemon; killed (SIGKILL) if a test fails before stopping it.
pub struct Daemon {
    child: Option<Child>,
    log: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    /// Start `ubio policy run --config CONFIG` (behind `wrap`, a command
    /// prefix) and wait until its socket answers.
    pub fn start(fx: &Fixture, config: &Path, wrap: &[&str]) -> Daemon {
        Self::start_args(fx, config, wrap, &[])
    }

    /// The same with `args` after the configuration (`--dry-run`).
    pub fn start_args(fx: &Fixture, config: &Path, wrap: &[&str], args: &[&str]) -> Daemon {
        let log = fx.path(&format!(
            "daemon-{}.log",
            config.file_name().unwrap().to_str().unwrap()
        ));
        let mut c = match wrap.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(UBIO);
                c
            }
            None => Command::new(UBIO),
        };
        c.args(["policy", "run", "--config"])
            .arg(config)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        let child = c.spawn().unwrap();
        let mut d = Daemon {
            child: Some(child),
            log,
            socket: fx.socket(),
        };
        let t = Instant::now();
        while d.try_status().is_none() {
            if let Some(st) = d.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the daemon exited ({st}):\n{}", d.log_text());
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the daemon does not answer:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn try_status(&self) -> Option<serde_json::Value> {
        let out = Command::new(UBIO)
            .args(["policy", "status", "--json", "--socket"])
            .arg(&self.socket)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    pub fn status(&self) -> serde_json::Value {
        self.try_status()
            .unwrap_or_else(|| panic!("no status:\n{}", self.log_text()))
    }

    /// Files the daemon has finished, over every owner.
    pub fn finished_files(&self) -> u64 {
        self.status()["owners"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["finished"]["files"].as_u64().unwrap())
            .sum()
    }

    /// Wait until the daemon has finished more files than `before`: a
    /// program that ends before the daemon reads its events is not yet
    /// among the managed files, which `wait_finished` alone would take for
    /// done (a CI run read 56 MiB left cached so).
    pub fn wait_finished_since(&self, before: u64) {
        let t = Instant::now();
        while self.finished_files() <= before {
            assert!(
                t.elapsed() < FINISH_WITHIN,
                "the daemon finished nothing new after {FINISH_WITHIN:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until none of `paths` is managed any more (the daemon wrote
    /// back and dropped what their streams left).
    pub fn wait_finished(&self, paths: &[PathBuf]) {
        let t = Instant::now();
        loop {
            let st = self.status();
            let live: Vec<String> = st["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["path"].as_str().unwrap().to_string())
                .collect();
            if !paths.iter().any(|p| live.iter().any(|l| Path::new(l) == p)) {
                return;
            }
            assert!(
                t.elapsed() < FINISH_WITHIN,
                "the daemon still manages {live:?} after {FINISH_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        sys::kill(self.pid(), sig).unwrap();
    }

    /// SIGTERM, wait; the log.
    pub fn stop(self) -> String {
        self.stop_by(libc::SIGTERM)
    }

    /// Signal `sig` (SIGTERM or SIGINT), wait; the log.
    pub fn stop_by(mut self, sig: i32) -> String {
        let mut child = self.child.take().unwrap();
        sys::kill(child.id(), sig).unwrap();
        let st = child.wait().unwrap();
        let log = self.log_text();
        assert!(st.success(), "the daemon ended with {st}:\n{log}");
        log
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = sys::kill(c.id(), libc::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
            eprintln!("daemon log:\n{}", self.log_text());
        }
    }
}
