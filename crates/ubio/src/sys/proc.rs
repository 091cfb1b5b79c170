//! Other processes: pidfd_open, pidfd_getfd and poll on a pidfd; the
//! caller's own CPU time; dying of a signal as a child did.

use super::cvt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

/// `pidfd_open(pid, 0)`: a descriptor for process `pid` that becomes
/// readable when it exits. Holds no reference that keeps the process alive.
///
/// See pidfd_open(2); since Linux 5.3.
pub fn pidfd_open(pid: u32) -> io::Result<File> {
    // SAFETY: no pointers are passed.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// `pidfd_getfd(pidfd, targetfd, 0)`: a duplicate, in this process, of
/// descriptor `targetfd` of the process behind `pidfd` (the same open file
/// description, so the same file position and writeback error state).
/// Needs ptrace access to that process.
///
/// See pidfd_getfd(2); since Linux 5.6.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, targetfd: i32) -> io::Result<File> {
    // SAFETY: no pointers are passed.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), targetfd, 0) })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// `poll([{fd, POLLIN}], 1, timeout)`: true if `fd` became readable (for a
/// pidfd: the process exited) within `timeout`. EINTR counts as "not yet".
///
/// See poll(2).
pub fn poll_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    Ok(poll_readable_any(&[fd], timeout)?[0])
}

/// `poll(fds with POLLIN, timeout)` over several descriptors: which of
/// them became readable within `timeout` (all false on a timeout or EINTR).
///
/// See poll(2).
pub fn poll_readable_any(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `p` holds `p.len()` valid pollfds for the duration of the call.
    match cvt(unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) } as libc::c_long) {
        Ok(_) => Ok(p.iter().map(|x| x.revents != 0).collect()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(vec![false; fds.len()]),
        Err(e) => Err(e),
    }
}

/// The kind of namespace [`setns`] enters (a CLONE_NEW* flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespaces(pub i32);

impl Namespaces {
    pub const CGROUP: Namespaces = Namespaces(libc::CLONE_NEWCGROUP);
}

/// `setns(fd, nstype)`: move the calling thread into the namespace `fd`
/// (an open /proc/PID/ns/* file) refers to; threads started after inherit
/// it. Needs CAP_SYS_ADMIN.
///
/// See setns(2); cgroup namespaces since Linux 4.6.
pub fn setns(fd: BorrowedFd<'_>, nstype: Namespaces) -> io::Result<()> {
    // SAFETY: no pointers are passed.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), nstype.0) } as libc::c_long).map(drop)
}

/// `getrlimit(RLIMIT_NOFILE)`: the soft limit of open descriptors (one
/// past the highest number a descriptor may have).
///
/// See getrlimit(2).
pub fn open_files_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer for struct rlimit.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } as libc::c_long)?;
    Ok(r.rlim_cur)
}

/// `setrlimit(RLIMIT_NOFILE)`: raise the soft limit of open descriptors
/// to the hard limit; returns the new limit.
///
/// See getrlimit(2).
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer for struct rlimit.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } as libc::c_long)?;
    r.rlim_cur = r.rlim_max;
    // SAFETY: `r` is a valid struct rlimit.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } as libc::c_long)?;
    Ok(r.rlim_cur)
}

/// `getrlimit(RLIMIT_AS)`: the soft limit of the process's address space
/// in bytes (`ulimit -v`), or None where there is none (RLIM_INFINITY).
///
/// See getrlimit(2).
pub fn address_space_limit() -> io::Result<Option<u64>> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer for struct rlimit.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } as libc::c_long)?;
    Ok((r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur))
}

/// Whose CPU time [`cpu_time`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// The calling process (`RUSAGE_SELF`), children not included.
    Process,
    /// Its children (and theirs) that have been waited for (`RUSAGE_CHILDREN`).
    Children,
}

