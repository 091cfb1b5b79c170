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
//! itself) runs every registered closure, newest first, and exits with
//! 128 + signal number (130 for SIGINT, 143 for SIGTERM). A second signal while
//! that cleanup runs exits at once, so a hung `umount` can still be interrupted.
//!
//! Closures run while the registry lock is held, so the signal thread waits for
//! a cleanup that a drop has already started instead of racing it, and each
//! closure runs exactly once. A closure must therefore not call back into this
//! module. A panicking closure is caught and reported; the others still run.

use std::collections::BTreeMap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

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
        eprintln!("ubio-bench: cannot install the cleanup signal handler: {e}");
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
/// This is what the signal thread does before exiting; a harness may also call
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
        eprintln!("ubio-bench: cleanup `{}` panicked", entry.what);
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
                let n = pending();
                if n > 0 {
                    eprintln!(
                        "ubio-bench: caught {}, removing {n} fixture(s) before exiting",
                        signal_name(sig)
                    );
                }
                run_all();
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}

fn signal_name(sig: i32) -> &'static str {
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
