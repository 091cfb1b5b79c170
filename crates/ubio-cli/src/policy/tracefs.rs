//! The daemon's own trace instance: kswapd's wakes by the order asked
//! (`vmscan:mm_vmscan_kswapd_wake`), which /proc/vmstat does not count.
//!
//! An instance is a directory of its own under tracefs's `instances/`
//! (made with mkdir, removed with rmdir): its own ring buffer and event
//! switches, so the daemon neither reads nor changes what an operator's own
//! tracing does at the top level. The instance is removed when [`Instance`]
//! is dropped: at the daemon's exit, on SIGTERM/SIGINT (the loop ends and
//! unwinds) and on an error that ends it. One left by a daemon that was
//! killed (SIGKILL) is removed by the next start ([`Instance::create`]),
//! only when the process that made it is gone.
//!
//! This kernel has no hist triggers (CONFIG_HIST_TRIGGERS off), so the
//! events are read whole from `trace_pipe` (non-blocking, drained on each
//! look) and counted here. Only std's file calls and
//! [`ubio::sys::fs_magic`] (fstatfs) are needed: no syscall of its own.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use ubio::sys::FsMagic;

/// Where tracefs is mounted, the second where only debugfs is.
const ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// The event, below a tracefs root or an instance.
const EVENT: &str = "events/vmscan/mm_vmscan_kswapd_wake";
/// The instances' names: this prefix and the daemon's pid.
const PREFIX: &str = "ubio-policy-";
/// The ring buffer per CPU: a wake is about 40 bytes, so some 1,600 wakes
/// a second per CPU between two reads (the daemon reads every second;
/// the busiest traced run woke kswapd 955 times in 16 s).
const BUFFER_KB: &str = "64";

/// The daemon's trace instance, counting kswapd's wakes by order.
pub struct Instance {
    dir: PathBuf,
    /// `trace_pipe`, opened non-blocking; closed before the rmdir.
    pipe: Option<File>,
    /// The end of the last read that was not a whole line yet.
    partial: Vec<u8>,
    wakes: BTreeMap<u32, u64>,
}

impl Instance {
    /// Make the instance `ubio-policy-PID` and enable the event in it.
    /// The error is one line: which step failed and why (no tracefs, not
    /// root, a read-only /sys as systemd's ProtectKernelTunables makes it,
    /// a kernel without the event). `notes` gets a line per stale instance
    /// removed.
    pub fn create(notes: &mut Vec<String>) -> Result<Instance, String> {
        let root = root()?;
        if !root.join(EVENT).is_dir() {
            return Err(format!(
                "this kernel has no vmscan:mm_vmscan_kswapd_wake event ({} is missing)",
                root.join(EVENT).display()
            ));
        }
        let instances = root.join("instances");
        remove_stale(&instances, notes);
        let dir = instances.join(format!("{PREFIX}{}", std::process::id()));
        if dir.exists() {
            // Ours from a daemon that had this pid and was killed.
            let _ = std::fs::remove_dir(&dir);
        }
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot make the trace instance {}: {e}", dir.display()))?;
        // From here on, Drop removes it whatever fails.
        let mut me = Instance {
            dir,
            pipe: None,
            partial: Vec::new(),
            wakes: BTreeMap::new(),
        };
        let set = |file: &str, value: &str| {
            let p = me.dir.join(file);
            std::fs::write(&p, value).map_err(|e| format!("write {value} to {}: {e}", p.display()))
        };
        set("buffer_size_kb", BUFFER_KB)?;
        set(&format!("{EVENT}/enable"), "1")?;
        let pipe_path = me.dir.join("trace_pipe");
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe_path)
            .map_err(|e| format!("open {}: {e}", pipe_path.display()))?;
        me.pipe = Some(pipe);
        Ok(me)
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Read what the kernel traced since the last call; the wakes since the
    /// instance was made, by order.
    pub fn wakes(&mut self) -> io::Result<&BTreeMap<u32, u64>> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(&self.wakes);
        };
        let mut buf = [0u8; 16 << 10];
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
            self.partial.extend_from_slice(&buf[..n]);
            let whole = match self.partial.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => continue,
            };
            for line in self.partial[..whole].split(|&b| b == b'\n') {
                if let Some(order) = std::str::from_utf8(line).ok().and_then(wake_order) {
                    *self.wakes.entry(order).or_default() += 1;
                }
            }
            self.partial.drain(..whole);
        }
        Ok(&self.wakes)
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
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            super::log(&format!(
                "cannot remove the trace instance {}: {e}",
                self.dir.display()
            ));
        }
    }
}

