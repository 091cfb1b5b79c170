//! Global memory pressure: a balloon of locked anonymous memory that brings
//! the whole machine's available memory down for a benchmark, so that the
//! page cache fills what remains and kswapd reclaims, as on the seeds'
//! machines (a memory cgroup's limit makes the reading task reclaim
//! instead, and kswapd stays idle).
//!
//! Safety on a shared machine:
//! - [`plan`] refuses settings that cannot be safe: a floor below
//!   [`MIN_FLOOR`] (or 2% of RAM), leaving less than the floor, not enough
//!   memory to take ([`presses`] says whether a dataset is several times
//!   what remains, for a benchmark whose pressure would else be vacuous);
//! - the memory is held by a child process ([`hold`]), never by the
//!   benchmark itself: that child is killed by the kernel when its parent
//!   thread dies (PR_SET_PDEATHSIG, [`crate::cleanup::die_with_parent`]),
//!   whatever kills the parent (SIGKILL included); the parent kills it on
//!   drop (normal end, error, panic) and on SIGINT/SIGTERM/SIGHUP (through
//!   [`crate::cleanup`]); and it exits by itself when its stdin closes;
//! - while inflating and while held, the child watches MemAvailable: it
//!   refuses to inflate past the floor, and if others' needs push
//!   MemAvailable below the floor later, it gives memory back, chunk by
//!   chunk, and says so ("shrunk ...", kept by [`Balloon::events`]);
//! - its oom_score_adj is 1000: if memory runs out anyway, the OOM killer
//!   takes the balloon before anything else.
//!
//! The child speaks in lines on stdout: `ready BYTES` once inflated,
//! `shrunk BYTES AVAILABLE FLOOR` when it gave memory back (BYTES now
//! held), `error MESSAGE` when it cannot inflate.

use crate::cleanup::{self, CleanupGuard};
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use ubio::procfs::meminfo;

const MIB: u64 = 1 << 20;
/// The lowest floor accepted, whatever the machine.
pub const MIN_FLOOR: u64 = 256 * MIB;
/// The balloon is taken and given back in chunks of this size.
pub const CHUNK: u64 = 64 * MIB;
/// The dataset must be at least this many times what the balloon leaves.
pub const MIN_DATASET_RATIO: u64 = 2;
/// How often the holder checks MemAvailable against the floor.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// What a balloon will take and leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Locked in the holder.
    pub balloon_bytes: u64,
    /// MemAvailable meant to remain for the run (and everyone else).
    pub leave_bytes: u64,
    /// MemAvailable the balloon never takes the machine below.
    pub floor_bytes: u64,
    /// MemAvailable when planned.
    pub available_bytes: u64,
}

/// The lowest floor accepted on a machine with `total` bytes of RAM.
pub fn min_floor(total: u64) -> u64 {
    MIN_FLOOR.max(total / 50)
}

/// Sizes a balloon that leaves `leave` bytes of MemAvailable out of
/// `available` (now), never going below `floor`. Err says why it cannot
/// be safe.
pub fn plan(available: u64, total: u64, leave: u64, floor: u64) -> Result<Plan, String> {
    let mib = |b: u64| b >> 20;
    if floor < min_floor(total) {
        return Err(format!(
            "a floor of {} MiB is unsafe: at least {} MiB must stay available on this machine ({} MiB of RAM)",
            mib(floor),
            mib(min_floor(total)),
            mib(total)
        ));
    }
    if leave < floor {
        return Err(format!(
            "leaving {} MiB would go below the floor of {} MiB: leave more, or lower the floor",
            mib(leave),
            mib(floor)
        ));
    }
    let balloon = available.saturating_sub(leave) / CHUNK * CHUNK;
    if balloon == 0 {
        return Err(format!(
            "not enough memory: {} MiB are available, and the run should leave {} MiB",
            mib(available),
            mib(leave)
        ));
    }
    Ok(Plan {
        balloon_bytes: balloon,
        leave_bytes: leave,
        floor_bytes: floor,
        available_bytes: available,
    })
}

