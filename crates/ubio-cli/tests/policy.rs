//! `ubio policy`: the daemon applies the contract to the processes of its
//! scope and to nothing else. Each test makes its own memory cgroups below
//! this process's (one in scope, a sibling out of scope), starts a daemon
//! whose scope is the first, runs real programs in both on cold 256 MiB
//! files and checks with cachestat() (sampled every 2 ms, and after the
//! daemon finished each file): in scope the input's and outputs' cache
//! peaks stay within 64 MiB, the outputs' dirty + writeback within the
//! engine's bound and nothing is left cached (common::engine, the bounds
//! `ubio run` keeps too); out of scope the files stay cached. Also: a
//! process running before the daemon and a cgroup made after it, an
//! excluded path, pages cached before, bad configurations and reloads, a
//! forced queue overflow, polling without CAP_SYS_ADMIN, the status socket
//! as root and as another user, the unit's capabilities, and the machine's
//! reclaim in the status (deltas of /proc/vmstat, the daemon's own trace
//! instance made and removed).
//!
//! Needs root (fanotify, cgroups) and the workspace built.

mod common;

use common::engine::*;
use common::{skip, workdir, UBIO};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ubio::sys;
use ubio_testenv::cgroup::{CgroupVersion, MemCgroup};
use ubio_testenv::kept_pages::{check_kept, with_damon_retries};
use ubio_testenv::residency_sampler::{Peaks, ResidencySampler};

/// How long the daemon may take to finish a file after its last process
/// closed it (writeback of the tail, then the drop).
const FINISH_WITHIN: Duration = Duration::from_secs(60);

