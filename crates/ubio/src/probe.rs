//! Capability detection, once per filesystem, and the backend choice.

use crate::backend::BackendKind;
use crate::residency::Fallback;
use crate::sys::{self, DioAlign, FsMagic, RwFlags};
use serde::Serialize;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Whether a facility works, and what the probe saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Support {
    pub available: bool,
    pub detail: String,
}

impl Support {
    fn yes(detail: impl Into<String>) -> Support {
        Support {
            available: true,
            detail: detail.into(),
        }
    }
    fn no(detail: impl Into<String>) -> Support {
        Support {
            available: false,
            detail: detail.into(),
        }
    }
}

/// What a filesystem can do; probed once per device and cached.
#[derive(Debug, Clone, Serialize)]
pub struct FsCaps {
    pub fs_type: String,
    #[serde(skip)]
    pub magic: FsMagic,
    pub dontcache: Support,
    pub direct_io: Support,
    pub dio_align: Option<DioAlign>,
    /// The kernel's readahead limit for the device, when it can be found.
    pub read_ahead_kb: Option<u64>,
    /// The page cache is the storage (tmpfs): nothing may be dropped.
    pub pages_are_storage: bool,
    /// Kernel-generated files (/proc, sysfs): passed through untouched.
    pub pseudo: bool,
}

impl FsCaps {
    /// How far ahead of reads residency must be snapshotted.
    pub fn lookahead(&self) -> u64 {
        match self.read_ahead_kb {
            // Async readahead can run up to twice the window ahead.
            Some(kb) => (2 * kb * 1024).max(16 << 20) + crate::residency::CHUNK,
            None => 64 << 20,
        }
    }
}

/// The full probe report for a path or an open file.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub path: Option<PathBuf>,
    pub kernel: String,
    pub fs: FsCaps,
    pub regular_file: bool,
    pub cachestat: Support,
    pub mincore_trustworthy: bool,
    pub auto: BackendKind,
    pub auto_reason: String,
}

/// The backend chosen for a file and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub requested: BackendKind,
    pub backend: BackendKind,
    pub reason: String,
    /// False when the file's cache is not managed at all (pass-through).
    pub managed: bool,
}

fn cache() -> &'static Mutex<HashMap<u64, FsCaps>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, FsCaps>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The capabilities of the filesystem holding the open file `fd`, whose
/// fstat() the caller has in `st`.
pub fn fs_caps(fd: BorrowedFd<'_>, st: &libc::stat) -> io::Result<FsCaps> {
    if let Some(c) = cache().lock().unwrap().get(&st.st_dev) {
        return Ok(c.clone());
    }
    let caps = probe_fs(fd, st)?;
    // Only regular files can prove what the filesystem supports.
    if st.st_mode & libc::S_IFMT == libc::S_IFREG {
        cache().lock().unwrap().insert(st.st_dev, caps.clone());
    }
    Ok(caps)
}

fn probe_fs(fd: BorrowedFd<'_>, st: &libc::stat) -> io::Result<FsCaps> {
    let magic = sys::fs_magic(fd)?;
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let readable = crate::residency::readable_fd(fd);
    let dontcache = match (&readable, regular) {
        (_, false) => Support::no("not a regular file"),
        (Err(e), _) => Support::no(format!("could not open the file for reading to probe: {e}")),
        (Ok(r), true) => probe_dontcache(r.fd(), st.st_size as u64),
    };
    let (direct_io, dio_align) = if regular {
        probe_direct(fd)
    } else {
        (Support::no("not a regular file"), None)
    };
    Ok(FsCaps {
        fs_type: magic.name(),
        magic,
        dontcache,
        direct_io,
        dio_align,
        read_ahead_kb: read_ahead_kb(st.st_dev),
        pages_are_storage: magic.pages_are_storage(),
        pseudo: magic.is_pseudo(),
    })
}

/// Whether RWF_DONTCACHE works on the file behind `fd` (open for reading,
/// `size` bytes long): a 1-byte preadv2(RWF_DONTCACHE) at EOF returns 0
/// where it does and EOPNOTSUPP where not. (A zero-length call returns 0
/// before the flags are checked, so it proves nothing.) The one check of
/// RWF_DONTCACHE support, for the library and the benchmark alike.
pub fn check_dontcache(fd: BorrowedFd<'_>, size: u64) -> io::Result<()> {
    let mut byte = [0u8; 1];
    sys::preadv2(
        fd,
        &mut [IoSliceMut::new(&mut byte)],
        Some(size),
        RwFlags::DONTCACHE,
    )
    .map(drop)
}

