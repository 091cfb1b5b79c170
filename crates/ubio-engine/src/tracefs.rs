//! A trace instance of ubio's own: the daemon's count of kswapd's wakes by
//! order ([`crate::reclaim`]) and the harness's count of pages reclaimed by
//! memory cgroup limits (ubio_testenv::reclaim_trace) both read kernel
//! tracepoints through one.
//!
//! An instance is a directory of its own under tracefs's `instances/`
//! (made with mkdir, removed with rmdir): its own ring buffer and event
//! switches, so ubio neither reads nor changes what an operator's own
//! tracing does at the top level. It is named `<prefix><pid>-<n>` and
//! removed when [`Instance`] is dropped; one left by a process that was
//! killed (SIGKILL runs no drop) is removed by the next [`Instance::create`]
//! with the same prefix, only once the process that made it is gone.
//!
//! Kernels without hist triggers (CONFIG_HIST_TRIGGERS off, as this
//! project's VM) cannot count in the kernel, so the events are read whole
//! from `trace_pipe`, non-blocking, and counted by the caller line by line
//! ([`Instance::read_lines`]). Only std's file calls and
//! [`ubio::sys::fs_magic`] (fstatfs) are needed: no syscall of its own.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use ubio::sys::FsMagic;

/// Where tracefs is mounted: systemd's place, then the one below debugfs.
pub const ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The first of [`ROOTS`] where tracefs is mounted.
pub fn system_root() -> Result<PathBuf, String> {
    for r in ROOTS {
        let Ok(dir) = File::open(r) else { continue };
        if ubio::sys::fs_magic(dir.as_fd()).is_ok_and(|m| m == FsMagic::TRACEFS) {
            return Ok(PathBuf::from(r));
        }
    }
    Err(format!(
        "tracefs is not mounted (at {} or {}), or not readable by this user",
        ROOTS[0], ROOTS[1]
    ))
}

/// A trace instance with one event enabled and its `trace_pipe` open.
pub struct Instance {
    dir: PathBuf,
    event: String,
    /// `trace_pipe`, opened non-blocking; closed before the rmdir.
    pipe: Option<File>,
    /// The end of the last read that was not a whole line yet.
    partial: Vec<u8>,
}

impl Instance {
    /// Make an instance `<prefix><pid>-<n>` under `root` (a tracefs
    /// mount), with a ring buffer of `buffer_kb` per CPU and `event`
    /// (`vmscan/mm_vmscan_kswapd_wake`) enabled in it. The error is one line:
    /// which step failed and why (not root, a read-only /sys as systemd's
    /// ProtectKernelTunables makes it, a kernel without the event).
    /// `notes` gets a line per stale instance of `prefix` removed.
    pub fn create(
        root: &Path,
        prefix: &str,
        event: &str,
        buffer_kb: u32,
        notes: &mut Vec<String>,
    ) -> Result<Instance, String> {
        let event_dir = root.join("events").join(event);
        if !event_dir.is_dir() {
            return Err(format!(
                "this kernel has no {} event ({} is missing)",
                event.replace('/', ":"),
                event_dir.display()
            ));
        }
        let instances = root.join("instances");
        remove_stale(&instances, prefix, notes);
        let dir = instances.join(format!("{prefix}{}-{}", std::process::id(), unique()));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot make the trace instance {}: {e}", dir.display()))?;
        // From here on, Drop removes it whatever fails.
        let mut me = Instance {
            dir,
            event: event.to_string(),
            pipe: None,
            partial: Vec::new(),
        };
        me.set("buffer_size_kb", &buffer_kb.to_string())?;
        me.set(&format!("events/{event}/enable"), "1")?;
        let pipe_path = me.dir.join("trace_pipe");
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe_path)
            .map_err(|e| format!("open {}: {e}", pipe_path.display()))?;
        me.pipe = Some(pipe);
        Ok(me)
    }

    fn set(&self, file: &str, value: &str) -> Result<(), String> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(|e| format!("write {value} to {}: {e}", p.display()))
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Read what the kernel traced since the last call, without waiting:
    /// `each` gets every whole line. Returns the bytes read.
    pub fn read_lines(&mut self, mut each: impl FnMut(&str)) -> io::Result<usize> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(0);
        };
        let mut buf = [0u8; 16 << 10];
        let mut total = 0;
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("read {}/trace_pipe: {e}", self.dir.display()),
                    ))
                }
            };
            total += n;
            self.partial.extend_from_slice(&buf[..n]);
            let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            for line in self.partial[..end].split(|&b| b == b'\n') {
                if let Ok(line) = std::str::from_utf8(line) {
                    each(line);
                }
            }
            self.partial.drain(..=end);
        }
        Ok(total)
    }

    /// Events the ring buffer lost (overwritten before they were read), over
    /// its CPUs' `stats`.
    pub fn lost(&self) -> u64 {
        let Ok(cpus) = std::fs::read_dir(self.dir.join("per_cpu")) else {
            return 0;
        };
        cpus.flatten()
            .filter_map(|c| std::fs::read_to_string(c.path().join("stats")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.strip_prefix("overrun:")?.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // An instance whose trace_pipe is open cannot be removed (EBUSY).
        drop(self.pipe.take());
        if let Err(e) = remove(&self.dir, &self.event) {
            log::warn!("{e}");
        }
    }
}

/// Remove the instance at `dir`: its event switched off, then rmdir (where
/// it exists still). For [`Instance`]'s drop, and for a caller's cleanup on
/// a termination signal, where no drop runs (its trace_pipe must be closed
/// first).
pub fn remove(dir: &Path, event: &str) -> Result<(), String> {
    let _ = std::fs::write(dir.join("events").join(event).join("enable"), "0");
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!(
            "cannot remove the trace instance {}: {e}",
            dir.display()
        )),
    }
}

/// Remove instances of `prefix` whose process is gone (killed before it
/// could remove its own); a live process's instance is left alone. The
/// names are `<prefix><pid>-<n>`, and `<prefix><pid>` from before the
/// count was added.
fn remove_stale(instances: &Path, prefix: &str, notes: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(instances) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        notes.push(match std::fs::remove_dir(e.path()) {
            Ok(()) => format!(
                "removed the trace instance {} of a process that is gone",
                e.path().display()
            ),
            Err(err) => format!(
                "cannot remove the trace instance {} of a process that is gone: {err}",
                e.path().display()
            ),
        });
    }
}

/// A number unique in this process, for instances made one after another.
fn unique() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
