//! What the daemon can see and do where it runs: on the host (the systemd
//! unit) or in a container (a DaemonSet's pod, `podman run`). A container
//! must be given the host's PID namespace, /proc and /sys/fs/cgroup, the
//! unit's capabilities and a seccomp profile that allows cachestat(); the
//! daemon checks each at start and says what is missing and what follows,
//! instead of following nothing in silence.
//!
//! It also takes the host's view of cgroup paths: in a cgroup namespace of
//! its own (a container's, the default on cgroup v2) the cgroups of other
//! processes read `/../..`, which no scope's pattern names; unless the
//! configuration says `cgroup_namespace = "own"`, the daemon enters the
//! host's first (setns, CAP_SYS_ADMIN), before it starts any thread.

use super::config::{CgroupNamespace, Config};
use ubio_engine::cgroup::{self, Namespace};

/// The capabilities the daemon uses, with what their absence costs.
const CAPABILITIES: [(u32, &str, &str); 4] = [
    (21, "CAP_SYS_ADMIN", "no fanotify filesystem marks and no pidfds: processes are found by polling the scopes' cgroups"),
    (19, "CAP_SYS_PTRACE", "the descriptors of other users' processes cannot be read (/proc/PID/fd, fdinfo, pidfd_getfd): their files are not followed"),
    (2, "CAP_DAC_READ_SEARCH", "files this daemon may not read cannot be opened: those of other users' processes are followed only where pidfd_getfd lends their descriptor"),
    (3, "CAP_FOWNER", "cachestat() refuses files the daemon can neither write nor own (EPERM): their residency is unknown and nothing of them is dropped"),
];

/// Take the host's view of cgroup paths where the configuration asks for
/// it and the daemon has its own (call before any thread starts). Err: a
/// line saying why it cannot, and what to do.
pub fn take_host_view(cfg: &Config) -> Result<Option<String>, String> {
    if cfg.cgroup_namespace == CgroupNamespace::Own {
        return Ok(None);
    }
    match cgroup::namespace() {
        Namespace::Host => Ok(None),
        Namespace::Own => match cgroup::enter_host_namespace() {
            Ok(()) => Ok(Some(
                "entered the host's cgroup namespace: cgroup paths are the host's".into(),
            )),
            Err(e) => Err(format!(
                "this daemon runs in a cgroup namespace of its own, where the scopes' cgroups \
                 cannot be named, and cannot enter the host's ({e}): run it with the host's \
                 PID namespace, CAP_SYS_ADMIN and CAP_SYS_PTRACE (hostPID: true; podman --pid=host), or with \
                 the host's cgroup namespace (podman --cgroupns=host), or set \
                 cgroup_namespace = \"own\" in [daemon]"
            )),
        },
    }
}

/// Lines for the log about what the daemon lacks here, each with what
/// follows from it (none on a host with the unit's capabilities).
pub fn check(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let status = ubio::procfs::own_status().unwrap_or_default();
    if own_pid_namespace(&status) {
        out.push(
            "runs in a PID namespace of its own: it sees only the processes of its container; \
             give it the host's (hostPID: true; podman --pid=host)"
                .into(),
        );
    }
    if let Some(eff) = status.cap_eff {
        for (bit, name, cost) in CAPABILITIES {
            if eff & (1 << bit) == 0 {
                out.push(format!("without {name}: {cost}"));
            }
        }
    }
    // cachestat() on the daemon's own executable (any file will do).
    if let Ok(f) = std::fs::File::open("/proc/self/exe") {
        if let Err(e) =
            ubio::sys::cachestat(std::os::fd::AsFd::as_fd(&f), ubio::sys::FileRange::WHOLE)
        {
            if let Some(fb) = ubio::residency::Fallback::of(&e) {
                if fb == ubio::residency::Fallback::CachestatBlocked {
                    out.push(format!(
                        "{} (podman: allow it with the profile scripts/container.sh writes; containerd's and Docker's default profiles allow it)",
                        fb.note()
                    ));
                }
            }
        }
    }
    let names_cgroups = cfg
        .scopes
        .scopes
        .iter()
        .any(|s| !s.processes.cgroups.is_empty());
    if names_cgroups {
        if let Err(e) = cgroup::memory_version() {
            out.push(format!(
                "the scopes name cgroups, but {e}: mount the host's /sys/fs/cgroup"
            ));
        }
    }
    out
}

/// Whether the daemon runs in a PID namespace of its own (a container's):
/// its /proc then shows that namespace alone, so NSpid has one entry there
/// too; but the namespace's first process is the daemon itself (the
/// container's entrypoint) or shares its cgroup (an init before it), where
/// the host's PID 1 sits at the root of the hierarchy.
fn own_pid_namespace(status: &ubio::procfs::PidStatus) -> bool {
    if status.ns_pids.len() > 1 || std::process::id() == 1 {
        return true;
    }
    let (Ok(init), Ok(own)) = (
        ubio::procfs::pid_cgroup("1"),
        ubio::procfs::pid_cgroup("self"),
    ) else {
        return false;
    };
    init == own && own.iter().any(|l| l.path != "/")
}