/// An O_DIRECT descriptor of a file and the alignment direct I/O needs on it.
#[derive(Debug)]
pub struct Direct {
    pub file: File,
    pub align: DioAlign,
    /// False when statx() reported no alignment and the block size (at
    /// least a page) is assumed.
    pub reported: bool,
}

/// Open the file behind `fd` again with O_DIRECT and `access` (`O_RDONLY`,
/// `O_WRONLY` or `O_RDWR`): the one check of O_DIRECT support. EINVAL where
/// the filesystem refuses direct I/O.
pub fn open_direct(fd: BorrowedFd<'_>, access: libc::c_int) -> io::Result<Direct> {
    let file = sys::reopen(fd, access | libc::O_DIRECT)?;
    Ok(match sys::statx_dio_align(file.as_fd()).ok().flatten() {
        Some(align) => Direct {
            file,
            align,
            reported: true,
        },
        None => {
            let align = (sys::fstat(fd)?.st_blksize as u32).max(sys::page_size() as u32);
            Direct {
                file,
                align: DioAlign {
                    mem_align: align,
                    offset_align: align,
                },
                reported: false,
            }
        }
    })
}

fn probe_dontcache(fd: BorrowedFd<'_>, size: u64) -> Support {
    match check_dontcache(fd, size) {
        Ok(()) => Support::yes("1-byte preadv2(RWF_DONTCACHE) at EOF succeeded"),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Support::no(
            "1-byte preadv2(RWF_DONTCACHE) at EOF: EOPNOTSUPP (kernel older than 6.14 or filesystem without FOP_DONTCACHE)",
        ),
        Err(e) => Support::no(format!("1-byte preadv2(RWF_DONTCACHE) at EOF: {e}")),
    }
}

fn probe_direct(fd: BorrowedFd<'_>) -> (Support, Option<DioAlign>) {
    match open_direct(fd, libc::O_RDONLY) {
        Err(e) => (Support::no(format!("open(O_DIRECT): {e}")), None),
        Ok(d) if d.reported => (Support::yes("statx(STATX_DIOALIGN)"), Some(d.align)),
        // Opens but reports no alignment: the block size, at least a page.
        Ok(d) => (
            Support::yes("open(O_DIRECT) works; alignment not reported, assuming the block size"),
            Some(d.align),
        ),
    }
}

