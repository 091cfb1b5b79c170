//! Process death: `ubio cp` (one file and -r), `ubio cat`, the engine of
//! `ubio run` and a program under `ubio run` killed with SIGKILL at random
//! seeded moments. After every kill: the source is unchanged; a destination
//! is absent or a prefix of its source (never as long as the source, or
//! longer, with other bytes); a program whose engine died finishes with the
//! right output and exit status; a killed reader leaves at most the read
//! bound of the contract cached, a killed writer at most the write bound.
//! GNU cp is killed the same way beside `ubio cp`, as the reference.
//!
//! `UBIO_KILLS` kills per case (default 10: the reduced count CI runs;
//! scripts/integrity.sh runs 200+), `UBIO_KILL_SEED` the seed (default from
//! the clock; printed, so a failure can be replayed with it).
//!
//! Needs the workspace built (`ubio` and libubio_preload.so next to it).

mod common;

use common::engine::evict;
use common::{workdir, UBIO};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ubio_testenv::rng::SplitMix64;

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;
/// Not a multiple of any block: the direct backend's unaligned tail too.
const SIZE: usize = 48 * MIB as usize + 1234;
/// A killed reader's cache: the contract's read bound (the lagging drop
/// window, the drop batch and the kernel's readahead fit in it).
const READ_BOUND: u64 = 64 * MIB;
/// A killed writer's cache: the contract's write bound (2 windows + 1 MiB).
const WRITE_BOUND: u64 = 2 * ubio::DEFAULT_WINDOW + MIB;

/// One case at a time: each judges the page cache of its own files.
static SERIAL: Mutex<()> = Mutex::new(());

fn kills() -> usize {
    std::env::var("UBIO_KILLS")
        .ok()
        .map(|v| v.parse().expect("UBIO_KILLS: a number"))
        .unwrap_or(10)
}

fn seed(case: &str) -> u64 {
    let base = std::env::var("UBIO_KILL_SEED")
        .ok()
        .map(|v| v.parse().expect("UBIO_KILL_SEED: a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{case}: seed {base} (UBIO_KILL_SEED={base} replays it)");
    base ^ ubio_testenv::rng::mix(case.len() as u64)
}

fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0; len];
    SplitMix64::new(seed).fill(&mut out);
    out
}

fn write_file(path: &Path, bytes: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

/// The file's cached bytes once the I/O a killed process left in flight
/// has completed (two counts 20 ms apart agree).
fn cached_bytes(path: &Path) -> u64 {
    let mut last = common::count(path);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = common::count(path);
        if now == last {
            return now.cached * PAGE;
        }
        last = now;
    }
}

/// What a destination held after a kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Found {
    Absent,
    Empty,
    Prefix,
    Complete,
}

/// The destination is absent or a prefix of `src`; Err says how it is not.
fn judge_prefix(dst: &Path, src: &[u8]) -> Result<Found, String> {
    let got = match std::fs::read(dst) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Absent),
        Err(e) => return Err(format!("{}: {e}", dst.display())),
    };
    if got.len() > src.len() {
        return Err(format!(
            "{}: {} bytes, longer than its source ({})",
            dst.display(),
            got.len(),
            src.len()
        ));
    }
    if let Some(i) = got.iter().zip(src).position(|(a, b)| a != b) {
        return Err(format!(
            "{}: {} bytes, not a prefix of the source: byte {i} is {:#x}, the source's {:#x}",
            dst.display(),
            got.len(),
            got[i],
            src[i]
        ));
    }
    Ok(match got.len() {
        0 => Found::Empty,
        n if n == src.len() => Found::Complete,
        _ => Found::Prefix,
    })
}

fn assert_unchanged(path: &Path, want: &[u8]) {
    let got = std::fs::read(path).unwrap();
    assert!(
        got == want,
        "{}: the source changed ({} bytes, {} before)",
        path.display(),
        got.len(),
        want.len()
    );
}

/// How long `run` takes unkilled (the slowest of 3), so that kills spread
/// over a whole run.
fn span(mut run: impl FnMut() -> Child) -> Duration {
    let mut worst = Duration::ZERO;
    for _ in 0..3 {
        let t = Instant::now();
        let st = run().wait_with_output().unwrap();
        assert!(st.status.success(), "{}", common::stderr(&st));
        worst = worst.max(t.elapsed());
    }
    worst
}

