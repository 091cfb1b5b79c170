//! Where the dataset lives: a fresh subdirectory of a given directory, or
//! a filesystem on a loop device (backing file in /dev/shm or on the disk,
//! optionally throttled); removed on drop, on failure and on Ctrl-C.

use crate::harness::schema::{Backing, GlobalPressure, Target, Workload};
use std::io;
use std::path::{Path, PathBuf};
use ubio_testenv::cleanup::{self, CleanupGuard};
use ubio_testenv::scratchfs::available_bytes;
use ubio_testenv::scratchfs::{FsKind, ScratchFs, ScratchOpts};

/// Room kept free beyond what the benchmark writes.
pub const SPACE_MARGIN: u64 = 64 << 20;

/// The largest filler file of a global-pressure run (see
/// `process::FREE_KEPT`): the memory the balloon leaves can be more than
/// asked (others free theirs while it inflates); twice it and 256 MiB.
pub fn filler_room(leave: u64) -> u64 {
    2 * leave + (256 << 20)
}

/// The space a benchmark needs on its target: the dataset (twice for
/// copies), the victim's hot file, the filler of global pressure, a margin.
pub fn space_needed(w: &Workload, victim_hot: Option<u64>, global: Option<GlobalPressure>) -> u64 {
    w.kind.copies() * w.dataset_bytes
        + victim_hot.unwrap_or(0)
        + global.map_or(0, |p| filler_room(p.leave_bytes))
        + SPACE_MARGIN
}

/// The benchmark's directory and what it sits on.
pub struct BenchTarget {
    pub dir: PathBuf,
    pub filesystem: String,
    pub device: String,
    /// Declared before `_fs`: the directory goes before its filesystem.
    _guard: CleanupGuard,
    _fs: Option<ScratchFs>,
}

/// Makes the target, after checking it has room for `need` bytes. With
/// `preallocate`, a loop device's backing file is allocated whole (in
/// /dev/shm: its memory taken before a balloon sizes the pressure).
pub fn make(target: &Target, need: u64, preallocate: bool) -> io::Result<BenchTarget> {
    match target {
        Target::Dir { path } => {
            let parent = path
                .canonicalize()
                .map_err(|e| io::Error::new(e.kind(), format!("--dir {}: {e}", path.display())))?;
            check_room(&parent, need)?;
            let (dir, guard) = make_work_dir(&parent)?;
            let (filesystem, device) = describe_mount(&parent);
            Ok(BenchTarget {
                dir,
                filesystem,
                device,
                _guard: guard,
                _fs: None,
            })
        }
        Target::Loop {
            filesystem,
            backing,
            size_bytes,
            throttle_mb_per_s,
        } => {
            let kind: FsKind = filesystem.parse()?;
            if need > *size_bytes {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a {} MiB filesystem is too small: the benchmark needs {} MiB (dataset, copies, hot file, filler, margin)",
                        size_bytes >> 20,
                        need >> 20
                    ),
                ));
            }
            let opts = match backing {
                Backing::Shm => ScratchOpts::in_shm(),
                Backing::Disk => ScratchOpts::default().direct_io(true),
            }
            .preallocate(preallocate);
            let fs = ScratchFs::create(kind, *size_bytes, &opts)?;
            let mut device = match backing {
                Backing::Shm if preallocate => "loop on /dev/shm (preallocated)".to_owned(),
                Backing::Shm => "loop on /dev/shm".to_owned(),
                Backing::Disk => {
                    let under = describe_mount(&std::env::temp_dir()).1;
                    let dio = if fs.direct_io() == Some(true) {
                        " (direct I/O)"
                    } else {
                        ""
                    };
                    format!("loop{dio} on {under}")
                }
            };
            if let Some(dev) = fs.loop_device() {
                device.push_str(&format!(" ({})", dev.display()));
            }
            if let Some(mb) = throttle_mb_per_s {
                let bps = (mb * 1e6) as u64;
                fs.set_write_bps(bps)?;
                fs.set_read_bps(bps)?;
                device.push_str(&format!(", throttled to {mb} MB/s"));
            }
            let (dir, guard) = make_work_dir(fs.mount_point())?;
            Ok(BenchTarget {
                dir,
                filesystem: fs.fs_type().to_owned(),
                device,
                _guard: guard,
                _fs: Some(fs),
            })
        }
    }
}

fn check_room(dir: &Path, need: u64) -> io::Result<()> {
    let free = available_bytes(dir)?;
    if free < need {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "not enough free space in {}: the benchmark needs {} MiB (dataset, copies, hot file, \
                 the filler of global pressure and a {} MiB margin) and {} MiB is free; use a smaller \
                 --dataset or another --dir",
                dir.display(),
                need >> 20,
                SPACE_MARGIN >> 20,
                free >> 20
            ),
        ));
    }
    Ok(())
}

/// `<parent>/ubio-bench-<pid>-<n>`, removed with everything in it (only
/// files the benchmark made go there) when the guard runs.
fn make_work_dir(parent: &Path) -> io::Result<(PathBuf, CleanupGuard)> {
    let pid = std::process::id();
    let dir = (0..1000)
        .map(|n| parent.join(format!("ubio-bench-{pid}-{n}")))
        .find(|p| std::fs::create_dir(p).is_ok())
        .ok_or_else(|| {
            io::Error::other(format!("cannot make a directory in {}", parent.display()))
        })?;
    let d = dir.clone();
    let guard = cleanup::register(format!("remove {}", dir.display()), move || {
        if let Err(e) = std::fs::remove_dir_all(&d) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!("ubio bench: cannot remove {}: {e}", d.display());
            }
        }
    });
    Ok((dir, guard))
}

/// The filesystem type and device of the mount holding `path`, from
/// /proc/self/mountinfo (the entry with the same device number).
pub fn describe_mount(path: &Path) -> (String, String) {
    use std::os::unix::fs::MetadataExt;
    let unknown = || ("unknown".to_owned(), "unknown".to_owned());
    let Ok(meta) = std::fs::metadata(path) else {
        return unknown();
    };
    let dev = meta.dev();
    let want = (libc::major(dev), libc::minor(dev));
    let Ok(mounts) = ubio::mounts::mounts() else {
        return unknown();
    };
    mounts
        .into_iter()
        .rev()
        .find(|m| m.dev == want)
        .map_or_else(unknown, |m| (m.fstype, m.source))
}
