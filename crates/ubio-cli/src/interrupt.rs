//! Commands that make fixtures (memory cgroups, loop filesystems, worker
//! processes): `demo`, `bench run` and `bench suite`.
//!
//! On SIGINT, SIGTERM or SIGHUP, ubio_bench::cleanup's thread removes what
//! was made (killing the workers) and exits with 128 + the signal. Meanwhile
//! the command's own thread sees its workers die and fails: an error that is
//! a consequence of the signal, not news. [`run_until_signal`] keeps it from
//! being reported and lets the cleanup thread finish and exit.

use anyhow::Result;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Runs `command`; if it fails after a termination signal arrived, waits
/// for the cleanup thread to exit the process instead of reporting the
/// error (and exits 128 + the signal if it somehow does not).
pub fn run_until_signal(command: impl FnOnce() -> Result<ExitCode>) -> Result<ExitCode> {
    let caught = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(sig, Arc::clone(&caught), sig as usize)?;
    }
    let result = command();
    let sig = caught.load(Ordering::SeqCst);
    if result.is_err() && sig != 0 {
        std::thread::sleep(Duration::from_secs(30));
        return Ok(ExitCode::from(128 + sig as u8));
    }
    result
}
