//! Throwaway filesystems on loop devices, and tmpfs mounts, for tests and
//! benchmarks.
//!
//! ubio's behaviour depends on the filesystem (RWF_DONTCACHE works on ext4 and
//! xfs, not on btrfs or tmpfs), so tests need each kind on demand, not just
//! whatever /tmp is. [`ScratchFs::create`] makes a sparse backing file, attaches
//! it with `losetup`, runs mkfs and mounts it at a fresh temporary directory;
//! dropping the guard (or a panic, or SIGINT/SIGTERM via [`crate::cleanup`])
//! unmounts it, detaches the loop device and deletes the file and directories.
//!
//! Two fault fixtures exercise ubio's "writeback errors are never lost" rule:
//! - [`ScratchFs::create_eio`]: a loop device over a sealable memfd.
//!   [`ScratchFs::fail_writes`] adds `F_SEAL_WRITE`; from then on every write
//!   the loop device passes to the memfd gets EPERM, which the loop driver
//!   reports as BLK_STS_IOERR, so writeback and `fsync` fail with **EIO**
//!   (ext4, xfs and btrfs alike; xfs then shuts down, ext4 aborts its journal).
//! - [`ScratchFs::create_enospc`]: the backing file lives in a tmpfs smaller
//!   than the filesystem. Once the filesystem's writes exceed that room the
//!   loop device fails them, but with BLK_STS_NOSPC ("I/O error 3" in dmesg),
//!   not BLK_STS_IOERR: `fsync` reports **ENOSPC** (btrfs: ENOSPC, then EIO once
//!   it has aborted the transaction). Measured on Linux 6.18.
//!
//! Size minimums (measured with e2fsprogs 1.47, xfsprogs 6.1, btrfs-progs 6.2):
//! ext4 needs 8 MiB to get a journal (mkfs.ext4 accepts 1 MiB but drops the
//! journal below 8 MiB), xfs 300 MiB (mkfs.xfs refuses less, and zeroes a
//! 64 MiB log), btrfs 109 MiB in its normal layout and 16 MiB in mixed mode
//! (`-M`, data and metadata in shared block groups), which is used below
//! [`BTRFS_MIXED_BELOW`]; f2fs (only in the guest of scripts/guest/run.sh)
//! 128 MiB (f2fs-tools 1.15). Smaller sizes fail with an error that says so.
//!
//! Loop devices are set to direct I/O by default (if the backing filesystem
//! supports it), so that the backing file's own page cache does not double the
//! memory a benchmark is measuring. Where root is needed: everything here.

use std::ffi::{CString, OsStr};
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::cleanup::{self, CleanupGuard};
use crate::{context, require_tool, run_tool};

mod kind;
mod memfd;
mod teardown;
mod throttle;

use kind::make_fs;
pub use kind::{FsKind, BTRFS_MIXED_BELOW};
pub use memfd::available_bytes;
use memfd::{check_free_space, copy_data, make_memfd};
pub use teardown::is_mounted;
use teardown::{loop_backing_file, make_temp_dir, register_teardown, unmount};
use throttle::dev_major_minor;

const MIB: u64 = 1 << 20;

/// Options for [`ScratchFs::create`].
#[derive(Debug, Clone)]
pub struct ScratchOpts {
    /// Where the backing file goes (inside a fresh subdirectory). `None`: the
    /// system temporary directory, i.e. the working filesystem. /dev/shm keeps
    /// the device in memory (see [`ScratchOpts::in_shm`]).
    pub backing_dir: Option<PathBuf>,
    /// Ask the loop device for direct I/O on its backing file (default on). If
    /// the backing filesystem refuses, the device stays buffered and a warning
    /// is logged; [`ScratchFs::direct_io`] tells which it got.
    pub direct_io: bool,
    /// Extra arguments for mkfs, before the device name.
    pub mkfs_args: Vec<String>,
    /// Extra mount options (joined with commas, after the defaults: ext4 gets
    /// `noinit_itable` so no background inode-table zeroing disturbs timings).
    pub mount_options: Vec<String>,
    /// Allocate the whole backing file when it is made (fallocate), instead
    /// of leaving it sparse: in /dev/shm its memory is then taken at once,
    /// before a benchmark sizes its memory pressure, as the pmem that a
    /// machine carves out of its RAM at boot.
    pub preallocate: bool,
}

impl Default for ScratchOpts {
    fn default() -> Self {
        ScratchOpts {
            backing_dir: None,
            direct_io: true,
            mkfs_args: Vec::new(),
            mount_options: Vec::new(),
            preallocate: false,
        }
    }
}