/// One test at a time: each starts a daemon watching the whole filesystem.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cold file of `size` bytes of varied data.
fn write_input(path: &Path, size: u64) {
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
struct Fixture {
    _dir: tempfile::TempDir,
    /// `dir` without `..` or symlinks: as the daemon names the files.
    root: PathBuf,
    inside: MemCgroup,
    outside: MemCgroup,
}

/// Root, fanotify and cgroups, or a skip.
fn fixture(name: &str) -> Option<Fixture> {
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
fn pattern(cg: &MemCgroup) -> String {
    match cg.version() {
        CgroupVersion::V1 => format!("memory:{}", cg.cgroup().path),
        CgroupVersion::V2 => cg.cgroup().path.clone(),
    }
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn socket(&self) -> PathBuf {
        self.path("run/policy.sock")
    }

    /// A configuration (mode 0644) whose scope `t` is the inside cgroup,
    /// with `daemon` lines in [daemon] and `extra` lines in the scope.
    fn config(&self, name: &str, daemon: &str, extra: &str) -> PathBuf {
        self.config_for(name, daemon, &[pattern(&self.inside)], extra)
    }

    /// The same with the scope's cgroup patterns given.
    fn config_for(&self, name: &str, daemon: &str, cgroups: &[String], extra: &str) -> PathBuf {
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
    fn paced_reader(&self) -> Child {
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
    fn holder(&self, bytes: u64) -> Child {
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
    fn sh(&self, cg: &MemCgroup, cmd: &str) -> Output {
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
struct Daemon {
    child: Option<Child>,
    log: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    /// Start `ubio policy run --config CONFIG` (behind `wrap`, a command
    /// prefix) and wait until its socket answers.
    fn start(fx: &Fixture, config: &Path, wrap: &[&str]) -> Daemon {
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

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_status(&self) -> Option<serde_json::Value> {
        let out = Command::new(UBIO)
            .args(["policy", "status", "--json", "--socket"])
            .arg(&self.socket)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    fn status(&self) -> serde_json::Value {
        self.try_status()
            .unwrap_or_else(|| panic!("no status:\n{}", self.log_text()))
    }

    /// Files the daemon has finished, over every owner.
    fn finished_files(&self) -> u64 {
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
    fn wait_finished_since(&self, before: u64) {
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
    fn wait_finished(&self, paths: &[PathBuf]) {
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

    fn signal(&self, sig: i32) {
        sys::kill(self.pid(), sig).unwrap();
    }

    /// SIGTERM, wait; the log.
    fn stop(self) -> String {
        self.stop_by(libc::SIGTERM)
    }

    /// Signal `sig` (SIGTERM or SIGINT), wait; the log.
    fn stop_by(mut self, sig: i32) -> String {
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

struct Case {
    name: &'static str,
    needs: &'static str,
    cmd: String,
    outputs: &'static [&'static str],
}

fn cases(gocopy: &Path) -> Vec<Case> {
    let go = gocopy.display();
    vec![
        Case { name: "cp", needs: "cp", cmd: "cp in out".into(), outputs: &["out"] },
        Case { name: "tar", needs: "tar", cmd: "tar cf out.tar in".into(), outputs: &["out.tar"] },
        Case { name: "sha256sum", needs: "sha256sum", cmd: "sha256sum in".into(), outputs: &[] },
        Case {
            name: "python3 copy",
            needs: "python3",
            cmd: "python3 -c 'import shutil; shutil.copyfileobj(open(\"in\",\"rb\"), open(\"out\",\"wb\"), 1<<20)'".into(),
            outputs: &["out"],
        },
        Case { name: "static Go io.Copy", needs: "sh", cmd: format!("{go} in out"), outputs: &["out"] },
        Case { name: "static Go read/write loop", needs: "sh", cmd: format!("{go} -rw in out"), outputs: &["out"] },
    ]
}

/// What one run of a case left and peaked at.
struct Seen {
    input_peak: Peaks,
    outputs_peak: Peaks,
    /// Cached bytes of the input and each output, once measured.
    left: Vec<u64>,
}

fn run_case(fx: &Fixture, cg: &MemCgroup, case: &Case, daemon: Option<&Daemon>) -> Seen {
    let input = fx.path("in");
    let outs: Vec<PathBuf> = case.outputs.iter().map(|o| fx.path(o)).collect();
    for o in &outs {
        let _ = std::fs::remove_file(o);
    }
    evict(&input);
    let si = ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY);
    let so = ResidencySampler::follow_all(outs.clone(), SAMPLE_EVERY);
    let out = fx.sh(cg, &case.cmd);
    assert!(
        out.status.success(),
        "{}: {} ({})",
        case.name,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // In scope: once the daemon finished the files (right away for the
    // control, before the kernel reclaims anything).
    let all: Vec<PathBuf> = std::iter::once(input.clone())
        .chain(outs.iter().cloned())
        .collect();
    if let Some(d) = daemon {
        d.wait_finished(&all);
    }
    let left = all
        .iter()
        .map(|p| if p.exists() { cached(p) } else { 0 })
        .collect();
    Seen {
        input_peak: si.finish().unwrap(),
        outputs_peak: so.finish().unwrap(),
        left,
    }
}

fn mib(pages: u64) -> f64 {
    (pages * PAGE) as f64 / MIB as f64
}

#[test]
fn programs_in_scope_keep_the_contract_and_others_are_untouched() {
    let _s = serial();
    let name = "programs_in_scope_keep_the_contract_and_others_are_untouched";
    let Some(fx) = fixture(name) else { return };
    let gocopy = match build_gocopy(&fx.root) {
        Ok(g) => g,
        Err(e) => return skip(name, &e),
    };
    write_input(&fx.path("in"), SIZE);
    let cfg = fx.config("policy.toml", "", "");
    let daemon = Daemon::start(&fx, &cfg, &[]);
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in cases(&gocopy) {
        if !have(case.needs) {
            skip(
                &format!("{name}: {}", case.name),
                &format!("{} not installed", case.needs),
            );
            continue;
        }
        ran += 1;
        let t = Instant::now();
        let s = run_case(&fx, &fx.inside, &case, Some(&daemon));
        eprintln!(
            "in scope:     {:<26} {:>5.1} s: input peak {:>5.1} MiB, outputs' dirty+writeback peak {:>5.1} MiB (cached {:>5.1}), left {:?} B",
            case.name,
            t.elapsed().as_secs_f64(),
            mib(s.input_peak.max_cached),
            mib(s.outputs_peak.max_dirty_writeback),
            mib(s.outputs_peak.max_cached),
            s.left
        );
        for w in beyond_bounds(&s.input_peak, &s.outputs_peak, &s.left) {
            failures.push(format!("{} in scope: {w}", case.name));
        }
        // The same in the sibling cgroup: the daemon leaves it alone.
        let s = run_case(&fx, &fx.outside, &case, None);
        eprintln!(
            "out of scope: {:<26} input left {:>5.1} MiB, outputs left {:?} B",
            case.name,
            s.left[0] as f64 / MIB as f64,
            &s.left[1..]
        );
        if s.left[0] < SIZE / 2 {
            failures.push(format!(
                "{} out of scope: only {} MiB of the input stayed cached",
                case.name,
                s.left[0] / MIB
            ));
        }
        if s.left[1..].iter().any(|&b| b < SIZE / 2) {
            failures.push(format!(
                "{} out of scope: outputs not cached: {:?}",
                case.name,
                &s.left[1..]
            ));
        }
    }
    // The out-of-scope runs were never followed: every file it finished
    // was an in-scope run's.
    let files = daemon.finished_files();
    let log = daemon.stop();
    assert!(ran >= 5, "only {ran} programs ran");
    eprintln!("daemon: {files} files finished; log:\n{log}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_process_from_before_the_start_and_a_cgroup_made_after_are_covered() {
    let _s = serial();
    let name = "a_process_from_before_the_start_and_a_cgroup_made_after_are_covered";
    let Some(fx) = fixture(name) else { return };
    write_input(&fx.path("in"), SIZE);
    // A reader already streaming when the daemon starts (paced: 256 MiB
    // in about 2 s).
    let mut early = fx.paced_reader();
    std::thread::sleep(Duration::from_millis(300));
    // The scope also takes cgroups made later: a glob over siblings named
    // ubio-policy-late-*.
    let inside = pattern(&fx.inside);
    let late_glob = format!(
        "{}/ubio-policy-late-*",
        &inside[..inside.rfind('/').unwrap()]
    );
    let cfg = fx.config_for("policy.toml", "", &[inside, late_glob], "");
    let daemon = Daemon::start(&fx, &cfg, &[]);
    assert!(early.wait().unwrap().success());
    let input = fx.path("in");
    daemon.wait_finished(std::slice::from_ref(&input));
    let left = cached(&input);
    assert_eq!(
        left, 0,
        "the reader that ran before the daemon left {left} B cached"
    );
    // A cgroup made after the start. (sha256sum, which advises
    // POSIX_FADV_SEQUENTIAL as cat does but reads more slowly: cat's page
    // cache peaks at 54-70 MiB under the daemon on this loaded machine, its
    // readahead running twice as far ahead; README, ubio policy.)
    let late = MemCgroup::create("ubio-policy-late", u64::MAX).unwrap();
    evict(&input);
    let si = ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY);
    let out = fx.sh(&late, "sha256sum in > /dev/null");
    assert!(out.status.success());
    daemon.wait_finished(std::slice::from_ref(&input));
    let peak = si.finish().unwrap();
    let left = cached(&input);
    eprintln!(
        "late cgroup: input peak {:.1} MiB, left {left} B",
        mib(peak.max_cached)
    );
    assert!(peak.max_cached * PAGE <= PEAK_LIMIT, "{peak:?}");
    assert_eq!(left, 0);
    daemon.stop();
}

#[test]
fn excluded_paths_and_pages_cached_before_are_left_alone() {
    let _s = serial();
    let name = "excluded_paths_and_pages_cached_before_are_left_alone";
    let Some(fx) = fixture(name) else { return };
    std::fs::create_dir(fx.path("db")).unwrap();
    write_input(&fx.path("db/table"), SIZE);
    write_input(&fx.path("in"), SIZE);
    let cfg = fx.config(
        "policy.toml",
        "",
        &format!("[scope.exclude]\npaths = [\"{}\"]", fx.path("db").display()),
    );
    let daemon = Daemon::start(&fx, &cfg, &[]);
    // The excluded file: read in scope, it stays cached.
    let out = fx.sh(&fx.inside, "cat db/table > /dev/null");
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(200));
    let left = cached(&fx.path("db/table"));
    assert!(
        left >= SIZE * 9 / 10,
        "the excluded file kept only {left} B cached"
    );
    // Pages another reader cached before the stream stay.
    let input = fx.path("in");
    with_damon_retries("pages cached before the stream", || {
        evict(&input);
        let f = File::open(&input).unwrap();
        let mut buf = vec![0u8; MIB as usize];
        for i in 0..64 {
            use std::os::unix::fs::FileExt;
            f.read_exact_at(&mut buf, 96 * MIB + i * MIB).unwrap();
        }
        // With the readahead those reads brought in.
        let before = cached(&input);
        let out = fx.sh(&fx.inside, "cat in > /dev/null");
        assert!(out.status.success());
        daemon.wait_finished(std::slice::from_ref(&input));
        check_kept(&input, 96 * MIB, 64 * MIB)?;
        // And nothing of the stream's own stays, but what it read before
        // the daemon first saw the file (taken as others', since others'
        // pages are cached further on: 0 here, up to 1.4 MiB under QEMU's
        // emulation, scripts/guest/run.sh).
        let after = cached(&input);
        eprintln!("cached {before} B before the stream, {after} B after");
        if after > before + FIRST_SIGHT {
            return Err(format!(
                "{after} B cached after the stream, {before} B before"
            ));
        }
        Ok(())
    });
    daemon.stop();
}

#[test]
fn bad_configurations_and_reloads_are_refused_with_their_line() {
    let _s = serial();
    let name = "bad_configurations_and_reloads_are_refused_with_their_line";
    let Some(fx) = fixture(name) else { return };
    let bad = fx.path("bad.toml");
    std::fs::write(&bad, "[[scope]]\nname = \"t\"\ncgroups = [\"no-slash\"]\n").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o644)).unwrap();
    for args in [&["policy", "check"][..], &["policy", "run", "--config"][..]] {
        let out = Command::new(UBIO).args(args).arg(&bad).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{}:3: cgroup \"no-slash\": the path must start with /",
                bad.display()
            )),
            "{args:?}: {err}"
        );
    }
    // Writable by others: refused before it is read.
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = Command::new(UBIO)
        .args(["policy", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("writable by everyone"),
        "{}",
        common::stderr(&out)
    );

    write_input(&fx.path("in"), SIZE);
    let cfg = fx.config("policy.toml", "", "");
    let good = std::fs::read_to_string(&cfg).unwrap();
    let daemon = Daemon::start(&fx, &cfg, &[]);
    // A reload with a mistake: refused with its line, the old one runs on.
    std::fs::write(&cfg, format!("{good}min_size = \"lots\"\n")).unwrap();
    daemon.signal(libc::SIGHUP);
    let t = Instant::now();
    while !daemon.log_text().contains("reload refused") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = daemon.log_text();
    let line = good.lines().count() + 1;
    assert!(
        log.contains(&format!("{}:{line}: ", cfg.display())),
        "{log}"
    );
    let input = fx.path("in");
    let finished = daemon.finished_files();
    let out = fx.sh(&fx.inside, "cat in > /dev/null");
    assert!(out.status.success());
    daemon.wait_finished_since(finished);
    daemon.wait_finished(std::slice::from_ref(&input));
    assert_eq!(cached(&input), 0, "the old configuration stopped working");
    // A good reload takes effect: the scope now excludes the input.
    std::fs::write(
        &cfg,
        format!("{good}[scope.exclude]\npaths = [\"{}\"]\n", input.display()),
    )
    .unwrap();
    daemon.signal(libc::SIGHUP);
    let t = Instant::now();
    while !daemon.log_text().contains("reloaded") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{}",
            daemon.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    evict(&input);
    let out = fx.sh(&fx.inside, "cat in > /dev/null");
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(200));
    let left = cached(&input);
    assert!(
        left >= SIZE * 9 / 10,
        "after the reload the excluded input kept only {left} B"
    );
    daemon.stop();
}

#[test]
fn a_queue_overflow_falls_back_to_a_scan_and_leaves_nothing_cached() {
    let _s = serial();
    let name = "a_queue_overflow_falls_back_to_a_scan_and_leaves_nothing_cached";
    let Some(fx) = fixture(name) else { return };
    write_input(&fx.path("in"), SIZE);
    // More small files than the queue holds (16,384 events by default):
    // one event each (a process's events on one file merge).
    let queue: usize = std::fs::read_to_string("/proc/sys/fs/fanotify/max_queued_events")
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(16384);
    let flood = fx.path("flood");
    std::fs::create_dir(&flood).unwrap();
    for i in 0..queue + 2000 {
        std::fs::write(flood.join(i.to_string()), b"x").unwrap();
    }
    let cfg = fx.config("policy.toml", "", "");
    let daemon = Daemon::start(&fx, &cfg, &[]);
    // Stopped, the daemon reads nothing: the flood overflows the queue and
    // the reader's own events are lost with it.
    daemon.signal(libc::SIGSTOP);
    let out = Command::new("sh")
        .args(["-c", "find flood -type f -exec cat {} + > /dev/null"])
        .current_dir(&fx.root)
        .output()
        .unwrap();
    assert!(out.status.success());
    let input = fx.path("in");
    let si = ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY);
    let mut reader = fx.paced_reader();
    std::thread::sleep(Duration::from_millis(200));
    daemon.signal(libc::SIGCONT);
    assert!(reader.wait().unwrap().success());
    daemon.wait_finished(std::slice::from_ref(&input));
    let peak = si.finish().unwrap();
    let left = cached(&input);
    let st = daemon.status();
    let log = daemon.stop();
    eprintln!(
        "overflow: input peak {:.1} MiB, left {left} B; overflows {}",
        mib(peak.max_cached),
        st["overflows"]
    );
    assert!(
        st["overflows"].as_u64().unwrap() >= 1,
        "no overflow was seen:\n{log}"
    );
    assert!(
        log.contains("overflowed") && log.contains("scanning"),
        "{log}"
    );
    assert_eq!(left, 0, "left cached after the overflow:\n{log}");
}

#[test]
fn without_cap_sys_admin_it_polls_and_says_why() {
    let _s = serial();
    let name = "without_cap_sys_admin_it_polls_and_says_why";
    let Some(fx) = fixture(name) else { return };
    if !have("setpriv") {
        return skip(name, "no setpriv (util-linux)");
    }
    write_input(&fx.path("in"), SIZE);
    let cfg = fx.config("policy.toml", "poll_interval = \"100ms\"", "");
    let daemon = Daemon::start(
        &fx,
        &cfg,
        &[
            "setpriv",
            "--bounding-set=-sys_admin",
            "--inh-caps=-sys_admin",
            "--",
        ],
    );
    let log = daemon.log_text();
    assert!(
        log.contains("fanotify_init") && log.contains("CAP_SYS_ADMIN"),
        "{log}"
    );
    assert!(
        log.contains("polling the scopes' processes every 100 ms"),
        "{log}"
    );
    let input = fx.path("in");
    let si = ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY);
    let mut reader = fx.paced_reader();
    assert!(reader.wait().unwrap().success());
    daemon.wait_finished(std::slice::from_ref(&input));
    let peak = si.finish().unwrap();
    let left = cached(&input);
    let st = daemon.status();
    daemon.stop();
    eprintln!(
        "polling: input peak {:.1} MiB, left {left} B",
        mib(peak.max_cached)
    );
    assert_eq!(st["discovery"], "poll");
    assert_eq!(left, 0);
    assert!(peak.max_cached * PAGE <= PEAK_LIMIT, "{peak:?}");
}

#[test]
fn status_answers_each_user_with_what_proc_shows_them() {
    let _s = serial();
    let name = "status_answers_each_user_with_what_proc_shows_them";
    let Some(fx) = fixture(name) else { return };
    if !have("setpriv") {
        return skip(name, "no setpriv (util-linux)");
    }
    write_input(&fx.path("in"), SIZE);
    let cfg = fx.config("policy.toml", "", "");
    let daemon = Daemon::start(&fx, &cfg, &[]);
    // A root process in scope holds the input open while both ask.
    let mut holder = fx.holder(1 << 20);
    let input = fx.path("in");
    let t = Instant::now();
    loop {
        let st = daemon.status();
        if st["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| Path::new(f["path"].as_str().unwrap()) == input)
        {
            assert!(st["events"].as_u64().unwrap() > 0);
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "root never sees the file: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            UBIO,
            "policy",
            "status",
            "--json",
            "--socket",
        ])
        .arg(fx.socket())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["restricted"], true, "{st}");
    assert!(
        st["files"].as_array().unwrap().is_empty(),
        "nobody sees root's files: {st}"
    );
    assert_eq!(st["events"], 0, "{st}");
    assert!(st["marks"].as_array().unwrap().is_empty(), "{st}");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    daemon.wait_finished(std::slice::from_ref(&input));
    let log = daemon.stop();
    // The same figures in the log at exit.
    assert!(
        log.contains("exiting; the figures:") && log.contains("pages dropped"),
        "{log}"
    );
}

/// The unit's capability set is enough: a file of another user, mode
/// 0600, read by that user's process in scope, is managed.
#[test]
fn the_units_capabilities_are_enough_for_other_users_files() {
    let _s = serial();
    let name = "the_units_capabilities_are_enough_for_other_users_files";
    let Some(fx) = fixture(name) else { return };
    if !have("setpriv") {
        return skip(name, "no setpriv (util-linux)");
    }
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dist/systemd/ubio-policy.service.in"
    ))
    .unwrap();
    let caps: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap()
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let set = format!("-all,{}", caps.join(","));
    let input = fx.path("in");
    write_input(&input, SIZE);
    std::os::unix::fs::chown(&input, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = fx.config("policy.toml", "", "");
    let bounding = format!("--bounding-set={set}");
    let inh = format!("--inh-caps={set}");
    let daemon = Daemon::start(&fx, &cfg, &["setpriv", &bounding, &inh, "--"]);
    let si = ResidencySampler::follow_all(vec![input.clone()], SAMPLE_EVERY);
    let out = fx.sh(
        &fx.inside,
        "setpriv --reuid=65534 --regid=65534 --clear-groups -- sha256sum in > /dev/null",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    daemon.wait_finished(std::slice::from_ref(&input));
    let peak = si.finish().unwrap();
    let left = cached(&input);
    let log = daemon.stop();
    eprintln!(
        "with {set}: input peak {:.1} MiB, left {left} B",
        mib(peak.max_cached)
    );
    assert_eq!(left, 0, "{log}");
    assert!(peak.max_cached * PAGE <= PEAK_LIMIT, "{peak:?}");
}

/// The reclaim counters of /proc/vmstat (those the status shows).
fn vmstat() -> std::collections::HashMap<String, u64> {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            let shown = ["pgscan_", "pgsteal_", "allocstall_", "compact_"];
            shown
                .iter()
                .any(|p| k.starts_with(p))
                .then(|| (k.to_string(), v.trim().parse().unwrap()))
        })
        .collect()
}

/// Trace instances a test's daemons made: removed if a failure left them.
struct Instances(Vec<PathBuf>);

impl Drop for Instances {
    fn drop(&mut self) {
        for d in &self.0 {
            if d.exists() {
                eprintln!("removing the trace instance {} a daemon left", d.display());
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

const TRACEFS: &str = ubio_testenv::tracefs::SYSTEM;

/// `ubio policy status` shows the machine's reclaim since the daemon
/// started: real deltas of /proc/vmstat (between the machine's own deltas
/// over a time inside and a time around the daemon's), and kswapd's wakes
/// by order from a trace instance of the daemon's own, which exists while
/// it runs and is gone after SIGTERM, after SIGINT, and, after a SIGKILL,
/// once the next daemon starts. No reclaim is forced: an order-9 kswapd
/// wake needs memory full and fragmented, which this shared machine must
/// not be put through in a test.
#[test]
fn status_shows_the_machines_reclaim_and_the_trace_instance_goes_with_the_daemon() {
    let _s = serial();
    let name = "status_shows_the_machines_reclaim_and_the_trace_instance_goes_with_the_daemon";
    let Some(fx) = fixture(name) else { return };
    // Where a machine has none mounted (no systemd), one for this test.
    let _mounted = ubio_testenv::tracefs::system()
        .map_err(|e| eprintln!("{name}: tracefs not mounted at {TRACEFS}: {e}"))
        .ok();
    let traced = Path::new(TRACEFS).join("instances").is_dir()
        && Path::new(TRACEFS)
            .join("events/vmscan/mm_vmscan_kswapd_wake")
            .is_dir();
    if !traced {
        skip(
            name,
            "no tracefs with vmscan:mm_vmscan_kswapd_wake: only the untraced case is checked",
        );
    }
    // The daemon makes one instance, its first (ubio_engine::tracefs names them PREFIX<pid>-<n>).
    let instance = |pid: u32| Path::new(TRACEFS).join(format!("instances/ubio-policy-{pid}-0"));
    let mut made = Instances(Vec::new());
    let cfg = fx.config("policy.toml", "", "");

    // The top level's switch of the event is not the daemon's to touch.
    let top = Path::new(TRACEFS).join("events/vmscan/mm_vmscan_kswapd_wake/enable");
    let top_before = std::fs::read_to_string(&top).ok();
    let around0 = vmstat();
    let daemon = Daemon::start(&fx, &cfg, &[]);
    made.0.push(instance(daemon.pid()));
    let inside0 = vmstat();
    std::thread::sleep(Duration::from_secs(2));
    let inside1 = vmstat();
    let first = daemon.status();
    let second = daemon.status();
    let around1 = vmstat();
    let m = &first["machine_reclaim"];
    let counters = m["counters"].as_object().unwrap();
    for key in [
        "pgscan_kswapd",
        "pgsteal_kswapd",
        "pgscan_direct",
        "pgsteal_direct",
        "allocstall_normal",
        "allocstall_movable",
        "compact_stall",
        "compact_fail",
        "compact_success",
    ] {
        let Some(&a0) = around0.get(key) else {
            assert!(
                !counters.contains_key(key),
                "{key}: this kernel has none: {m}"
            );
            continue;
        };
        let v = counters[key].as_u64().unwrap();
        let (lo, hi) = (inside1[key] - inside0[key], around1[key] - a0);
        assert!(
            lo <= v && v <= hi,
            "{key}: {v} is not a delta since the daemon started (the machine's: {lo} inside, {hi} around)"
        );
        let later = second["machine_reclaim"]["counters"][key].as_u64().unwrap();
        assert!(
            v <= later && later <= hi,
            "{key}: {v} then {later}, at most {hi}"
        );
    }
    assert!(m["since_s"].as_f64().unwrap() >= 2.0, "{m}");
    let dir = instance(daemon.pid());
    if traced {
        assert_eq!(m["trace_instance"], dir.to_str().unwrap(), "{m}");
        assert!(dir.is_dir());
        let enabled = dir.join("events/vmscan/mm_vmscan_kswapd_wake/enable");
        assert_eq!(std::fs::read_to_string(enabled).unwrap().trim(), "1");
        let wakes = m["kswapd_wakes"].as_object().unwrap();
        let all: u64 = wakes.values().map(|v| v.as_u64().unwrap()).sum();
        let high: u64 = wakes
            .iter()
            .filter(|(o, _)| o.parse::<u32>().unwrap() >= 4)
            .map(|(_, v)| v.as_u64().unwrap())
            .sum();
        assert_eq!(m["kswapd_wakes_high_order"].as_u64(), Some(high), "{m}");
        assert!(high <= all);
        assert!(m["why_untraced"].is_null(), "{m}");
    } else {
        let why = m["why_untraced"].as_str().unwrap();
        assert!(!why.is_empty() && !why.contains('\n'), "{why:?}");
        assert!(!dir.exists());
    }
    // The streams' own pages: a reader in scope holds a cold file open
    // after reading 4 MiB of it; what the status says it holds of its own
    // is in the cache (cachestat, just before and just after the status).
    let input = fx.path("in");
    write_input(&input, 64 * MIB);
    let mut holder = fx.holder(4 << 20);
    let t = Instant::now();
    loop {
        let before = cached(&input);
        let st = daemon.status();
        let after = cached(&input);
        let own = st["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| Path::new(f["path"].as_str().unwrap()) == input)
            .map(|f| f["own_cached_bytes"].as_u64().unwrap());
        if let Some(own) = own {
            assert!(
                own <= before.max(after),
                "own pages cached {own} B, the file {before}..{after} B"
            );
            if own > 0 {
                eprintln!("own pages cached {own} B of {before}..{after} B cached");
                break;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no own pages seen: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    daemon.wait_finished(std::slice::from_ref(&input));
    // The text form says the same.
    let out = Command::new(UBIO)
        .args(["policy", "status", "--socket"])
        .arg(fx.socket())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("machine reclaim since start ("), "{text}");
    assert!(text.contains("kswapd scanned "), "{text}");
    assert!(text.contains("kswapd wakes by order: "), "{text}");
    // A user who is not root gets the counters, not the trace.
    if have("setpriv") {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .args([UBIO, "policy", "status", "--json", "--socket"])
            .arg(fx.socket())
            .output()
            .unwrap();
        let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let m = &st["machine_reclaim"];
        assert!(
            m["counters"].as_object().is_some_and(|c| !c.is_empty()),
            "{m}"
        );
        assert!(
            m["kswapd_wakes"].is_null() && m["trace_instance"].is_null(),
            "{m}"
        );
    }
    let log = daemon.stop();
    assert!(log.contains("machine reclaim since start"), "{log}");
    assert!(!dir.exists(), "SIGTERM left {}", dir.display());
    assert_eq!(std::fs::read_to_string(&top).ok(), top_before);
    if !traced {
        return;
    }
    assert!(
        log.contains(&format!("counted in the trace instance {}", dir.display())),
        "{log}"
    );

    let daemon = Daemon::start(&fx, &cfg, &[]);
    let dir = instance(daemon.pid());
    made.0.push(dir.clone());
    assert!(dir.is_dir());
    daemon.stop_by(libc::SIGINT);
    assert!(!dir.exists(), "SIGINT left {}", dir.display());

    // SIGKILL leaves it; the next daemon removes it, and says so.
    let daemon = Daemon::start(&fx, &cfg, &[]);
    let killed = instance(daemon.pid());
    made.0.push(killed.clone());
    drop(daemon);
    assert!(killed.is_dir());
    let daemon = Daemon::start(&fx, &cfg, &[]);
    made.0.push(instance(daemon.pid()));
    assert!(!killed.exists(), "{}", daemon.log_text());
    let log = daemon.stop();
    assert!(
        log.contains(&format!(
            "removed the trace instance {} of a process that is gone",
            killed.display()
        )),
        "{log}"
    );

    // Where no instance can be made (here tracefs read only in a mount
    // namespace of the daemon's own, as the unit's ProtectKernelTunables
    // makes it), the status says why in one line and counts the rest.
    if have("unshare") {
        let ro = "mount -o remount,bind,ro /sys/kernel/tracing && exec \"$0\" \"$@\"";
        let daemon = Daemon::start(&fx, &cfg, &["unshare", "-m", "sh", "-c", ro]);
        made.0.push(instance(daemon.pid()));
        let m = &daemon.status()["machine_reclaim"];
        let why = m["why_untraced"].as_str().unwrap();
        assert!(
            why.starts_with("cannot make the trace instance")
                && why.contains("Read-only file system"),
            "{m}"
        );
        assert!(
            m["kswapd_wakes"].is_null() && m["trace_instance"].is_null(),
            "{m}"
        );
        assert!(m["counters"]
            .as_object()
            .is_some_and(|c| c.contains_key("pgsteal_kswapd")));
        let log = daemon.stop();
        assert!(
            log.contains("kswapd wakes by order: not counted: cannot make the trace instance"),
            "{log}"
        );
    } else {
        skip(
            name,
            "no unshare (util-linux): the read-only tracefs is not checked",
        );
    }
    for d in &made.0 {
        assert!(!d.exists(), "{} left", d.display());
    }
}
