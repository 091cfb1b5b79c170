//! The thread that looks, at a real-time priority: a look that waits for a
//! CPU comes late, and what a followed writer writes meanwhile goes beyond
//! its window (looks 15-152 ms late were seen at load 7-13 at nice -10).
//! SCHED_FIFO at the lowest priority (1) gets the thread a CPU when it
//! wakes, ahead of every ordinary thread; it never waits behind a blocking
//! call (writeback starts and the retirement of files are made elsewhere,
//! [`crate::submit`]), so it holds a CPU only for the looks themselves.
//!
//! Bounded so that it can never starve the machine: RLIMIT_RTTIME's soft
//! limit ([`RUNS_AT_MOST`] of CPU without blocking) sends SIGXCPU, on which
//! the thread is put back to SCHED_OTHER (ubio::sys::demote_on_sigxcpu)
//! rather than the process ended; the threads it starts do not inherit the
//! priority (SCHED_RESET_ON_FORK); and the kernel's own RT throttling
//! (sched_rt_runtime_us) keeps 5% of each second for other threads anyway.
//!
//! It needs CAP_SYS_NICE or an RLIMIT_RTPRIO of 1 (the systemd unit and the
//! container keep CAP_SYS_NICE for this); without either the looks run at
//! the process's nice value, and [`make_looker_realtime`] says why.

use std::time::Duration;
use ubio::sys::{self, Scheduler};

/// SCHED_FIFO's lowest priority: above every SCHED_OTHER thread, below
/// every real-time thread of the system's own.
pub const PRIORITY: i32 = 1;
/// The CPU time the thread may use without a blocking call before it is put
/// back to SCHED_OTHER (a look takes well under a millisecond), and the
/// hard limit past which the kernel would kill it (never reached: the first
/// SIGXCPU demotes it).
pub const RUNS_AT_MOST: Duration = Duration::from_millis(200);
const HARD_LIMIT: Duration = Duration::from_secs(2);

/// Make the calling thread (the one that looks) SCHED_FIFO at [`PRIORITY`],
/// bounded as the module says; Ok: a line for the log, Err: why not, in a
/// line (the looks then run as before).
pub fn make_looker_realtime() -> Result<String, String> {
    sys::set_rttime_limit(
        RUNS_AT_MOST.as_micros() as u64,
        HARD_LIMIT.as_micros() as u64,
    )
    .map_err(|e| format!("RLIMIT_RTTIME: {e}"))?;
    sys::demote_on_sigxcpu(sys::gettid()).map_err(|e| format!("SIGXCPU: {e}"))?;
    match sys::set_scheduler(Scheduler::Fifo { priority: PRIORITY }, true) {
        Ok(()) => Ok(format!(
            "the thread that looks runs SCHED_FIFO at priority {PRIORITY} (back to SCHED_OTHER \
             after {} ms of CPU without blocking)",
            RUNS_AT_MOST.as_millis()
        )),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(format!(
            "SCHED_FIFO refused ({e}): {}; the looks run at the process's nice value and come \
             late on a loaded machine",
            why_refused()
        )),
        Err(e) => Err(format!("SCHED_FIFO: {e}")),
    }
}

/// Why SCHED_FIFO was refused (EPERM): without CAP_SYS_NICE, no
/// RLIMIT_RTPRIO of the priority (or systemd's RestrictRealtime=yes); with
/// it, a cgroup v1 cpu cgroup that gives real-time threads no time (a
/// kernel with RT_GROUP_SCHED: a container's, cpu.rt_runtime_us 0).
fn why_refused() -> String {
    const CAP_SYS_NICE: u32 = 23;
    let nice = ubio::procfs::own_status()
        .ok()
        .and_then(|s| s.cap_eff)
        .is_some_and(|c| c & (1 << CAP_SYS_NICE) != 0);
    if !nice {
        return format!(
            "neither CAP_SYS_NICE nor an RLIMIT_RTPRIO of {PRIORITY} (or systemd's RestrictRealtime=yes)"
        );
    }
    match crate::cgroup::rt_runtime_of_self() {
        Some((0, dir)) => format!(
            "with CAP_SYS_NICE, its cpu cgroup gives real-time threads no time ({}/cpu.rt_runtime_us \
             is 0: a kernel with RT_GROUP_SCHED; give the cgroup and its parents a budget, podman \
             --cpu-rt-runtime)",
            dir.display()
        ),
        _ => "with CAP_SYS_NICE (a seccomp filter, or systemd's RestrictRealtime=yes)".into(),
    }
}

/// Whether the looker was put back to SCHED_OTHER since the start (it ran
/// [`RUNS_AT_MOST`] without a blocking call).
pub fn demoted() -> bool {
    sys::demotions() > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As root the thread becomes SCHED_FIFO 1 and a thread it starts does
    /// not inherit it; a busy loop past the limit is put back to
    /// SCHED_OTHER, not killed.
    #[test]
    fn the_looker_is_real_time_bounded_and_alone() {
        let name = "the_looker_is_real_time_bounded_and_alone";
        // On a thread of its own: the test harness's threads stay as they are.
        let r = std::thread::spawn(|| {
            let made = make_looker_realtime();
            let prio = sys::fifo_priority().unwrap();
            let child = std::thread::spawn(|| sys::fifo_priority().unwrap())
                .join()
                .unwrap();
            // Busy past RUNS_AT_MOST: SIGXCPU comes within a second after.
            let t = std::time::Instant::now();
            while sys::demotions() == 0 && t.elapsed() < RUNS_AT_MOST * 2 + Duration::from_secs(2) {
                std::hint::spin_loop();
            }
            (made, prio, child, sys::fifo_priority().unwrap())
        })
        .join()
        .unwrap();
        match r {
            (Ok(_), Some(PRIORITY), None, None) => assert!(demoted()),
            (Err(why), None, None, None) if !ubio_testenv::is_root() => {
                ubio_testenv::skip(name, &format!("not root: {why}"))
            }
            other => panic!("{other:?}"),
        }
    }
}