/// SIGKILL `child` after `delay` (or when it is done, if sooner); returns
/// whether it was still running when killed.
fn kill_after(child: &mut Child, delay: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200).min(delay.saturating_sub(t.elapsed())));
    }
    let killed = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    child.wait().unwrap();
    killed
}

fn quiet(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Kill counts by what the destination held, for the log.
fn tally(t: &BTreeMap<(String, Found), usize>) -> String {
    t.iter()
        .map(|((who, f), n)| format!("{who} {f:?} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ubio cp SRC DST` with each backend (and GNU cp beside it) killed at
/// random moments: the destination is absent or a prefix of the source.
#[test]
fn killed_cp_leaves_a_prefix() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut rng = SplitMix64::new(seed("killed_cp_leaves_a_prefix"));
    let dir = workdir();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    let data = content(SIZE, rng.next_u64());
    write_file(&src, &data);
    let mut copiers: Vec<(String, Vec<String>)> = ["auto", "emulated", "direct", "buffered"]
        .iter()
        .map(|b| {
            (
                format!("ubio cp --backend {b}"),
                vec!["--backend".into(), b.to_string()],
            )
        })
        .collect();
    if ubio::probe_path(dir.path()).unwrap().fs.dontcache.available {
        copiers.push((
            "ubio cp --backend kernel".into(),
            vec!["--backend".into(), "kernel".into()],
        ));
    }
    copiers.push(("cp".into(), Vec::new()));
    let start = |who: &(String, Vec<String>)| {
        let mut c = match who.0.as_str() {
            "cp" => Command::new("cp"),
            _ => {
                let mut c = Command::new(UBIO);
                c.arg("cp").args(&who.1);
                c
            }
        };
        c.arg(&src).arg(&dst);
        quiet(&mut c)
    };
    let spans: Vec<Duration> = copiers
        .iter()
        .map(|who| {
            span(|| {
                let _ = std::fs::remove_file(&dst);
                evict(&src);
                start(who)
            })
        })
        .collect();
    let mut seen = BTreeMap::new();
    let mut killed = 0;
    for i in 0..kills() * copiers.len() {
        let k = i % copiers.len();
        let _ = std::fs::remove_file(&dst);
        evict(&src);
        let delay = spans[k].mul_f64(rng.unit() * 1.1);
        let mut child = start(&copiers[k]);
        killed += kill_after(&mut child, delay) as usize;
        let found = judge_prefix(&dst, &data)
            .unwrap_or_else(|e| panic!("{} killed after {delay:?} (kill {i}): {e}", copiers[k].0));
        *seen.entry((copiers[k].0.clone(), found)).or_insert(0) += 1;
        assert_unchanged(&src, &data);
    }
    eprintln!(
        "killed_cp_leaves_a_prefix: {killed} of {} runs killed while running ({} per copier); {}",
        kills() * copiers.len(),
        kills(),
        tally(&seen)
    );
}

/// A tree of files of many sizes (empty, small, a few MiB, one of 16 MiB)
/// in subdirectories.
fn make_tree(root: &Path, rng: &mut SplitMix64) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for i in 0..60u64 {
        let sub = PathBuf::from(format!("d{}/e{}", i % 5, i % 3));
        std::fs::create_dir_all(root.join(&sub)).unwrap();
        let len = match i % 6 {
            0 => 0,
            1 => rng.below(4096) as usize,
            2 => rng.below(200_000) as usize,
            3 => (rng.below(4) + 1) as usize * MIB as usize + rng.below(5000) as usize,
            _ => rng.below(1 << 20) as usize,
        };
        let len = if i == 7 { 16 * MIB as usize + 77 } else { len };
        let rel = sub.join(format!("f{i}"));
        let bytes = content(len, rng.next_u64());
        write_file(&root.join(&rel), &bytes);
        files.insert(rel, bytes);
    }
    files
}

/// `ubio cp -r` (and `cp -r` beside it) killed at random moments: every
/// file copied so far is a prefix of its source, no file appears that the
/// source has not, the source tree is unchanged.
#[test]
fn killed_cp_r_leaves_prefixes() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut rng = SplitMix64::new(seed("killed_cp_r_leaves_prefixes"));
    let dir = workdir();
    let src = dir.path().join("tree");
    let dst = dir.path().join("copy");
    let files = make_tree(&src, &mut rng);
    let copiers = ["ubio cp -r", "cp -r"];
    let start = |who: &str| {
        let mut c = match who {
            "cp -r" => Command::new("cp"),
            _ => {
                let mut c = Command::new(UBIO);
                c.arg("cp");
                c
            }
        };
        c.arg("-r").arg(&src).arg(&dst);
        quiet(&mut c)
    };
    let reset = || {
        let _ = std::fs::remove_dir_all(&dst);
    };
    let spans: Vec<Duration> = copiers
        .iter()
        .map(|who| {
            span(|| {
                reset();
                start(who)
            })
        })
        .collect();
    let mut seen = BTreeMap::new();
    for i in 0..kills() * copiers.len() {
        let k = i % copiers.len();
        reset();
        let delay = spans[k].mul_f64(rng.unit() * 1.1);
        let mut child = start(copiers[k]);
        kill_after(&mut child, delay);
        let mut complete = 0;
        let mut present = 0;
        for entry in walk(&dst) {
            let rel = entry.strip_prefix(&dst).unwrap();
            if entry.is_dir() {
                assert!(
                    src.join(rel).is_dir(),
                    "{} killed after {delay:?}: {} is not in the source",
                    copiers[k],
                    entry.display()
                );
                continue;
            }
            let want = files.get(rel).unwrap_or_else(|| {
                panic!(
                    "{} killed after {delay:?}: {} is not in the source",
                    copiers[k],
                    entry.display()
                )
            });
            present += 1;
            match judge_prefix(&entry, want) {
                Ok(Found::Complete) => complete += 1,
                Ok(_) => {}
                Err(e) => panic!("{} killed after {delay:?} (kill {i}): {e}", copiers[k]),
            }
        }
        let bucket = match (present, complete) {
            (0, _) => "none",
            (p, c) if c == files.len() && p == c => "all complete",
            _ => "some",
        };
        *seen.entry((copiers[k].to_string(), bucket)).or_insert(0) += 1;
    }
    for (rel, bytes) in &files {
        assert_unchanged(&src.join(rel), bytes);
    }
    eprintln!(
        "killed_cp_r_leaves_prefixes: {} kills per copier; files present: {:?}",
        kills(),
        seen
    );
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push(p.clone());
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `ubio cat` (the library's reader) and `ubio run -- cat` killed while
/// reading a cold file: at most the contract's read bound stays cached.
/// `ubio cp` killed while writing: the destination's cache within the
/// write bound (what was dirty is written back by the kernel later; it
/// stays cached, clean, as it would after any writer's death).
#[test]
fn killed_streams_leave_at_most_their_window_cached() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut rng = SplitMix64::new(seed("killed_streams_leave_at_most_their_window_cached"));
    let dir = workdir();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    let data = content(4 * SIZE, rng.next_u64());
    write_file(&src, &data);
    drop(data);
    let readers = ["ubio cat", "cat under ubio run"];
    let devnull = || File::options().write(true).open("/dev/null").unwrap();
    // `ubio cat` is killed itself; under `ubio run`, the program is (a
    // killed `ubio run` leaves its program running: the next test).
    let start = |k: usize| -> (Child, Option<i32>) {
        match k {
            0 => (quiet(Command::new(UBIO).arg("cat").arg(&src)), None),
            _ => {
                let (c, pid) = run_program(dir.path(), "cat src", devnull());
                (c, Some(pid))
            }
        }
    };
    let spans: Vec<Duration> = (0..readers.len())
        .map(|k| {
            span(|| {
                evict(&src);
                start(k).0
            })
        })
        .collect();
    let mut worst_read = BTreeMap::new();
    for i in 0..kills() * readers.len() {
        let k = i % readers.len();
        evict(&src);
        let delay = spans[k].mul_f64(rng.unit());
        let (mut child, program) = start(k);
        let killed = match program {
            None => kill_after(&mut child, delay),
            Some(pid) => {
                std::thread::sleep(delay);
                let killed = ubio::sys::kill(pid as u32, libc::SIGKILL).is_ok();
                child.wait().unwrap();
                killed
            }
        };
        let left = cached_bytes(&src);
        assert!(
            left <= READ_BOUND,
            "{} killed after {delay:?} (kill {i}, {}): {} MiB of the source cached: {:?}",
            readers[k],
            if killed {
                "while running"
            } else {
                "after it ended"
            },
            left / MIB,
            common::count(&src)
        );
        let w = worst_read.entry(readers[k]).or_insert(0);
        *w = left.max(*w);
    }
    // The writer: ubio cp of the (cold) source; its destination's pages.
    let copy = || quiet(Command::new(UBIO).arg("cp").arg(&src).arg(&dst));
    let cp_span = span(|| {
        let _ = std::fs::remove_file(&dst);
        evict(&src);
        copy()
    });
    let mut worst_write = 0;
    for _ in 0..kills() {
        let _ = std::fs::remove_file(&dst);
        evict(&src);
        let delay = cp_span.mul_f64(rng.unit());
        let mut child = copy();
        kill_after(&mut child, delay);
        if !dst.exists() {
            continue;
        }
        let left = cached_bytes(&dst);
        assert!(
            left <= WRITE_BOUND,
            "ubio cp killed after {delay:?}: {} MiB of the destination cached ({:?})",
            left / MIB,
            common::count(&dst)
        );
        worst_write = worst_write.max(left);
    }
    eprintln!(
        "killed streams: {} kills each; most left cached: {}; ubio cp's destination {:.1} MiB (bounds: {} and {} MiB)",
        kills(),
        worst_read
            .iter()
            .map(|(who, b)| format!("{who} {:.1} MiB", *b as f64 / MIB as f64))
            .collect::<Vec<_>>()
            .join(", "),
        worst_write as f64 / MIB as f64,
        READ_BOUND / MIB,
        WRITE_BOUND / MIB
    );
}

/// Become a subreaper: a program whose `ubio run` is killed is then
/// reparented to this process, which can wait for it and see its status.
fn become_subreaper() {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes plain integers.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(r, 0, "prctl: {}", std::io::Error::last_os_error());
}

/// Wait for `pid` (a child of this process) and return its wait status;
/// None if it is not (any more) a child of this process.
fn wait_pid(pid: i32) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid with a valid pointer to an int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return None,
            _ => panic!("waitpid {pid}: {e}"),
        }
    }
}

