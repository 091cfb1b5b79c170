//! A process-wide registry of cleanups, run on drop and on termination signals.
//!
//! Fixtures (loop devices, mounts, cgroups) live in system-wide namespaces: if
//! the process dies without removing them they stay until someone notices. Drop
//! covers normal exit and panics (with unwinding); this module also covers
//! SIGINT (Ctrl-C), SIGTERM and SIGHUP, which otherwise kill the process without
//! running any destructor.
//!
//! How: [`register`] stores a closure and returns a [`CleanupGuard`]. Dropping
//! the guard (or calling [`CleanupGuard::run`]) removes the closure from the
//! registry and runs it. On the first termination signal a dedicated thread
//! (started by `signal-hook` on first use, never code inside the signal handler
//! itself) runs every registered closure, newest first. Then, by default, the
//! process dies of that signal, as it would have without the handler (a test
//! binary stops on Ctrl-C). A program that wants to end itself, with its own
//! exit status, says so with [`after_signal`]`(AfterSignal::Return)` and waits
//! for [`signal_cleanup_done`]: this module never calls `process::exit`. A
//! second signal while the cleanup runs, or after it, terminates at once, so
//! a hung `umount` can still be interrupted.
//!
//! Closures run while the registry lock is held, so the signal thread waits for
//! a cleanup that a drop has already started instead of racing it, and each
//! closure runs exactly once. A closure must therefore not call back into this
//! module. A panicking closure is caught and reported; the others still run.

use std::collections::BTreeMap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

type Task = Box<dyn FnOnce() + Send + 'static>;

struct Entry {
    what: String,
    task: Task,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    /// Ordered by id, so iterating in reverse runs the newest first: a loop
    /// filesystem registered after the tmpfs that holds its backing file is
    /// unmounted before that tmpfs.
    entries: BTreeMap<u64, Entry>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Default::default)
        .lock()
        // A poisoned lock only means a cleanup panicked; the map is still valid.
        .unwrap_or_else(|e| e.into_inner())
}

/// Removes a registered cleanup when dropped, by running it.
///
/// Returned by [`register`]. Keep it in the fixture that owns the resource,
/// declared so that it drops when the resource should go.
#[must_use = "dropping the guard runs the cleanup at once"]
pub struct CleanupGuard {
    id: u64,
}

impl CleanupGuard {
    /// Runs the cleanup now (same as dropping the guard).
    pub fn run(self) {
        drop(self)
    }
}

impl Drop for CleanupGuard {
    fn drop(&mut self) {
        let mut reg = registry();
        if let Some(entry) = reg.entries.remove(&self.id) {
            run_entry(entry);
        }
    }
}

impl std::fmt::Debug for CleanupGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CleanupGuard")
            .field("id", &self.id)
            .finish()
    }
}

/// Registers `task` to run when the returned guard drops, or on SIGINT, SIGTERM
/// or SIGHUP, whichever comes first. `what` describes the resource for messages
/// ("umount /tmp/ubio-mnt-x1y2").
///
/// Installs the signal handler on first use. If that fails (it should not on
/// Linux) the error is reported on stderr and the cleanup still runs on drop.
pub fn register(what: impl Into<String>, task: impl FnOnce() + Send + 'static) -> CleanupGuard {
    if let Err(e) = install_signal_handler() {
        eprintln!("ubio: cannot install the cleanup signal handler: {e}");
    }
    let mut reg = registry();
    let id = reg.next_id;
    reg.next_id += 1;
    reg.entries.insert(
        id,
        Entry {
            what: what.into(),
            task: Box::new(task),
        },
    );
    CleanupGuard { id }
}

/// Number of cleanups currently registered (resources still held).
pub fn pending() -> usize {
    registry().entries.len()
}

/// Runs every registered cleanup, newest first, and empties the registry.
///
/// This is what the signal thread does; a harness may also call
/// it on its own fatal-error path.
pub fn run_all() {
    let mut reg = registry();
    while let Some((_, entry)) = reg.entries.pop_last() {
        run_entry(entry);
    }
}

fn run_entry(entry: Entry) {
    log::debug!("cleanup: {}", entry.what);
    if catch_unwind(AssertUnwindSafe(entry.task)).is_err() {
        eprintln!("ubio: cleanup `{}` panicked", entry.what);
    }
}

/// Installs the SIGINT/SIGTERM/SIGHUP handling described in the module docs.
/// Idempotent; [`register`] calls it.
pub fn install_signal_handler() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| install().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| io::Error::other(format!("install signal handler: {e}")))
}

/// What the cleanup thread does once a signal's cleanups have run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSignal {
    /// Die of the signal, as without a handler (the default).
    Die,
    /// Return: the program waits for [`signal_cleanup_done`] and ends
    /// itself (a command that reports and picks its exit status).
    Return,
}

static RETURN_AFTER_SIGNAL: AtomicBool = AtomicBool::new(false);
/// The termination signal caught, 0 before one.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// The signal whose cleanups have finished, once they have.
fn cleaned() -> &'static (Mutex<Option<i32>>, Condvar) {
    static CLEANED: OnceLock<(Mutex<Option<i32>>, Condvar)> = OnceLock::new();
    CLEANED.get_or_init(Default::default)
}

/// Choose what happens after a termination signal's cleanups (and install
/// the handler, so that the choice holds from now on).
pub fn after_signal(what: AfterSignal) -> io::Result<()> {
    RETURN_AFTER_SIGNAL.store(what == AfterSignal::Return, Ordering::SeqCst);
    install_signal_handler()
}

