//! Commands that make fixtures (memory cgroups, loop filesystems, worker
//! processes): `demo`, `bench run` and `bench suite`.
//!
//! On SIGINT, SIGTERM or SIGHUP, ubio_testenv::cleanup's thread removes
//! what was made (killing the workers). The command runs on a thread of its
//! own; the main thread returns 128 + the signal as soon as that cleanup is
//! done, whatever the command is doing then (it usually fails, its workers
//! gone: a consequence of the signal, not news, so not reported).

use anyhow::Result;
use std::process::ExitCode;
use std::sync::mpsc;
use ubio_testenv::cleanup::{self, AfterSignal};

enum Event {
    Finished(Result<ExitCode>),
    Interrupted(i32),
}

/// Runs `command`; after a termination signal, ends as soon as the
/// fixtures are removed, with 128 + the signal.
pub fn run_until_signal(
    command: impl FnOnce() -> Result<ExitCode> + Send + 'static,
) -> Result<ExitCode> {
    cleanup::after_signal(AfterSignal::Return)?;
    let (tx, rx) = mpsc::channel();
    let on_signal = tx.clone();
    std::thread::Builder::new()
        .name("ubio-bench-signal-wait".into())
        .spawn(move || {
            let _ = on_signal.send(Event::Interrupted(cleanup::signal_cleanup_done()));
        })?;
    std::thread::Builder::new()
        .name("ubio-bench-command".into())
        .spawn(move || {
            let _ = tx.send(Event::Finished(command()));
        })?;
    let interrupted = |sig: i32| {
        eprintln!(
            "ubio-bench: interrupted by {}; what it made is removed",
            cleanup::signal_name(sig)
        );
        Ok(ExitCode::from(128 + sig as u8))
    };
    match rx.recv().expect("both senders live until they send") {
        Event::Interrupted(sig) => interrupted(sig),
        // A signal came while the command ended: wait for its cleanup.
        Event::Finished(_) if cleanup::signal_caught().is_some() => {
            interrupted(cleanup::signal_cleanup_done())
        }
        Event::Finished(result) => result,
    }
}