impl ScratchOpts {
    /// Backing file in /dev/shm: a device as fast as memory, for measuring
    /// software overhead rather than the disk.
    pub fn in_shm() -> Self {
        ScratchOpts {
            backing_dir: Some(PathBuf::from("/dev/shm")),
            ..Default::default()
        }
    }

    /// Sets [`ScratchOpts::backing_dir`].
    pub fn backing_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.backing_dir = Some(dir.into());
        self
    }

    /// Sets [`ScratchOpts::direct_io`].
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }

    /// Sets [`ScratchOpts::preallocate`].
    pub fn preallocate(mut self, on: bool) -> Self {
        self.preallocate = on;
        self
    }
}

/// Everything a scratch filesystem made, in the order teardown undoes it.
/// Shared between the [`ScratchFs`] and its cleanup closure, which may run on
/// the signal thread; each field is taken when undone, so teardown is
/// idempotent and also undoes a half-finished creation.
#[derive(Default)]
struct Resources {
    /// blkio v1 throttle files with a rule for our device, and "MAJ:MIN".
    throttles: Vec<(PathBuf, String)>,
    /// Our loop device's queue settings changed, and their old values.
    queue_settings: Vec<(PathBuf, String)>,
    mounted_at: Option<PathBuf>,
    loop_dev: Option<PathBuf>,
    /// The backing file as the loop device reports it, to wait for detach.
    loop_backing: Option<String>,
    memfd: Option<OwnedFd>,
    backing_file: Option<PathBuf>,
    /// Directories we made, removed last-first (never recursively: a mount
    /// point that failed to unmount must not have its contents deleted).
    dirs: Vec<PathBuf>,
}

/// A mounted scratch filesystem; unmounted and removed on drop.
pub struct ScratchFs {
    fs_type: &'static str,
    kind: Option<FsKind>,
    size_bytes: u64,
    mount_point: PathBuf,
    loop_dev: Option<PathBuf>,
    dev_numbers: Option<(u32, u32)>,
    backing_file: Option<PathBuf>,
    res: Arc<Mutex<Resources>>,
    /// Declared before `container`: this filesystem goes before the tmpfs
    /// that holds its backing file.
    _cleanup: CleanupGuard,
    container: Option<Box<ScratchFs>>,
}

impl fmt::Debug for ScratchFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScratchFs")
            .field("fs_type", &self.fs_type)
            .field("size_bytes", &self.size_bytes)
            .field("mount_point", &self.mount_point)
            .field("loop_dev", &self.loop_dev)
            .field("backing_file", &self.backing_file)
            .field("container", &self.container)
            .finish()
    }
}

fn lock(res: &Mutex<Resources>) -> MutexGuard<'_, Resources> {
    res.lock().unwrap_or_else(|e| e.into_inner())
}