/// User and system CPU time so far (`getrusage`).
///
/// See getrusage(2).
pub fn cpu_time(who: Usage) -> io::Result<(Duration, Duration)> {
    let who = match who {
        Usage::Process => libc::RUSAGE_SELF,
        Usage::Children => libc::RUSAGE_CHILDREN,
    };
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid out-pointer for struct rusage.
    cvt(unsafe { libc::getrusage(who, ru.as_mut_ptr()) } as libc::c_long)?;
    // SAFETY: getrusage succeeded and filled it.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok((tv(ru.ru_utime), tv(ru.ru_stime)))
}

/// `clock_gettime(CLOCK_MONOTONIC)`: time since boot, suspend not counted;
/// the same clock in every process (unlike an `Instant`, it can be sent).
///
/// See clock_gettime(2).
pub fn clock_monotonic() -> Duration {
    clock(libc::CLOCK_MONOTONIC)
}

/// `clock_gettime(CLOCK_BOOTTIME)`: time since boot, suspend counted; the
/// clock of a process's start time in /proc/PID/stat.
///
/// See clock_gettime(2).
pub fn clock_boottime() -> Duration {
    clock(libc::CLOCK_BOOTTIME)
}

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; both clocks callers pass exist
    // on every Linux ubio runs on (BOOTTIME since 2.6.39), so the call
    // cannot fail.
    unsafe { libc::clock_gettime(id, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`): the unit of the CPU
/// times in /proc/PID/stat. 100 if sysconf cannot tell.
///
/// See sysconf(3), proc_pid_stat(5).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        hz if hz > 0 => hz as u64,
        _ => 100,
    }
}

/// Reset `sig` to its default action and send it to the calling process:
/// how a wrapper ends "killed by signal N" like the child it ran. Returns
/// only if the signal does not end the process (then the caller exits).
///
/// See signal(2), raise(3).
pub fn raise_default(sig: i32) {
    // SAFETY: restoring the default disposition and raising a signal touch
    // no memory of ours.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// `kill(pid, sig)`: send `sig` to process `pid`.
///
/// See kill(2).
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    // SAFETY: no pointers are passed.
    cvt(unsafe { libc::kill(pid as libc::pid_t, sig) } as libc::c_long).map(drop)
}

/// `setpriority(PRIO_PROCESS, 0, nice)`: the calling thread's nice value
/// (Linux applies it per thread). Lowering it needs CAP_SYS_NICE.
///
/// See setpriority(2).
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: no pointers are passed.
    cvt(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } as libc::c_long).map(drop)
}

/// How the calling thread is scheduled ([`set_scheduler`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// SCHED_OTHER, the default, with the thread's nice value.
    Other,
    /// SCHED_FIFO at `priority` (1 to 99): it runs as soon as it is
    /// runnable, ahead of every SCHED_OTHER thread.
    Fifo { priority: i32 },
}

/// `sched_setscheduler(0, policy | SCHED_RESET_ON_FORK, &param)`: schedule
/// the calling thread so; with `reset_on_fork` the threads and processes it
/// starts get SCHED_OTHER back (and a nice of at least 0). SCHED_FIFO needs
/// CAP_SYS_NICE or an RLIMIT_RTPRIO of at least the priority.
///
/// See sched_setscheduler(2), sched(7).
pub fn set_scheduler(s: Scheduler, reset_on_fork: bool) -> io::Result<()> {
    let (policy, priority) = match s {
        Scheduler::Other => (libc::SCHED_OTHER, 0),
        Scheduler::Fifo { priority } => (libc::SCHED_FIFO, priority),
    };
    let flags = if reset_on_fork {
        libc::SCHED_RESET_ON_FORK
    } else {
        0
    };
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid struct sched_param for the call.
    cvt(unsafe { libc::sched_setscheduler(0, policy | flags, &param) } as libc::c_long).map(drop)
}

/// `sched_getscheduler(0)` of the calling thread: SCHED_FIFO's priority, or
/// None for any other policy.
///
/// See sched_getscheduler(2), sched_getparam(2).
pub fn fifo_priority() -> io::Result<Option<i32>> {
    // SAFETY: no pointers are passed.
    let policy = cvt(unsafe { libc::sched_getscheduler(0) } as libc::c_long)? as i32;
    if policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_FIFO {
        return Ok(None);
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid out-pointer for struct sched_param.
    cvt(unsafe { libc::sched_getparam(0, &mut param) } as libc::c_long)?;
    Ok(Some(param.sched_priority))
}

/// `setrlimit(RLIMIT_RTTIME, {soft, hard})`: the CPU time, in microseconds,
/// a real-time thread of this process may use without a blocking call; past
/// the soft limit it gets SIGXCPU (each second more), past the hard limit
/// SIGKILL.
///
/// See getrlimit(2).
pub fn set_rttime_limit(soft_us: u64, hard_us: u64) -> io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: soft_us as libc::rlim_t,
        rlim_max: hard_us as libc::rlim_t,
    };
    // SAFETY: `r` is a valid struct rlimit.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_RTTIME, &r) } as libc::c_long).map(drop)
}

/// `gettid()`: the calling thread's id.
///
/// See gettid(2).
pub fn gettid() -> i32 {
    // SAFETY: no pointers are passed; gettid cannot fail.
    unsafe { libc::gettid() }
}

/// The threads put back on SIGXCPU (0: a free slot): the engine's few
/// real-time threads.
static DEMOTE: [AtomicI32; 4] = [const { AtomicI32::new(0) }; 4];
static DEMOTED: AtomicU64 = AtomicU64::new(0);

extern "C" fn demote(_: libc::c_int) {
    // The signal is the process's, not the thread's that ran too long:
    // every thread registered is put back.
    let param = libc::sched_param { sched_priority: 0 };
    let mut any = false;
    for slot in &DEMOTE {
        let tid = slot.load(Ordering::Relaxed);
        if tid > 0 {
            // SAFETY: a system call with a valid struct sched_param:
            // nothing a signal handler may not do.
            unsafe { libc::sched_setscheduler(tid, libc::SCHED_OTHER, &param) };
            any = true;
        }
    }
    if any {
        DEMOTED.fetch_add(1, Ordering::Relaxed);
    }
}

/// `sigaction(SIGXCPU, ...)`: on SIGXCPU (a real-time thread past
/// RLIMIT_RTTIME's soft limit, [`set_rttime_limit`]), put thread `tid`,
/// and every other thread registered so, back to SCHED_OTHER instead of
/// ending the process; [`demotions`] counts how often. Up to four threads;
/// [`forget_on_sigxcpu`] takes one out (before it ends: its id may be
/// reused).
///
/// See sigaction(2), getrlimit(2) (RLIMIT_RTTIME).
pub fn demote_on_sigxcpu(tid: i32) -> io::Result<()> {
    let registered = DEMOTE
        .iter()
        .any(|slot| slot.load(Ordering::Relaxed) == tid)
        || DEMOTE.iter().any(|slot| {
            slot.compare_exchange(0, tid, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        });
    if !registered {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    // SAFETY: a zeroed sigaction with a handler that only makes system
    // calls and touches atomics.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = demote as *const () as libc::sighandler_t;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa` is a valid struct sigaction; the old one is not asked.
    cvt(unsafe { libc::sigaction(libc::SIGXCPU, &sa, std::ptr::null_mut()) } as libc::c_long)
        .map(drop)
}

/// Take thread `tid` out of those [`demote_on_sigxcpu`] puts back.
pub fn forget_on_sigxcpu(tid: i32) {
    for slot in &DEMOTE {
        let _ = slot.compare_exchange(tid, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// How often [`demote_on_sigxcpu`] put its threads back to SCHED_OTHER.
pub fn demotions() -> u64 {
    DEMOTED.load(Ordering::Relaxed)
}
