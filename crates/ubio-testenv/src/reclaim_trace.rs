//! Pages reclaimed by memory cgroup limits, counted from the kernel's
//! `vmscan:mm_vmscan_memcg_reclaim_end` tracepoint.
//!
//! /proc/vmstat's pgscan/pgsteal count only global reclaim (kswapd and
//! direct reclaim of a node): reclaim forced by a memory cgroup's limit is
//! left out there (mm/vmscan.c counts it only per cgroup), and cgroup v1's
//! memory.stat does not show the per-cgroup counters. Yet in a benchmark
//! confined to a cgroup that is exactly the reclaim a large stream causes.
//! The tracepoint fires once per cgroup reclaim pass with the pages it
//! reclaimed, whatever the cgroup version.
//!
//! A [`MemcgReclaimTrace`] mounts tracefs on a private directory, makes its
//! own trace instance there (so it never touches the global trace buffer
//! or another user's instance), enables the one event
//! there, and sums `nr_reclaimed` from the instance's trace_pipe on a
//! thread. Dropping it (or a termination signal, through [`crate::cleanup`])
//! disables the event, removes the instance and unmounts what it mounted.

use crate::cleanup::{self, CleanupGuard};
use crate::path_context;
use crate::tracefs;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const EVENT: &str = "events/vmscan/mm_vmscan_memcg_reclaim_end";
/// Per-CPU buffer of the instance: at 1 GB/s of reclaim, about 8000 events
/// a second of ~100 bytes each, read every 20 ms.
const BUFFER_KB: &str = "1024";
const POLL: Duration = Duration::from_millis(20);
/// Our instances are named PREFIX<pid>-<n>.
const INSTANCE_PREFIX: &str = "ubio-bench-";

/// Counts pages reclaimed by memory cgroup limits, machine-wide, from its
/// start.
pub struct MemcgReclaimTrace {
    reclaimed: Arc<AtomicU64>,
    events: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    instance: PathBuf,
    // Declared last: runs after the reader stopped (see Drop).
    _cleanup: Option<CleanupGuard>,
}

impl MemcgReclaimTrace {
    /// Starts counting. Fails (with the path and the operation) where
    /// tracefs or the event is missing or we are not root.
    pub fn start() -> io::Result<MemcgReclaimTrace> {
        // Always a mount of our own: another user's (or another
        // benchmark's) mount may go away while we use it. Every tracefs
        // mount shows the same instances.
        let mount = tempfile::Builder::new().prefix("ubio-tracefs-").tempdir()?;
        tracefs::mount(mount.path())?;
        let root = mount.path().to_path_buf();
        remove_orphans(&root.join("instances"));
        let instance = root.join(format!(
            "instances/{INSTANCE_PREFIX}{}-{}",
            std::process::id(),
            unique()
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let cleanup_instance = instance.clone();
        let (stop_reader, reader_stopped) = (stop.clone(), stopped.clone());
        let cleanup = cleanup::register(
            format!("remove trace instance {}", instance.display()),
            move || {
                // On a signal Drop does not run: stop the reader here (an
                // instance with an open trace_pipe cannot be removed).
                stop_reader.store(true, Ordering::Relaxed);
                for _ in 0..50 {
                    if reader_stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(POLL / 2);
                }
                remove_instance(&cleanup_instance);
                tracefs::unmount(mount.path());
                drop(mount);
            },
        );
        fs::create_dir(&instance).map_err(|e| path_context(e, "make trace instance", &instance))?;
        write(&instance.join("buffer_size_kb"), BUFFER_KB)?;
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.join("trace_pipe"))
            .map_err(|e| path_context(e, "open", &instance.join("trace_pipe")))?;
        write(&instance.join(EVENT).join("enable"), "1")?;

        let reclaimed = Arc::new(AtomicU64::new(0));
        let events = Arc::new(AtomicU64::new(0));
        let reader = {
            let (reclaimed, events, stop) = (reclaimed.clone(), events.clone(), stop.clone());
            std::thread::Builder::new()
                .name("memcg-reclaim-trace".into())
                .spawn(move || {
                    read_events(pipe, &reclaimed, &events, &stop);
                    stopped.store(true, Ordering::Relaxed);
                })?
        };
        Ok(MemcgReclaimTrace {
            reclaimed,
            events,
            stop,
            reader: Some(reader),
            instance,
            _cleanup: Some(cleanup),
        })
    }

    /// Pages reclaimed by cgroup limit reclaim since the start (read up to
    /// the last poll, at most 20 ms ago).
    pub fn reclaimed_pages(&self) -> u64 {
        self.reclaimed.load(Ordering::Relaxed)
    }

    /// Reclaim passes seen since the start.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// The instance's directory (for messages).
    pub fn instance(&self) -> &Path {
        &self.instance
    }
}

impl Drop for MemcgReclaimTrace {
    fn drop(&mut self) {
        // Stop the event first, then the reader (which drains and closes the
        // pipe): an instance with an open trace_pipe cannot be removed.
        let _ = write(&self.instance.join(EVENT).join("enable"), "0");
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        // _cleanup drops next: removes the instance and the mount.
    }
}

fn read_events(mut pipe: File, reclaimed: &AtomicU64, events: &AtomicU64, stop: &AtomicBool) {
    let mut buf = vec![0u8; 1 << 16];
    let mut partial = Vec::new();
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => std::thread::sleep(POLL),
            Ok(n) => {
                partial.extend_from_slice(&buf[..n]);
                let end = partial
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                for line in partial[..end].split(|&b| b == b'\n') {
                    if let Some(pages) = nr_reclaimed(line) {
                        reclaimed.fetch_add(pages, Ordering::Relaxed);
                        events.fetch_add(1, Ordering::Relaxed);
                    }
                }
                partial.drain(..end);
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(POLL);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::warn!("memcg reclaim trace: read trace_pipe: {e}");
                return;
            }
        }
    }
}

/// `nr_reclaimed=N` of one trace line
/// ("cat-12 [001] ..... 81.5: mm_vmscan_memcg_reclaim_end: nr_reclaimed=32").
fn nr_reclaimed(line: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(line).ok()?;
    let (_, rest) = line.split_once("mm_vmscan_memcg_reclaim_end: nr_reclaimed=")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Removes the instances left by benchmarks that were killed (SIGKILL runs
/// no cleanup): each keeps its per-CPU buffers, 1 MiB a CPU, until removed.
/// Only ours whose process is gone; an instance of a live process, or of a
/// pid that was reused, stays.
fn remove_orphans(instances: &Path) {
    let Ok(entries) = fs::read_dir(instances) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(INSTANCE_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            log::info!(
                "removing trace instance {} of a process gone",
                entry.path().display()
            );
            remove_instance(&entry.path());
        }
    }
}

fn remove_instance(instance: &Path) {
    let _ = write(&instance.join(EVENT).join("enable"), "0");
    if instance.exists() {
        if let Err(e) = fs::remove_dir(instance) {
            log::warn!("remove trace instance {}: {e}", instance.display());
        }
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| path_context(e, &format!("write {value} to"), path))
}

fn unique() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trace_lines() {
        let line = b"           cat-2121    [001] .....   812.345678: mm_vmscan_memcg_reclaim_end: nr_reclaimed=37";
        assert_eq!(nr_reclaimed(line), Some(37));
        assert_eq!(
            nr_reclaimed(b"cat-1 [0] 1.0: mm_vmscan_memcg_reclaim_begin: order=0"),
            None
        );
        assert_eq!(nr_reclaimed(b""), None);
    }
}