/// The backing store for a loop device.
#[derive(Clone, Copy)]
enum Backing<'a> {
    /// A sparse file in a fresh directory under this one.
    File { dir: &'a Path, check_space: bool },
    /// A sealable memfd (for [`ScratchFs::create_eio`]).
    Memfd,
    /// A memfd holding a copy of this device's bytes, mounted as they are
    /// (no mkfs: for [`ScratchFs::copy_of_disk`]).
    CopyOf(BorrowedFd<'a>),
}

impl ScratchFs {
    /// Makes a `size_bytes` filesystem of `kind` on a loop device over a sparse
    /// file and mounts it at a fresh temporary directory.
    ///
    /// Fails if a tool is missing ("mkfs.xfs not found: install xfsprogs"), if
    /// `size_bytes` is below [`FsKind::min_size_bytes`], or if the backing
    /// directory has less free space than `size_bytes` (the file is sparse, but
    /// a benchmark may fill it). Any partial setup is undone before returning.
    pub fn create(kind: FsKind, size_bytes: u64, opts: &ScratchOpts) -> io::Result<ScratchFs> {
        let dir = opts.backing_dir.clone().unwrap_or_else(std::env::temp_dir);
        Self::create_on(
            kind,
            size_bytes,
            opts,
            Backing::File {
                dir: &dir,
                check_space: true,
            },
        )
    }

    /// Mounts a tmpfs of `size_bytes` (rounded up to pages) at a fresh
    /// temporary directory, for the tmpfs cases and as a container for backing
    /// files. `loop_device()` and `dev_numbers()` are `None`.
    pub fn tmpfs(size_bytes: u64) -> io::Result<ScratchFs> {
        if size_bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "tmpfs size must be > 0",
            ));
        }
        let mount = require_tool("mount")?;
        let res = Arc::new(Mutex::new(Resources::default()));
        let cleanup = register_teardown(&res, "tmpfs");
        let mount_point = make_temp_dir(&std::env::temp_dir(), "ubio-tmpfs-", &res)?;
        let size_opt = format!("size={size_bytes},mode=0755");
        run_tool(
            &mount,
            &[
                "-t".as_ref(),
                "tmpfs".as_ref(),
                "-o".as_ref(),
                size_opt.as_ref(),
                "ubio-scratch".as_ref(),
                mount_point.as_os_str(),
            ],
        )?;
        lock(&res).mounted_at = Some(mount_point.clone());
        log::debug!(
            "mounted tmpfs ({size_bytes} bytes) at {}",
            mount_point.display()
        );
        Ok(ScratchFs {
            fs_type: "tmpfs",
            kind: None,
            size_bytes,
            mount_point,
            loop_dev: None,
            dev_numbers: None,
            backing_file: None,
            res,
            _cleanup: cleanup,
            container: None,
        })
    }

    /// A filesystem of `fs_size` whose device runs out of room after
    /// `backing_room` bytes: the backing file is sparse, in a tmpfs of
    /// `backing_room` bytes. Writeback beyond that fails; `fsync` reports
    /// ENOSPC (see the module docs; for EIO use [`ScratchFs::create_eio`]).
    ///
    /// mkfs's own writes count against the room: about 5 MiB for ext4 and
    /// btrfs at 128 MiB, 65 MiB for xfs (its log is zeroed).
    pub fn create_enospc(kind: FsKind, fs_size: u64, backing_room: u64) -> io::Result<ScratchFs> {
        if fs_size <= backing_room {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("fs_size ({fs_size}) must exceed backing_room ({backing_room}) for writes to fail"),
            ));
        }
        let container = ScratchFs::tmpfs(backing_room)?;
        let opts = ScratchOpts::default();
        let mut fs = Self::create_on(
            kind,
            fs_size,
            &opts,
            Backing::File {
                dir: container.mount_point(),
                check_space: false,
            },
        )?;
        fs.container = Some(Box::new(container));
        Ok(fs)
    }

    /// A filesystem of `fs_size` on a loop device over a memfd, whose writes
    /// can be made to fail with EIO by [`ScratchFs::fail_writes`]. Until then
    /// it behaves like any other scratch filesystem (its data is in memory).
    pub fn create_eio(kind: FsKind, fs_size: u64) -> io::Result<ScratchFs> {
        Self::create_on(kind, fs_size, &ScratchOpts::default(), Backing::Memfd)
    }

    /// From now on, every write that reaches the device fails: writeback of
    /// dirty pages, journal and metadata writes alike, so `fsync` returns EIO.
    /// Reads keep working. Irreversible. Only for [`ScratchFs::create_eio`].
    pub fn fail_writes(&self) -> io::Result<()> {
        let res = lock(&self.res);
        let Some(fd) = res.memfd.as_ref() else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("fail_writes on {}: only filesystems from ScratchFs::create_eio can fail writes", self.mount_point.display()),
            ));
        };
        // SAFETY: fd is a valid memfd owned by `res`; F_ADD_SEALS takes an int.
        let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_WRITE) };
        if r < 0 {
            return Err(context(
                io::Error::last_os_error(),
                format_args!(
                    "seal the memfd behind {} against writes",
                    self.describe_dev()
                ),
            ));
        }
        log::debug!("{}: writes now fail with EIO", self.describe_dev());
        Ok(())
    }

    /// Another filesystem, mounted from a copy of this one's device as the
    /// device holds it now: what a reboot would find (the journal is
    /// recovered by the mount). For a filesystem of
    /// [`ScratchFs::create_eio`] after [`ScratchFs::fail_writes`], which
    /// nothing reaches any more and which may have shut down after the
    /// fault (ext4 from Linux 6.12 refuses every open once its journal
    /// aborted): the data it had on the device is read from the copy.
    /// Not for btrfs, which cannot mount a copy beside its original (one
    /// fsid on two devices).
    pub fn copy_of_disk(&self) -> io::Result<ScratchFs> {
        let res = lock(&self.res);
        let (Some(kind), Some(fd)) = (self.kind, res.memfd.as_ref()) else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "copy_of_disk of {}: only filesystems from ScratchFs::create_eio can be copied",
                    self.mount_point.display()
                ),
            ));
        };
        if kind == FsKind::Btrfs {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "copy_of_disk of {}: btrfs cannot mount a copy beside its original",
                    self.describe_dev()
                ),
            ));
        }
        Self::create_on(
            kind,
            self.size_bytes,
            &ScratchOpts::default(),
            Backing::CopyOf(fd.as_fd()),
        )
    }

    /// What an administrator does after a full device made the filesystem
    /// give up (btrfs aborts its transaction and then fails reads with EIO):
    /// the device gets room again (for [`ScratchFs::create_enospc`], its
    /// tmpfs grows to the filesystem's size) and the filesystem is unmounted
    /// and mounted again from the same device at the same place.
    pub fn recover(&self) -> io::Result<()> {
        let mount = require_tool("mount")?;
        if let Some(container) = &self.container {
            let size = format!("remount,size={}", self.size_bytes);
            run_tool(
                &mount,
                &[
                    "-o".as_ref(),
                    size.as_ref(),
                    container.mount_point().as_os_str(),
                ],
            )?;
        }
        let (Some(kind), Some(dev)) = (self.kind, &self.loop_dev) else {
            return Err(io::Error::other("a tmpfs has no device to mount again"));
        };
        unmount(&self.mount_point);
        run_tool(
            &mount,
            &[
                "-t".as_ref(),
                kind.name().as_ref(),
                dev.as_os_str(),
                self.mount_point.as_os_str(),
            ],
        )?;
        Ok(())
    }

    /// Where the filesystem is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// The loop device, e.g. `/dev/loop3` (`None` for tmpfs).
    pub fn loop_device(&self) -> Option<&Path> {
        self.loop_dev.as_deref()
    }

    /// The loop device's major and minor numbers (`None` for tmpfs).
    pub fn dev_numbers(&self) -> Option<(u32, u32)> {
        self.dev_numbers
    }

    /// The backing file (`None` for tmpfs and memfd-backed devices).
    pub fn backing_file(&self) -> Option<&Path> {
        self.backing_file.as_deref()
    }

    /// The filesystem kind (`None` for tmpfs).
    pub fn kind(&self) -> Option<FsKind> {
        self.kind
    }

    /// The type as mount shows it: "ext4", "xfs", "btrfs" or "tmpfs".
    pub fn fs_type(&self) -> &'static str {
        self.fs_type
    }

    /// The size asked for.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Whether the loop device does direct I/O on its backing file, read from
    /// /sys/block/loopN/loop/dio (`None` for tmpfs or if unreadable).
    pub fn direct_io(&self) -> Option<bool> {
        let dev = self.loop_dev.as_ref()?;
        let name = dev.file_name()?.to_str()?;
        let v = fs::read_to_string(format!("/sys/block/{name}/loop/dio")).ok()?;
        Some(v.trim() == "1")
    }

    fn describe_dev(&self) -> String {
        match &self.loop_dev {
            Some(d) => format!("{} ({})", d.display(), self.mount_point.display()),
            None => self.mount_point.display().to_string(),
        }
    }

    fn create_on(
        kind: FsKind,
        size_bytes: u64,
        opts: &ScratchOpts,
        backing: Backing<'_>,
    ) -> io::Result<ScratchFs> {
        let min = kind.min_size_bytes();
        if size_bytes < min {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {kind} scratch filesystem needs at least {} MiB ({}); asked for {:.1} MiB",
                    min / MIB,
                    kind.min_size_reason(),
                    size_bytes as f64 / MIB as f64
                ),
            ));
        }
        let mkfs = require_tool(kind.mkfs_tool())?;
        let losetup = require_tool("losetup")?;
        let mount = require_tool("mount")?;
        require_tool("umount")?;

        let res = Arc::new(Mutex::new(Resources::default()));
        let cleanup = register_teardown(&res, kind.name());

        // 1. Backing store.
        let (attach_path, backing_file) = match backing {
            Backing::File { dir, check_space } => {
                if check_space {
                    check_free_space(dir, size_bytes)?;
                }
                let sub = make_temp_dir(dir, "ubio-scratch-", &res)?;
                let file = sub.join(format!("{kind}.img"));
                let f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&file)
                    .map_err(|e| {
                        context(e, format_args!("create backing file {}", file.display()))
                    })?;
                lock(&res).backing_file = Some(file.clone());
                f.set_len(size_bytes).map_err(|e| {
                    context(
                        e,
                        format_args!("size backing file {} to {size_bytes} bytes", file.display()),
                    )
                })?;
                if opts.preallocate {
                    ubio::sys::fallocate(f.as_fd(), 0, 0, size_bytes).map_err(|e| {
                        context(
                            e,
                            format_args!(
                                "fallocate backing file {} ({size_bytes} bytes)",
                                file.display()
                            ),
                        )
                    })?;
                }
                (file.clone(), Some(file))
            }
            Backing::Memfd | Backing::CopyOf(_) => {
                let fd = make_memfd(kind, size_bytes)?;
                if let Backing::CopyOf(from) = backing {
                    copy_data(from, fd.as_fd())?;
                }
                let path = PathBuf::from(format!(
                    "/proc/{}/fd/{}",
                    std::process::id(),
                    fd.as_raw_fd()
                ));
                lock(&res).memfd = Some(fd);
                (path, None)
            }
        };

        // 2. Loop device. Attached first and recorded at once; direct I/O is a
        // separate step so that its failure cannot leave an unrecorded device.
        let out = run_tool(
            &losetup,
            &[
                "--find".as_ref(),
                "--show".as_ref(),
                attach_path.as_os_str(),
            ],
        )?;
        let loop_dev = PathBuf::from(out.trim());
        if !loop_dev.starts_with("/dev/") {
            return Err(io::Error::other(format!(
                "losetup --find --show {} printed {:?}, not a device",
                attach_path.display(),
                out.trim()
            )));
        }
        {
            let mut r = lock(&res);
            r.loop_dev = Some(loop_dev.clone());
            r.loop_backing = loop_backing_file(&loop_dev);
        }
        if opts.direct_io {
            if let Err(e) = run_tool(&losetup, &["--direct-io=on".as_ref(), loop_dev.as_os_str()]) {
                log::warn!(
                    "{}: direct I/O not available, using buffered loop I/O: {e}",
                    loop_dev.display()
                );
            }
        }
        let dev_numbers = fs::metadata(&loop_dev)
            .map(|m| dev_major_minor(m.rdev()))
            .map_err(|e| context(e, format_args!("stat {}", loop_dev.display())))?;

        // 3. mkfs, unless the device is a copy of a filesystem.
        let copied = matches!(backing, Backing::CopyOf(_));
        if !copied {
            make_fs(&mkfs, kind, size_bytes, opts, &loop_dev)?;
        }

        // 4. Mount.
        let mount_point = make_temp_dir(&std::env::temp_dir(), "ubio-mnt-", &res)?;
        let mut mount_opts: Vec<&str> = Vec::new();
        if kind == FsKind::Ext4 {
            mount_opts.push("noinit_itable");
        }
        if copied && kind == FsKind::Xfs {
            // The original, with the same UUID, is still mounted.
            mount_opts.push("nouuid");
        }
        mount_opts.extend(opts.mount_options.iter().map(String::as_str));
        let mount_opts = mount_opts.join(",");
        let mut args: Vec<&OsStr> = vec!["-t".as_ref(), kind.name().as_ref()];
        if !mount_opts.is_empty() {
            args.extend([OsStr::new("-o"), OsStr::new(&mount_opts)]);
        }
        args.extend([loop_dev.as_os_str(), mount_point.as_os_str()]);
        run_tool(&mount, &args)?;
        lock(&res).mounted_at = Some(mount_point.clone());
        log::debug!(
            "mounted {kind} ({size_bytes} bytes) from {} at {}",
            loop_dev.display(),
            mount_point.display()
        );

        Ok(ScratchFs {
            fs_type: kind.name(),
            kind: Some(kind),
            size_bytes,
            mount_point,
            loop_dev: Some(loop_dev),
            dev_numbers: Some(dev_numbers),
            backing_file,
            res,
            _cleanup: cleanup,
            container: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_known() {
        assert!(available_bytes(Path::new(".")).unwrap() > 0);
        assert!(available_bytes(Path::new("/nonexistent/ubio")).is_err());
    }

    #[test]
    fn splits_dev_t() {
        // /dev/loop3 is 7:3; a large minor goes to the high bits.
        assert_eq!(dev_major_minor(0x703), (7, 3));
        assert_eq!(
            dev_major_minor((259 << 8) | (0x12345 & 0xff) | ((0x12345 & !0xff) << 12)),
            (259, 0x12345)
        );
    }

    #[test]
    fn kinds_round_trip() {
        for k in FsKind::ALL {
            assert_eq!(k.name().parse::<FsKind>().unwrap(), k);
        }
        assert!("ntfs".parse::<FsKind>().is_err());
    }

    #[test]
    fn too_small_is_a_clear_error() {
        let err = ScratchFs::create(FsKind::Xfs, 64 * MIB, &ScratchOpts::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("at least 300 MiB"), "{err}");
    }
}