fn read_ahead_kb(dev: libc::dev_t) -> Option<u64> {
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    std::fs::read_to_string(format!("/sys/class/bdi/{maj}:{min}/read_ahead_kb"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Probe an open file.
pub fn probe_fd(fd: BorrowedFd<'_>, path: Option<&Path>) -> io::Result<Probe> {
    let st = sys::fstat(fd)?;
    let fs = fs_caps(fd, &st)?;
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let cachestat = match sys::cachestat(fd, sys::FileRange::WHOLE) {
        Ok(_) => Support::yes("cachestat() works on this file"),
        Err(e) => match Fallback::of(&e) {
            Some(Fallback::NotPermitted) => {
                Support::no("cachestat(): EPERM (the caller can neither write nor owns the file)")
            }
            Some(Fallback::NoCachestat) => Support::no("cachestat(): ENOSYS (Linux before 6.5)"),
            None => Support::no(format!("cachestat(): {e}")),
        },
    };
    let blind = crate::residency::blindness(fd);
    let flags = sys::getfl(fd).unwrap_or(0);
    let choice = choose(BackendKind::Auto, &fs, regular, flags, blind.is_none());
    Ok(Probe {
        path: path.map(Path::to_path_buf),
        kernel: sys::kernel_release(),
        fs,
        regular_file: regular,
        cachestat,
        mincore_trustworthy: blind.is_none(),
        auto: choice
            .as_ref()
            .map(|c| c.backend)
            .unwrap_or(BackendKind::Buffered),
        auto_reason: match choice {
            Ok(c) => c.reason,
            Err(e) => e.to_string(),
        },
    })
}

/// Probe a path: a file, or a directory (probed through an unnamed
/// temporary file created in it, which needs write permission).
pub fn probe_path(path: &Path) -> io::Result<Probe> {
    let ctx = |e| crate::error::context(e, "probe", Some(path));
    let meta = std::fs::metadata(path).map_err(ctx)?;
    let file = if meta.is_dir() {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(path)
            .map_err(ctx)?
    } else if meta.file_type().is_fifo() {
        // Opening a FIFO for reading would block until a writer comes.
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(ctx)?
    } else {
        File::open(path).map_err(ctx)?
    };
    probe_fd(file.as_fd(), Some(path)).map_err(ctx)
}

/// Decide which backend serves a file. `flags` are the open file's status
/// flags (F_GETFL); `residency_known`: cachestat() (or a truthful mincore())
/// works on it. A backend named explicitly that cannot work is an error.
///
/// `auto` prefers `emulated`: measured on Linux 6.18 (README, "How auto
/// chooses"), it reads about twice as fast as RWF_DONTCACHE (which drops
/// each folio in the reader's context; ubio drops 8 MiB at a time) and
/// writes as fast. Where residency cannot be known, only the kernel can
/// tell the stream's pages from others', so `auto` takes RWF_DONTCACHE there.
pub fn choose(
    requested: BackendKind,
    fs: &FsCaps,
    regular: bool,
    flags: libc::c_int,
    residency_known: bool,
) -> io::Result<Choice> {
    let pass = |reason: String| {
        Ok(Choice {
            requested,
            backend: BackendKind::Buffered,
            reason,
            managed: false,
        })
    };
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "backend '{requested}' cannot run on this {} file: {why}",
                fs.fs_type
            ),
        ))
    };
    // What is never managed, whatever was asked for.
    if !regular {
        return pass(
            "not a regular file (pipe, socket, device or directory): passed through".into(),
        );
    }
    if fs.pseudo {
        return pass(format!(
            "{} files are generated by the kernel: passed through",
            fs.fs_type
        ));
    }
    if flags & libc::O_DIRECT != 0 {
        return pass("opened with O_DIRECT: the page cache is not used; passed through".into());
    }
    if flags & (libc::O_SYNC | libc::O_DSYNC) != 0 {
        return pass(
            "opened with O_SYNC/O_DSYNC: the caller manages durability; passed through".into(),
        );
    }
    let storage = fs.pages_are_storage;
    let storage_reason = format!(
        "{}: the page cache is the file's storage; nothing is dropped",
        fs.fs_type
    );
    let managed = |backend: BackendKind, reason: String| {
        Ok(Choice {
            requested,
            backend,
            reason,
            managed: !storage,
        })
    };
    match requested {
        BackendKind::Buffered => pass("buffered requested: the page cache is not managed".into()),
        BackendKind::Kernel if !fs.dontcache.available => refuse(format!(
            "RWF_DONTCACHE unsupported ({})",
            fs.dontcache.detail
        )),
        BackendKind::Kernel => managed(
            BackendKind::Kernel,
            "kernel requested; RWF_DONTCACHE works here".into(),
        ),
        BackendKind::Direct if !fs.direct_io.available => {
            refuse(format!("O_DIRECT unsupported ({})", fs.direct_io.detail))
        }
        BackendKind::Direct => managed(
            BackendKind::Direct,
            "direct requested; O_DIRECT works here".into(),
        ),
        BackendKind::Emulated if storage => managed(BackendKind::Emulated, storage_reason),
        BackendKind::Emulated => managed(BackendKind::Emulated, "emulated requested".into()),
        BackendKind::Auto if storage => pass(storage_reason),
        BackendKind::Auto if !residency_known && fs.dontcache.available => managed(
            BackendKind::Kernel,
            format!(
                "residency of this file's pages cannot be known (cachestat: EPERM): RWF_DONTCACHE on {} \
                 drops only the pages this stream brings in",
                fs.fs_type
            ),
        ),
        BackendKind::Auto if fs.dontcache.available => managed(
            BackendKind::Emulated,
            format!(
                "emulated drop-behind and write-behind on {}: faster than RWF_DONTCACHE here, which also works",
                fs.fs_type
            ),
        ),
        BackendKind::Auto => managed(
            BackendKind::Emulated,
            format!(
                "RWF_DONTCACHE unavailable on {} (Linux {}): emulated with fadvise/sync_file_range",
                fs.fs_type,
                sys::kernel_release()
            ),
        ),
    }
}