/// Ok when a run over `dataset` bytes is pressed by what the balloon
/// leaves (at least [`MIN_DATASET_RATIO`] times it); else why the
/// pressure would be vacuous. A benchmark of one point asks this; a
/// matrix measures datasets that fit on purpose (the left of the wall).
pub fn presses(dataset: u64, leave: u64) -> Result<(), String> {
    if dataset < MIN_DATASET_RATIO * leave {
        return Err(format!(
            "the dataset ({} MiB) is not several times the {} MiB the balloon leaves: the page cache \
             would hold most of it and there would be no pressure to see; use a dataset at least \
             {MIN_DATASET_RATIO}x what is left",
            dataset >> 20,
            leave >> 20
        ));
    }
    Ok(())
}

/// [`plan`] against the machine's /proc/meminfo now.
pub fn plan_here(leave: u64, floor: u64) -> io::Result<Plan> {
    let mem = meminfo()?;
    let get = |k: &str| mem.get(k).copied().unwrap_or(0);
    plan(get("MemAvailable"), get("MemTotal"), leave, floor)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("global pressure: {e}")))
}

fn mem_available() -> io::Result<u64> {
    meminfo()?
        .get("MemAvailable")
        .copied()
        .ok_or_else(|| io::Error::other("/proc/meminfo has no MemAvailable"))
}

/// The arguments [`holder_main`] takes: BYTES FLOOR.
pub fn holder_args(bytes: u64, floor: u64) -> [OsString; 2] {
    [bytes.to_string().into(), floor.to_string().into()]
}

/// The holder's program: `args` as [`holder_args`] makes them. Holds the
/// balloon until stdin closes (or it is killed); returns the exit code.
pub fn holder_main(args: &[OsString]) -> i32 {
    let parsed: Option<Vec<u64>> = args
        .iter()
        .map(|a| a.to_str().and_then(|s| s.parse().ok()))
        .collect();
    let Some(&[bytes, floor]) = parsed.as_deref() else {
        let _ = writeln!(
            io::stdout(),
            "error balloon: expected BYTES FLOOR, got {args:?}"
        );
        return 2;
    };
    match hold(bytes, floor) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(io::stdout(), "error {e}");
            1
        }
    }
}

/// The holder: locks `bytes` of anonymous memory in [`CHUNK`]s, never
/// taking MemAvailable below `floor`, says `ready`, then holds it until
/// stdin closes, giving chunks back whenever MemAvailable falls below the
/// floor.
pub fn hold(bytes: u64, floor: u64) -> io::Result<()> {
    // Best effort: the OOM killer's first choice, should memory run out.
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    let mut chunks: Vec<memmap2::MmapMut> = Vec::new();
    let mut held = 0u64;
    while held < bytes {
        let len = CHUNK.min(bytes - held);
        let available = mem_available()?;
        if available < floor + len {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "balloon: stopped at {} of {} MiB: MemAvailable ({} MiB) would fall below the floor ({} MiB); \
                     the machine has less to spare than planned",
                    held >> 20,
                    bytes >> 20,
                    available >> 20,
                    floor >> 20
                ),
            ));
        }
        let map = memmap2::MmapOptions::new()
            .len(len as usize)
            .map_anon()
            .map_err(|e| {
                io::Error::new(e.kind(), format!("balloon: mmap {} MiB: {e}", len >> 20))
            })?;
        // Whole huge pages where the kernel gives them: fewer faults.
        let _ = map.advise(memmap2::Advice::HugePage);
        // mlock faults every page in and keeps it from being swapped.
        map.lock().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "balloon: mlock {} MiB: {e} (locking memory needs root or CAP_IPC_LOCK, or a large \
                     enough RLIMIT_MEMLOCK)",
                    len >> 20
                ),
            )
        })?;
        chunks.push(map);
        held += len;
    }
    let mut out = io::stdout().lock();
    writeln!(out, "ready {held}")?;
    out.flush()?;
    let stdin_closed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stdin_closed);
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        flag.store(true, Ordering::SeqCst);
    });
    while !stdin_closed.load(Ordering::SeqCst) {
        std::thread::sleep(WATCH_EVERY);
        let available = mem_available()?;
        if available < floor && !chunks.is_empty() {
            let mut freed = 0;
            while freed < floor - available {
                let Some(c) = chunks.pop() else { break };
                freed += c.len() as u64;
                held -= c.len() as u64;
            }
            // A closed pipe just means the parent stopped listening.
            let _ = writeln!(out, "shrunk {held} {available} {floor}");
            let _ = out.flush();
        }
    }
    Ok(())
}

