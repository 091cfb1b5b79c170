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
//! own trace instance there (ubio_engine::tracefs, the one the policy
//! daemon uses: it never touches the global trace buffer or another user's
//! instance) with the one event, and sums `nr_reclaimed` from the
//! instance's trace_pipe on a thread. Dropping it (or a termination
//! signal, through [`crate::cleanup`]) disables the event, removes the
//! instance and unmounts what it mounted.

use crate::cleanup::{self, CleanupGuard};
use crate::tracefs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use ubio_engine::tracefs::{self as instances, Instance};

/// The event, below a tracefs root's `events/`.
const EVENT: &str = "vmscan/mm_vmscan_memcg_reclaim_end";
/// Per-CPU buffer of the instance: at 1 GB/s of reclaim, about 8000 events
/// a second of ~100 bytes each, read every 20 ms.
const BUFFER_KB: u32 = 1024;
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
        let mut notes = Vec::new();
        let made = Instance::create(mount.path(), INSTANCE_PREFIX, EVENT, BUFFER_KB, &mut notes);
        for n in notes {
            log::info!("{n}");
        }
        let mut instance = match made {
            Ok(i) => i,
            Err(e) => {
                tracefs::unmount(mount.path());
                return Err(io::Error::other(e));
            }
        };
        let dir = instance.dir().to_path_buf();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let (stop_reader, reader_stopped, cleanup_dir) =
            (stop.clone(), stopped.clone(), dir.clone());
        let cleanup = cleanup::register(
            format!("remove trace instance {}", dir.display()),
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
                if let Err(e) = instances::remove(&cleanup_dir, EVENT) {
                    log::warn!("{e}");
                }
                tracefs::unmount(mount.path());
                drop(mount);
            },
        );

        let reclaimed = Arc::new(AtomicU64::new(0));
        let events = Arc::new(AtomicU64::new(0));
        let reader = {
            let (reclaimed, events, stop) = (reclaimed.clone(), events.clone(), stop.clone());
            std::thread::Builder::new()
                .name("memcg-reclaim-trace".into())
                .spawn(move || {
                    loop {
                        let last = stop.load(Ordering::Relaxed);
                        let read = instance.read_lines(|line| {
                            if let Some(pages) = nr_reclaimed(line) {
                                reclaimed.fetch_add(pages, Ordering::Relaxed);
                                events.fetch_add(1, Ordering::Relaxed);
                            }
                        });
                        if let Err(e) = read {
                            log::warn!("memcg reclaim trace: {e}");
                            break;
                        }
                        if last {
                            break;
                        }
                        std::thread::sleep(POLL);
                    }
                    // Closes trace_pipe and removes the instance.
                    drop(instance);
                    stopped.store(true, Ordering::Relaxed);
                })?
        };
        Ok(MemcgReclaimTrace {
            reclaimed,
            events,
            stop,
            reader: Some(reader),
            instance: dir,
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
        // The reader reads what is left, then removes the instance.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        // _cleanup drops next: unmounts.
    }
}

/// `nr_reclaimed=N` of one trace line
/// ("cat-12 [001] ..... 81.5: mm_vmscan_memcg_reclaim_end: nr_reclaimed=32").
fn nr_reclaimed(line: &str) -> Option<u64> {
    let (_, rest) = line.split_once("mm_vmscan_memcg_reclaim_end: nr_reclaimed=")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trace_lines() {
        let line = "           cat-2121    [001] .....   812.345678: mm_vmscan_memcg_reclaim_end: nr_reclaimed=37";
        assert_eq!(nr_reclaimed(line), Some(37));
        assert_eq!(
            nr_reclaimed("cat-1 [0] 1.0: mm_vmscan_memcg_reclaim_begin: order=0"),
            None
        );
        assert_eq!(nr_reclaimed(""), None);
    }
}
