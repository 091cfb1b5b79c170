//! The thread that looks, at a real-time priority: a look that waits for a
//! CPU comes late, and what a followed writer writes meanwhile goes beyond
//! its window (looks 15-152 ms late were seen at load 7-13 at nice -10).
//! SCHED_FIFO at the lowest priority (1) gets the thread a CPU when it
//! wakes, ahead of every ordinary thread; it never waits behind a blocking
//! call (writeback starts and the retirement of files are made elsewhere,
//! [`crate::submit`]), so it holds a CPU only for the looks themselves.
//! The thread that drops pages as their writeback completes runs so too
//! ([`like_the_looker`]): it sleeps in the wait for the device, and a drop
//! that waits for a CPU leaves a fast writer's written-back pages cached.
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use ubio::sys::{self, Scheduler};

/// Whether the looker was made real-time ([`make_looker_realtime`]).
static LOOKER_REALTIME: AtomicBool = AtomicBool::new(false);

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
    match fifo_put_back_on_sigxcpu() {
        Ok(_) => {
            LOOKER_REALTIME.store(true, Ordering::Relaxed);
            Ok(format!(
                "the thread that looks runs SCHED_FIFO at priority {PRIORITY}, and so does the \
                 one that drops (back to SCHED_OTHER after {} ms of CPU without blocking)",
                RUNS_AT_MOST.as_millis()
            ))
        }
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(format!(
            "SCHED_FIFO refused ({e}): {}; the looks run at the process's nice value and come \
             late on a loaded machine",
            why_refused()
        )),
        Err(e) => Err(format!("SCHED_FIFO: {e}")),
    }
}

/// The calling thread real-time like the looker, if the looker is (and
/// still as the process started it: not put back since), until the value
/// returned is dropped; bounded the same way. For a thread of the engine
/// that must run on time and blocks between its runs.
pub fn like_the_looker() -> Option<Realtime> {
    if !LOOKER_REALTIME.load(Ordering::Relaxed) || demoted() {
        return None;
    }
    match fifo_put_back_on_sigxcpu() {
        Ok(tid) => Some(Realtime { tid }),
        Err(e) => {
            log::debug!("engine: SCHED_FIFO refused ({e}): the thread runs as before");
            None
        }
    }
}

/// The calling thread SCHED_FIFO at [`PRIORITY`] (reset on fork), put back
/// to SCHED_OTHER on SIGXCPU; its id, or the error (then it is as before).
fn fifo_put_back_on_sigxcpu() -> std::io::Result<i32> {
    let tid = sys::gettid();
    sys::demote_on_sigxcpu(tid)?;
    sys::set_scheduler(Scheduler::Fifo { priority: PRIORITY }, true)
        .inspect_err(|_| sys::forget_on_sigxcpu(tid))?;
    Ok(tid)
}

/// A thread made real-time by [`like_the_looker`]: taken out of those put
/// back on SIGXCPU when dropped (its id may be reused after it ends).
pub struct Realtime {
    tid: i32,
}

impl Drop for Realtime {
    fn drop(&mut self) {
        sys::forget_on_sigxcpu(self.tid);
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

    /// As root the thread becomes SCHED_FIFO 1, a thread it starts does
    /// not inherit it, one that asks to run like it does; a busy loop past
    /// the limit is put back to SCHED_OTHER, not killed.
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
            // One that asks to run like the looker does.
            let like = std::thread::spawn(|| {
                let _rt = like_the_looker();
                sys::fifo_priority().unwrap()
            })
            .join()
            .unwrap();
            assert_eq!(like, prio, "a thread like the looker");
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