/// Start `ubio run -- sh -c 'echo $$ > PIDFILE; exec PROGRAM...'` and wait
/// until the program has started: returns ubio's child and the program's pid.
fn run_program(dir: &Path, program: &str, stdout: File) -> (Child, i32) {
    let pidfile = dir.join("pid");
    let _ = std::fs::remove_file(&pidfile);
    let mut child = Command::new(UBIO)
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {}.tmp && mv {0}.tmp {0} && exec {program}",
            pidfile.display()
        ))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pid = loop {
        if let Ok(s) = std::fs::read_to_string(&pidfile) {
            break Some(s.trim().parse().unwrap());
        }
        if t.elapsed() >= Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let Some(pid) = pid else {
        // Not left running, nor a zombie, by the failed test.
        let _ = child.kill();
        let _ = child.wait();
        panic!("{program}: never started");
    };
    (child, pid)
}

/// The engine (`ubio run` itself) killed while its program reads (stdio:
/// sha256sum) or writes (stdio: base64 > file): the program goes on and
/// ends as it would have, with the same output.
#[test]
fn a_program_outlives_its_killed_engine() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    become_subreaper();
    let mut rng = SplitMix64::new(seed("a_program_outlives_its_killed_engine"));
    let dir = workdir();
    let src = dir.path().join("src");
    let data = content(SIZE, rng.next_u64());
    write_file(&src, &data);
    let expect = |program: &str| {
        let out = Command::new("sh")
            .args(["-c", program])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        out.stdout
    };
    let programs = ["sha256sum src", "base64 src"];
    let wants: Vec<Vec<u8>> = programs.iter().map(|p| expect(p)).collect();
    let out_path = dir.path().join("out");
    let spans: Vec<Duration> = programs
        .iter()
        .map(|p| {
            let mut worst = Duration::ZERO;
            for _ in 0..3 {
                evict(&src);
                let t = Instant::now();
                let (child, _) = run_program(dir.path(), p, File::create(&out_path).unwrap());
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success(), "{p}: {}", common::stderr(&out));
                worst = worst.max(t.elapsed());
            }
            worst
        })
        .collect();
    let mut engine_killed = 0;
    for i in 0..kills() * programs.len() {
        let k = i % programs.len();
        evict(&src);
        let (mut child, pid) =
            run_program(dir.path(), programs[k], File::create(&out_path).unwrap());
        let delay = spans[k].mul_f64(rng.unit());
        if kill_after(&mut child, delay) {
            engine_killed += 1;
            // Reparented here (or reaped by ubio just before it died).
            if let Some(status) = wait_pid(pid) {
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "{} (kill {i}, engine killed after {delay:?}): the program ended with wait status {status:#x}",
                    programs[k]
                );
            }
        } else {
            let st = child.wait().unwrap();
            assert!(st.success(), "{}: ubio run ended with {st:?}", programs[k]);
        }
        let got = std::fs::read(&out_path).unwrap();
        assert!(
            got == wants[k],
            "{} (kill {i}, engine killed after {delay:?}): output differs ({} bytes, {} expected)",
            programs[k],
            got.len(),
            wants[k].len()
        );
        assert_unchanged(&src, &data);
    }
    eprintln!(
        "a_program_outlives_its_killed_engine: {} runs, the engine killed while its program ran in {engine_killed}",
        kills() * programs.len()
    );
}