/// A balloon held by a child process; dropping it (or a termination
/// signal) kills the child, which gives the memory back.
///
/// Inflate it from the thread that lives as long as it should: the child
/// dies with that thread (PR_SET_PDEATHSIG).
pub struct Balloon {
    pid: u32,
    bytes: u64,
    events: Arc<Mutex<Vec<String>>>,
    _guard: CleanupGuard,
}

impl std::fmt::Debug for Balloon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balloon")
            .field("pid", &self.pid)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Balloon {
    /// Starts `holder` (a program that runs [`holder_main`] on the
    /// arguments appended here) to lock `bytes`, never below `floor`, and
    /// waits until it holds them. The holder's refusal comes back as the
    /// error.
    pub fn inflate(mut holder: Command, bytes: u64, floor: u64) -> io::Result<Balloon> {
        holder
            .args(holder_args(bytes, floor))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        cleanup::die_with_parent(&mut holder);
        let mut child = holder.spawn().map_err(|e| {
            crate::context(
                e,
                format_args!("start the balloon holder {:?}", holder.get_program()),
            )
        })?;
        let pid = child.id();
        let stdout = child.stdout.take().expect("stdout is piped");
        let child = Arc::new(Mutex::new(Some(child)));
        let killer = Arc::clone(&child);
        let guard = cleanup::register(format!("deflate the balloon (pid {pid})"), move || {
            if let Some(mut c) = killer.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        });
        let (tx, rx) = mpsc::channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&events);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("shrunk ") {
                    kept.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(line.clone());
                }
                if tx.send(line).is_err() {
                    // Nobody waits for ready any more: keep collecting events.
                    continue;
                }
            }
        });
        // Faulting in fresh memory is slow on a VM (seconds per GiB).
        let deadline = Instant::now() + Duration::from_secs(60 + 10 * (bytes >> 30));
        let failed = |msg: String| Err(io::Error::other(msg));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.starts_with("ready ") => break,
                Ok(line) if line.starts_with("error ") => {
                    drop(guard);
                    return failed(line["error ".len()..].to_owned());
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    drop(guard);
                    return failed(format!(
                        "the balloon holder (pid {pid}) exited before holding {} MiB",
                        bytes >> 20
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {
                    drop(guard);
                    return failed(format!(
                        "the balloon holder (pid {pid}) did not lock {} MiB within {:?}",
                        bytes >> 20,
                        deadline.saturating_duration_since(Instant::now())
                    ));
                }
            }
        }
        Ok(Balloon {
            pid,
            bytes,
            events,
            _guard: guard,
        })
    }

    /// The holder's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Bytes it was inflated to.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What it holds now (VmLck of the holder; 0 once it is gone).
    pub fn held_bytes(&self) -> u64 {
        locked_bytes(self.pid).unwrap_or(0)
    }

    /// The holder's `shrunk` lines so far: memory it gave back to keep the floor.
    pub fn events(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// VmLck of a live process, None when it is gone (or a zombie, whose
/// memory is already freed).
pub fn locked_bytes(pid: u32) -> Option<u64> {
    ubio::procfs::pid_status(pid).ok()?.locked
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn plans_what_remains() {
        let p = plan(20 * GIB, 24 * GIB, GIB + 100 * MIB, GIB).unwrap();
        assert_eq!(p.balloon_bytes % CHUNK, 0);
        assert!(p.balloon_bytes <= 20 * GIB - (GIB + 100 * MIB));
        assert!(p.balloon_bytes > 20 * GIB - (GIB + 100 * MIB) - CHUNK);
    }

    #[test]
    fn refuses_unsafe_settings() {
        let refused = |r: Result<Plan, String>, word: &str| {
            let e = r.unwrap_err();
            assert!(e.contains(word), "{e}");
        };
        // A floor too low for the machine (2% of 24 GiB is 491 MiB).
        refused(plan(20 * GIB, 24 * GIB, GIB, 300 * MIB), "unsafe");
        refused(plan(20 * GIB, 24 * GIB, GIB, 100 * MIB), "unsafe");
        // Leaving less than the floor.
        refused(plan(20 * GIB, 24 * GIB, GIB, 2 * GIB), "below the floor");
        // Not enough memory to take any.
        refused(plan(GIB, 24 * GIB, GIB, GIB), "not enough memory");
        // A dataset that the remaining memory would nearly hold.
        let vacuous = presses(GIB, GIB).unwrap_err();
        assert!(vacuous.contains("not several times"), "{vacuous}");
        assert_eq!(presses(2 * GIB, GIB), Ok(()));
    }
}

/// The balloon's lifetime on every exit path, with real holder processes
/// (the test binary itself, re-run with an environment variable).
#[cfg(test)]
mod process_tests {
    use super::*;
    use std::process::{Child, Command};

    /// Runs the holder (set: this binary is a holder, its args after `--`).
    const HOLDER: &str = "UBIO_TESTENV_BALLOON_HOLDER";
    /// Set: this binary is a parent that inflates a balloon and then waits.
    const PARENT: &str = "UBIO_TESTENV_BALLOON_PARENT";
    const BYTES: u64 = 64 * MIB;
    const GIB: u64 = 1 << 30;

    /// This test binary as a holder: the test `holder_process` runs
    /// [`holder_main`] on the arguments that follow the test's name.
    fn holder() -> Command {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "balloon::process_tests::holder_process",
            "--nocapture",
            "--test-threads=1",
            "--",
        ])
        .env(HOLDER, "1");
        cmd
    }

    /// Not a test of its own: the holder's body when re-run.
    #[test]
    fn holder_process() {
        if std::env::var_os(HOLDER).is_none() {
            return;
        }
        // The args after `--` are ours (libtest ignores what follows it as filters).
        let args: Vec<OsString> = std::env::args_os()
            .skip_while(|a| a != "--")
            .skip(1)
            .collect();
        // libtest's "test NAME ... " is still on the line: end it first.
        println!();
        std::process::exit(holder_main(&args));
    }

    fn mlocked() -> u64 {
        meminfo().unwrap()["Mlocked"]
    }

    /// A floor that leaves room: the balloon itself and a margin below what is available.
    fn floor() -> u64 {
        MIN_FLOOR.min(mem_available().unwrap() / 2)
    }

    /// Mlocked is the machine's: the tests that inflate run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn can_run(name: &str) -> bool {
        if !crate::is_root() {
            crate::skip(name, "locking memory needs root");
            return false;
        }
        if mem_available().unwrap() < 4 * BYTES + MIN_FLOOR {
            crate::skip(name, "less than 512 MiB available");
            return false;
        }
        true
    }

    /// Waits (up to a minute: this is liveness, not timing) until `pid`
    /// holds no memory.
    fn gone(pid: u32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if locked_bytes(pid).is_none() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn drop_gives_the_memory_back() {
        if !can_run("drop_gives_the_memory_back") {
            return;
        }
        let _serial = serial();
        let before = mlocked();
        let b = Balloon::inflate(holder(), BYTES, floor()).unwrap();
        assert_eq!(b.held_bytes(), BYTES, "{b:?}");
        let during = mlocked();
        assert!(
            during >= before + BYTES / 10 * 9,
            "Mlocked {before} -> {during}"
        );
        let pid = b.pid();
        drop(b);
        assert_eq!(locked_bytes(pid), None, "the holder is gone once dropped");
        let after = mlocked();
        assert!(
            during >= after + BYTES / 10 * 9,
            "Mlocked {during} -> {after}"
        );
    }

    #[test]
    fn a_panic_gives_the_memory_back() {
        if !can_run("a_panic_gives_the_memory_back") {
            return;
        }
        let _serial = serial();
        let pid = Arc::new(Mutex::new(0));
        let seen = Arc::clone(&pid);
        let result = std::panic::catch_unwind(move || {
            let b = Balloon::inflate(holder(), BYTES, floor()).unwrap();
            *seen.lock().unwrap() = b.pid();
            assert_eq!(b.held_bytes(), BYTES);
            panic!("a benchmark failing while the balloon is up (expected in this test)");
        });
        assert!(result.is_err());
        let pid = *pid.lock().unwrap();
        assert!(pid != 0);
        assert_eq!(locked_bytes(pid), None, "unwinding dropped the balloon");
    }

    #[test]
    fn refuses_to_go_below_the_floor() {
        if !can_run("refuses_to_go_below_the_floor") {
            return;
        }
        let _serial = serial();
        // A floor above what is available: not one chunk may be taken.
        let floor = mem_available().unwrap() + GIB;
        let e = Balloon::inflate(holder(), BYTES, floor).unwrap_err();
        assert!(e.to_string().contains("below the floor"), "{e}");
    }

    /// Others' needs (a second balloon here) push MemAvailable below the
    /// first balloon's floor: it gives its memory back and says so.
    #[test]
    fn gives_memory_back_to_keep_the_floor() {
        if !can_run("gives_memory_back_to_keep_the_floor") {
            return;
        }
        let _serial = serial();
        let available = mem_available().unwrap();
        // After `first`, 3 chunks stay above its floor; `second` takes 8, so
        // MemAvailable drops 5 chunks below that floor: a margin for what
        // other tests' page cache adds to or takes from MemAvailable meanwhile.
        let first = Balloon::inflate(holder(), BYTES, available - BYTES - 3 * CHUNK).unwrap();
        let second = Balloon::inflate(holder(), 8 * CHUNK, floor()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while first.events().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let events = first.events();
        assert!(
            events.first().is_some_and(|e| e.starts_with("shrunk 0 ")),
            "the first balloon did not give its memory back within 60 s: events {events:?}, \
             MemAvailable {:?} (floor {})",
            mem_available(),
            available - BYTES - 3 * CHUNK
        );
        assert_eq!(first.held_bytes(), 0);
        assert_eq!(second.held_bytes(), 8 * CHUNK);
    }

    /// The parent side for the kill tests: inflates, prints the holder's
    /// pid, and waits to be killed.
    #[test]
    fn parent_process() {
        if std::env::var_os(PARENT).is_none() {
            return;
        }
        let b = Balloon::inflate(holder(), BYTES, floor()).unwrap();
        println!("\nholder {}", b.pid());
        io::stdout().flush().unwrap();
        loop {
            std::thread::park();
        }
    }

    /// Starts a parent that holds a balloon; returns it and its holder's pid.
    fn parent() -> (Child, u32) {
        let mut p = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "balloon::process_tests::parent_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(PARENT, "1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(p.stdout.take().unwrap());
        let pid = out
            .lines()
            .map_while(Result::ok)
            // libtest's "test NAME ... " may start the line.
            .find_map(|l| {
                l.split("holder ")
                    .nth(1)
                    .map(|p| p.trim().parse::<u32>().unwrap())
            })
            .expect("the parent reports its holder");
        assert_eq!(locked_bytes(pid), Some(BYTES));
        (p, pid)
    }

    #[test]
    fn killing_the_parent_gives_the_memory_back() {
        if !can_run("killing_the_parent_gives_the_memory_back") {
            return;
        }
        let _serial = serial();
        let (mut p, pid) = parent();
        p.kill().unwrap(); // SIGKILL: no destructor, no handler runs
        p.wait().unwrap();
        assert!(gone(pid), "the kernel killed the holder with its parent");
    }

    #[test]
    fn sigterm_gives_the_memory_back() {
        use std::os::unix::process::ExitStatusExt;
        if !can_run("sigterm_gives_the_memory_back") {
            return;
        }
        let _serial = serial();
        let (mut p, pid) = parent();
        // SAFETY: kill has no memory preconditions; p is our live child.
        assert_eq!(unsafe { libc::kill(p.id() as i32, libc::SIGTERM) }, 0);
        let status = p.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        assert!(gone(pid), "the cleanup (or the kernel) ended the holder");
    }
}