/// The order of a `mm_vmscan_kswapd_wake` line of trace_pipe
/// (`kswapd0-90 [001] d..1. 1234.5: mm_vmscan_kswapd_wake: nid=0 order=9`:
/// the event's print fmt is "nid=%d order=%d"), None for any other line,
/// a line written to trace_marker that looks like one too (the event's
/// name must follow the timestamp).
pub fn wake_order(line: &str) -> Option<u32> {
    let (head, fields) = line.split_once(": mm_vmscan_kswapd_wake: ")?;
    let stamp = head.rsplit(' ').next()?;
    if stamp.is_empty() || !stamp.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    fields
        .split_whitespace()
        .find_map(|f| f.strip_prefix("order="))?
        .parse()
        .ok()
}

/// The first of [`ROOTS`] where tracefs is mounted.
fn root() -> Result<PathBuf, String> {
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

/// Remove instances of daemons that are gone (killed before they could
/// remove theirs); a live process's instance is left alone.
fn remove_stale(instances: &Path, notes: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(instances) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        notes.push(match std::fs::remove_dir(e.path()) {
            Ok(()) => format!(
                "removed the trace instance {} of a daemon that is gone",
                e.path().display()
            ),
            Err(err) => format!(
                "cannot remove the trace instance {} of a daemon that is gone: {err}",
                e.path().display()
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_lines_give_their_order_and_others_nothing() {
        let l = "         kswapd0-90      [001] d..1.  1234.567890: mm_vmscan_kswapd_wake: nid=0 order=9";
        assert_eq!(wake_order(l), Some(9));
        assert_eq!(
            wake_order("kswapd0-90 [000] ..... 5.0: mm_vmscan_kswapd_wake: nid=1 zid=2 order=0"),
            Some(0)
        );
        assert_eq!(
            wake_order(
                "tar-7 [001] ..... 5.0: mm_vmscan_wakeup_kswapd: nid=0 order=9 gfp_flags=GFP_NOFS"
            ),
            None
        );
        assert_eq!(wake_order("CPU:1 [LOST 12 EVENTS]"), None);
        assert_eq!(
            wake_order(
                "sh-5 [000] ..... 9.1: tracing_mark_write: mm_vmscan_kswapd_wake: nid=0 order=9"
            ),
            None,
            "a marker is no wake"
        );
        assert_eq!(wake_order(""), None);
    }

    /// The event's print format on this kernel is what [`wake_order`]
    /// reads (where tracefs can be read).
    #[test]
    fn this_kernels_event_prints_what_wake_order_reads() {
        let name = "this_kernels_event_prints_what_wake_order_reads";
        let _mounted = match ubio_testenv::tracefs::system() {
            Ok(m) => m,
            Err(e) => return ubio_testenv::skip(name, &format!("no tracefs: {e}")),
        };
        let Ok(root) = root() else {
            return ubio_testenv::skip(name, "no tracefs");
        };
        let format = root.join(EVENT).join("format");
        let Ok(text) = std::fs::read_to_string(&format) else {
            return ubio_testenv::skip(name, &format!("no {}", format.display()));
        };
        assert!(text.contains("print fmt: \"nid=%d order=%d\""), "{text}");
    }
}