/// A program under `ubio run` (cp, in the shim) killed while it copies:
/// the destination is a prefix, `ubio run` dies of the same signal, and
/// the engine's cleanup leaves neither file's pages beyond the bounds.
#[test]
fn a_killed_program_under_ubio_run_leaves_a_prefix() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut rng = SplitMix64::new(seed("a_killed_program_under_ubio_run_leaves_a_prefix"));
    let dir = workdir();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    let data = content(SIZE, rng.next_u64());
    write_file(&src, &data);
    let program = "cp src dst";
    let mut worst = Duration::ZERO;
    for _ in 0..3 {
        let _ = std::fs::remove_file(&dst);
        evict(&src);
        let t = Instant::now();
        let (child, _) = run_program(
            dir.path(),
            program,
            File::create(dir.path().join("out")).unwrap(),
        );
        assert!(child.wait_with_output().unwrap().status.success());
        worst = worst.max(t.elapsed());
    }
    let mut seen = BTreeMap::new();
    let (mut worst_src, mut worst_dst) = (0, 0);
    for i in 0..kills() {
        let _ = std::fs::remove_file(&dst);
        evict(&src);
        let (child, pid) = run_program(
            dir.path(),
            program,
            File::create(dir.path().join("out")).unwrap(),
        );
        let delay = worst.mul_f64(rng.unit());
        std::thread::sleep(delay);
        let _ = ubio::sys::kill(pid as u32, libc::SIGKILL);
        let out = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        // The caches first: judging the copy reads it.
        let s = cached_bytes(&src);
        let d = if dst.exists() { cached_bytes(&dst) } else { 0 };
        let found = judge_prefix(&dst, &data)
            .unwrap_or_else(|e| panic!("cp killed after {delay:?} (kill {i}): {e}"));
        if found != Found::Complete {
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGKILL),
                "ubio run after its program was killed: {:?}",
                out.status
            );
        }
        *seen.entry(found).or_insert(0) += 1;
        assert!(
            s <= READ_BOUND,
            "cp killed after {delay:?}: {} MiB of the source cached",
            s / MIB
        );
        assert!(
            d <= WRITE_BOUND,
            "cp killed after {delay:?}: {} MiB of the copy ({found:?}) cached after ubio run ended with {:?}: {}",
            d / MIB,
            out.status,
            common::stderr(&out)
        );
        worst_src = worst_src.max(s);
        worst_dst = worst_dst.max(d);
        assert_unchanged(&src, &data);
    }
    eprintln!(
        "a_killed_program_under_ubio_run_leaves_a_prefix: {} kills: {seen:?}; most cached after: source {:.1} MiB, copy {:.1} MiB",
        kills(),
        worst_src as f64 / MIB as f64,
        worst_dst as f64 / MIB as f64
    );
}