/// The termination signal caught, if one was (its cleanups may still run).
pub fn signal_caught() -> Option<i32> {
    Some(CAUGHT.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// Block until a termination signal arrives and every cleanup it started
/// has run; returns the signal.
pub fn signal_cleanup_done() -> i32 {
    let (lock, cv) = cleaned();
    let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(sig) = *done {
            return sig;
        }
        done = cv.wait(done).unwrap_or_else(|e| e.into_inner());
    }
}

fn install() -> io::Result<()> {
    const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
    // Set once cleanup has started: a repeated signal then terminates at once.
    let cleaning = Arc::new(AtomicBool::new(false));
    for sig in SIGNALS {
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&cleaning))?;
    }
    let mut signals = signal_hook::iterator::Signals::new(SIGNALS)?;
    std::thread::Builder::new()
        .name("ubio-cleanup".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                cleaning.store(true, Ordering::SeqCst);
                CAUGHT.store(sig, Ordering::SeqCst);
                let n = pending();
                if n > 0 {
                    eprintln!("ubio: caught {}, removing {n} fixture(s)", signal_name(sig));
                }
                run_all();
                let (lock, cv) = cleaned();
                *lock.lock().unwrap_or_else(|e| e.into_inner()) = Some(sig);
                cv.notify_all();
                if !RETURN_AFTER_SIGNAL.load(Ordering::SeqCst) {
                    if let Err(e) = signal_hook::low_level::emulate_default_handler(sig) {
                        eprintln!("ubio: cannot die of {}: {e}", signal_name(sig));
                    }
                }
            }
        })?;
    Ok(())
}

/// "SIGINT", "SIGTERM" or "SIGHUP".
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// `run_all` runs every registered closure, so these tests must not
    /// overlap with each other.
    static SERIAL: Mutex<()> = Mutex::new(());
    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn guard_runs_once_on_drop() {
        let _serial = serial();
        let count = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&count);
        let guard = register("count", move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(count.load(Ordering::SeqCst), 0);
        guard.run();
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn run_all_goes_newest_first_and_guards_then_do_nothing() {
        let _serial = serial();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (Arc::clone(&order), Arc::clone(&order));
        let g1 = register("first", move || a.lock().unwrap().push(1));
        let g2 = register("second", move || b.lock().unwrap().push(2));
        run_all();
        drop((g1, g2));
        let order = order.lock().unwrap();
        assert_eq!(*order, vec![2, 1]);
    }

    #[test]
    fn panicking_cleanup_does_not_poison_others() {
        let _serial = serial();
        let ran = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&ran);
        let g1 = register("ok", move || r.store(true, Ordering::SeqCst));
        let g2 = register("boom", || panic!("cleanup failure (expected in this test)"));
        drop(g2);
        drop(g1);
        assert!(ran.load(Ordering::SeqCst));
    }
}

/// The signal path, in a child process of its own (signals are process-wide
/// and this test must not stop the test binary).
#[cfg(test)]
mod signal_tests {
    use super::*;
    use std::process::Command;

    const CHILD: &str = "UBIO_TESTENV_SIGNAL_CHILD";

    /// Runs the test `name` of this module alone in a child process: its
    /// exit status and stderr.
    fn child(name: &str) -> (std::process::ExitStatus, String) {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &format!("cleanup::signal_tests::{name}")])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// In `Return` mode, SIGINT runs the cleanups and then hands control
    /// back: the program goes on and ends itself (exit 0 here), it is not
    /// killed nor exited by this module. Asserted by the child's own
    /// account of the events, in order.
    #[test]
    fn sigint_cleans_up_then_returns_to_the_program() {
        if std::env::var_os(CHILD).is_some() {
            after_signal(AfterSignal::Return).unwrap();
            let _guard = register("fixture", || eprintln!("event: cleanup ran"));
            eprintln!("event: raising");
            signal_hook::low_level::raise(SIGINT).unwrap();
            let sig = signal_cleanup_done();
            assert_eq!(signal_caught(), Some(sig));
            eprintln!("event: program resumed after {}", signal_name(sig));
            return;
        }
        let (status, err) = child("sigint_cleans_up_then_returns_to_the_program");
        let events: Vec<_> = err.lines().filter(|l| l.starts_with("event: ")).collect();
        assert_eq!(
            events,
            [
                "event: raising",
                "event: cleanup ran",
                "event: program resumed after SIGINT"
            ],
            "{err}"
        );
        assert!(status.success(), "{status:?}: {err}");
    }

    /// By default the process dies of the signal once the cleanups ran.
    #[test]
    fn sigint_by_default_cleans_up_then_dies_of_it() {
        use std::os::unix::process::ExitStatusExt;
        if std::env::var_os(CHILD).is_some() {
            let _guard = register("fixture", || eprintln!("event: cleanup ran"));
            eprintln!("event: raising");
            signal_hook::low_level::raise(SIGINT).unwrap();
            signal_cleanup_done();
            // The cleanup thread kills the process now; never report success.
            loop {
                std::thread::park();
            }
        }
        let (status, err) = child("sigint_by_default_cleans_up_then_dies_of_it");
        let events: Vec<_> = err.lines().filter(|l| l.starts_with("event: ")).collect();
        assert_eq!(events, ["event: raising", "event: cleanup ran"], "{err}");
        assert_eq!(status.signal(), Some(SIGINT), "{status:?}: {err}");
    }
}

/// Have the child that `cmd` starts be killed (SIGKILL) when the thread that
/// started it ends, however that happens: a helper process (a copy tool, a
/// memory balloon) must not outlive a benchmark killed on Ctrl-C, or the
/// cgroup it runs in could not be removed and its memory not freed.
///
/// See prctl(2), PR_SET_PDEATHSIG.
pub fn die_with_parent(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec and only calls prctl,
    // which is async-signal-safe; no allocation, no locks.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}
