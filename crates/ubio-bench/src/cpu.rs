//! CPU time: what a process, its children or another process spent
//! (getrusage, /proc/PID/stat), so a benchmark can say what a mode costs
//! besides wall-clock time.

use serde::{Deserialize, Serialize};
use std::io;
use ubio::sys::Usage;

/// User and system CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub user_secs: f64,
    pub sys_secs: f64,
}

impl CpuTimes {
    /// `self - earlier`, per field.
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_secs: self.user_secs - earlier.user_secs,
            sys_secs: self.sys_secs - earlier.sys_secs,
        }
    }

    /// `self + other`, per field.
    pub fn plus(self, other: CpuTimes) -> CpuTimes {
        CpuTimes {
            user_secs: self.user_secs + other.user_secs,
            sys_secs: self.sys_secs + other.sys_secs,
        }
    }

    pub fn total_secs(self) -> f64 {
        self.user_secs + self.sys_secs
    }
}

/// `getrusage(RUSAGE_SELF)`: the CPU time of every thread of this process so
/// far (not of its children).
pub fn process_times() -> io::Result<CpuTimes> {
    rusage(Usage::Process)
}

/// `getrusage(RUSAGE_CHILDREN)`: the CPU time of this process's children
/// (and theirs) that have been waited for.
pub fn children_times() -> io::Result<CpuTimes> {
    rusage(Usage::Children)
}

fn rusage(who: Usage) -> io::Result<CpuTimes> {
    let (user, sys) = ubio::sys::cpu_time(who)?;
    Ok(CpuTimes {
        user_secs: user.as_secs_f64(),
        sys_secs: sys.as_secs_f64(),
    })
}

/// The CPU time of another process or kernel thread so far (utime and
/// stime of /proc/PID/stat); `None` once it is gone.
pub fn pid_times(pid: u32) -> Option<CpuTimes> {
    let stat = ubio::procfs::pid_stat(pid).ok()?;
    Some(ticks(stat.utime_ticks, stat.stime_ticks))
}

/// The CPU time of a process and of the children it waited for (utime +
/// cutime, stime + cstime). Read from an exited child before it is reaped
/// (a zombie keeps its figures), it is the whole command's.
pub fn pid_tree_times(pid: u32) -> Option<CpuTimes> {
    let stat = ubio::procfs::pid_stat(pid).ok()?;
    Some(ticks(
        stat.utime_ticks + stat.cutime_ticks,
        stat.stime_ticks + stat.cstime_ticks,
    ))
}

fn ticks(user: u64, sys: u64) -> CpuTimes {
    let hz = ubio::sys::clock_ticks() as f64;
    CpuTimes {
        user_secs: user as f64 / hz,
        sys_secs: sys as f64 / hz,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_time_grows_with_work() {
        // Work until the counters move, however busy the machine is (no
        // assertion on how fast: the wall-clock cap only bounds a broken clock).
        let a = process_times().unwrap();
        let mut x = 1u64;
        let t = std::time::Instant::now();
        let d = loop {
            for _ in 0..1_000_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            let d = process_times().unwrap().since(a);
            if d.user_secs + d.sys_secs >= 0.02 || t.elapsed() > std::time::Duration::from_secs(60)
            {
                break d;
            }
        };
        std::hint::black_box(x);
        assert!(
            d.user_secs + d.sys_secs >= 0.02,
            "CPU time did not grow: {d:?}"
        );
        assert!(d.user_secs >= 0.0 && d.sys_secs >= 0.0, "{d:?}");
    }

    #[test]
    fn a_process_and_its_children_have_times() {
        assert!(pid_times(std::process::id()).is_some());
        assert!(children_times().is_ok());
    }

    #[test]
    fn an_exited_command_has_its_childrens_time_until_reaped() {
        // The work is done by a grandchild the child waits for: it is in
        // cutime/cstime, not in the child's own utime.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'; true",
            ])
            .spawn()
            .unwrap();
        let pidfd = ubio::sys::pidfd_open(child.id()).unwrap();
        use std::os::fd::AsFd;
        while !ubio::sys::poll_readable(pidfd.as_fd(), std::time::Duration::from_secs(60)).unwrap()
        {
        }
        let tree = pid_tree_times(child.id()).expect("a zombie keeps its /proc/PID/stat");
        let own = pid_times(child.id()).unwrap();
        assert!(child.wait().unwrap().success());
        assert!(
            tree.total_secs() > own.total_secs(),
            "tree {tree:?}, own {own:?}"
        );
    }
}
