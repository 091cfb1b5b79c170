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
    /// O_DIRECT's alignment, where O_DIRECT is usable here (not on NFS,
    /// whose statx gives one).
    pub fn direct_align(&self) -> Option<DioAlign> {
        self.dio_align.filter(|_| self.direct_io.available)
    }

    /// The kernel's readahead here may ask for 2 MiB folios (their order
    /// grows with the readahead window, up to the PMD size). On fragmented
    /// memory each one fails and wakes kswapd, whose reclaim then takes
    /// other processes' pages once a stream's own were dropped
    /// (bench/runs/2026-12-07-neighbours-fragmentation); 128 KiB of
    /// readahead, the usual default, did not.
    pub fn readahead_folios_reach_2mib(&self) -> bool {
        self.read_ahead_kb.is_some_and(|kb| kb >= 2048)
    }

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
    /// The file whose pages I/O through this descriptor fills, when it is
    /// another one (overlayfs: the real upper or lower file), or why it
    /// cannot be found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_file: Option<Support>,
    /// What was checked on this very file rather than assumed: cachestat()
    /// sees a page a read through the descriptor brought in, fadvise drops
    /// it, sync_file_range() writes a dirty page back.
    pub verified: Verified,
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
    let (direct_io, dio_align) = if !regular {
        (Support::no("not a regular file"), None)
    } else if magic.direct_io_drops_file_cache() {
        (
            Support::no(format!(
                "O_DIRECT on {} writes back and drops the whole file's page cache, others' pages \
                 included: not used",
                magic.name()
            )),
            None,
        )
    } else {
        probe_direct(fd)
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
    let file = crate::descriptors::reopen(fd, access | libc::O_DIRECT)?;
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

/// The page-cache effects checked on one file by [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Verified {
    /// cachestat() counted a page that a read through the descriptor had
    /// just brought in.
    pub sees_reads: Option<Support>,
    /// fadvise(DONTNEED) took that page out again.
    pub drop_works: Option<Support>,
    /// sync_file_range() wrote a page dirtied through the descriptor back.
    pub writeback_works: Option<Support>,
}

/// Check on the file itself (never assume from the filesystem's name) that
/// residency can be seen and changed: read one page that is not cached
/// through `fd`, look for it with cachestat() on `pages` (the file that
/// holds the pages: `fd`'s own, or an overlay's real file), drop it, and
/// where `scratch` (a file of the caller's own, such as an O_TMPFILE) write
/// a page and write it back. A page cached beforehand is left alone and
/// nothing is claimed. `through_overlay`: `fd` is an overlay descriptor
/// whose real file was not found; look with mincore() of its mapping (which
/// is the real file's) and write back with fdatasync(), as streams then do.
pub fn verify(
    fd: BorrowedFd<'_>,
    pages: BorrowedFd<'_>,
    scratch: bool,
    through_overlay: bool,
) -> Verified {
    let page = sys::page_size();
    let mut v = Verified::default();
    let cached = |r: std::ops::Range<u64>| match through_overlay {
        // Dirty pages cannot be told: every resident page may be.
        true => sys::mincore_resident(pages, r.start, r.end - r.start).map(|n| (n, n)),
        false => sys::cachestat(pages, r).map(|c| (c.nr_cache, c.nr_dirty + c.nr_writeback)),
    };
    if scratch && through_overlay {
        let buf = vec![0x5au8; page as usize];
        let wrote = sys::pwritev2(fd, &[io::IoSlice::new(&buf)], Some(0), RwFlags::NONE);
        v.writeback_works = Some(match (wrote, cached(0..page)) {
            (Err(e), _) => Support::no(format!("pwrite: {e}")),
            (_, Err(e)) => Support::no(format!("mincore: {e}")),
            (Ok(_), Ok((0, _))) => Support::no(
                "mincore() saw no page after a write through this descriptor",
            ),
            // Dirty pages stay after fadvise(DONTNEED): gone means written back.
            (Ok(_), Ok(_)) => match sys::fdatasync(fd)
                .and_then(|()| sys::fadvise(fd, 0, page, sys::Advice::DontNeed))
                .and_then(|()| cached(0..page))
            {
                Ok((0, _)) => Support::yes(
                    "a page written through this descriptor was written back by fdatasync() and dropped",
                ),
                Ok((n, _)) => Support::no(format!("{n} pages still cached after fdatasync() and fadvise(DONTNEED)")),
                Err(e) => Support::no(format!("fdatasync/fadvise/mincore: {e}")),
            },
        });
    } else if scratch {
        let buf = vec![0x5au8; page as usize];
        let wrote = sys::pwritev2(fd, &[io::IoSlice::new(&buf)], Some(0), RwFlags::NONE);
        v.writeback_works = Some(match (wrote, cached(0..page)) {
            (Err(e), _) => Support::no(format!("pwrite: {e}")),
            (_, Err(e)) => Support::no(format!("cachestat: {e}")),
            (Ok(_), Ok((0, 0))) => Support::no(
                "cachestat() saw no page after a write through this descriptor (writes bypass the page cache)",
            ),
            // FUSE without writeback caching writes through: the page is clean at once.
            (Ok(_), Ok((_, 0))) => Support::yes(
                "writes go through at once: the page written through this descriptor was already clean",
            ),
            (Ok(_), Ok(_)) => match sys::sync_file_range(pages, 0, page, sys::SyncFlags::WRITE_AND_WAIT) {
                Err(e) => Support::no(format!("sync_file_range: {e}")),
                Ok(()) => match cached(0..page) {
                    Ok((_, 0)) => Support::yes("a page written through this descriptor was written back by sync_file_range()"),
                    Ok((_, n)) => Support::no(format!("{n} pages still dirty after sync_file_range(WRITE|WAIT)")),
                    Err(e) => Support::no(format!("cachestat: {e}")),
                },
            },
        });
        let _ = sys::fadvise(pages, 0, 0, sys::Advice::DontNeed);
    }
    let size = sys::fstat(fd).map(|s| s.st_size as u64).unwrap_or(0);
    if size < page {
        return v;
    }
    // A page at the end (readahead there is short) not cached by anyone.
    let off = (size - 1) / page * page;
    match cached(off..off + page) {
        Err(e) => {
            v.sees_reads = Some(Support::no(format!("cachestat/mincore: {e}")));
            return v;
        }
        Ok((n, _)) if n > 0 => return v,
        Ok(_) => {}
    }
    let mut byte = [0u8; 1];
    if let Err(e) = sys::preadv2(
        fd,
        &mut [IoSliceMut::new(&mut byte)],
        Some(off),
        RwFlags::NONE,
    ) {
        v.sees_reads = Some(Support::no(format!("pread: {e}")));
        return v;
    }
    match cached(off..off + page) {
        Ok((0, _)) => {
            v.sees_reads = Some(Support::no(
                "the page a read through this descriptor just brought in was not counted",
            ));
            // Drop it anyway, through the descriptor (fadvise is forwarded on overlayfs).
            let _ = sys::fadvise(fd, off, page, sys::Advice::DontNeed);
        }
        Ok(_) => {
            v.sees_reads = Some(Support::yes(match through_overlay {
                true => "mincore() of the overlay's mapping counted the page a read through this descriptor brought in",
                false => "cachestat() counted the page a read through this descriptor brought in",
            }));
            let _ = sys::fadvise(pages, off, page, sys::Advice::DontNeed);
            v.drop_works = Some(match cached(off..off + page) {
                Ok((0, _)) => Support::yes("fadvise(DONTNEED) dropped it"),
                Ok((n, _)) => {
                    Support::no(format!("{n} pages still cached after fadvise(DONTNEED)"))
                }
                Err(e) => Support::no(format!("cachestat: {e}")),
            });
        }
        Err(e) => v.sees_reads = Some(Support::no(format!("cachestat/mincore: {e}"))),
    }
    v
}

/// Probe an open file.
pub fn probe_fd(fd: BorrowedFd<'_>, path: Option<&Path>) -> io::Result<Probe> {
    probe_fd_scratch(fd, path, false)
}

fn probe_fd_scratch(fd: BorrowedFd<'_>, path: Option<&Path>, scratch: bool) -> io::Result<Probe> {
    let st = sys::fstat(fd)?;
    let fs = fs_caps(fd, &st)?;
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let real =
        (fs.magic == FsMagic::OVERLAYFS && regular).then(|| crate::overlay::RealFile::open(fd));
    let real_file = real.as_ref().map(|r| match r {
        Ok(r) => Support::yes(format!("{} ({} layer)", r.path().display(), r.layer())),
        Err(e) => Support::no(crate::overlay::fallback_note(e)),
    });
    let real_fd = match &real {
        Some(Ok(r)) => File::open(r.path()).ok(),
        _ => None,
    };
    let pages = real_fd.as_ref().map_or(fd, |f| f.as_fd());
    // The real file not found: look through the overlay's mapping, as streams do.
    let through_overlay = matches!(real, Some(Err(_)));
    let verified = if regular && !fs.pseudo {
        verify(fd, pages, scratch, through_overlay)
    } else {
        Verified::default()
    };
    let cachestat = match sys::cachestat(pages, sys::FileRange::WHOLE) {
        Ok(_) if through_overlay => Support::no(
            "cachestat() on an overlay descriptor counts the overlay's own, empty, mapping",
        ),
        Ok(_) => Support::yes("cachestat() works on this file"),
        Err(e) => match Fallback::of(&e) {
            Some(Fallback::NotPermitted) => {
                Support::no("cachestat(): EPERM (the caller can neither write nor owns the file)")
            }
            Some(Fallback::NoCachestat) => Support::no("cachestat(): ENOSYS (Linux before 6.5)"),
            Some(Fallback::CachestatBlocked) => Support::no(Fallback::CachestatBlocked.note()),
            // Fallback::of never gives OverlayHidden: it is not an errno.
            Some(Fallback::OverlayHidden) | None => Support::no(format!("cachestat(): {e}")),
        },
    };
    let blind = crate::residency::blindness(pages);
    let flags = sys::getfl(fd).unwrap_or(0);
    // Residency is known only where a read's page was seen (or nothing could be read).
    let seen = verified.sees_reads.as_ref().is_none_or(|s| s.available);
    let choice = choose(
        BackendKind::Auto,
        &fs,
        regular,
        flags,
        blind.is_none() && seen,
    );
    Ok(Probe {
        path: path.map(Path::to_path_buf),
        kernel: sys::kernel_release(),
        fs,
        regular_file: regular,
        cachestat,
        mincore_trustworthy: blind.is_none(),
        real_file,
        verified,
        auto: choice
            .as_ref()
            .map(|c| c.backend)
            .unwrap_or(BackendKind::Buffered),
        auto_reason: match choice {
            Ok(c) if through_overlay && c.managed => {
                format!(
                    "{}; through the overlay descriptor (its real file was not found)",
                    c.reason
                )
            }
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
        let (f, name) = scratch_file(path).map_err(ctx)?;
        let probe = probe_fd_scratch(f.as_fd(), Some(path), true).map_err(ctx);
        // Closed before its name goes: a FUSE daemon (libfuse's
        // .fuse_hidden*) or an NFS client (.nfs*) keeps an open file that
        // is unlinked under a hidden name until it is closed.
        drop(f);
        if let Some(name) = name {
            std::fs::remove_file(&name)
                .map_err(|e| crate::error::context(e, "remove", Some(&name)))?;
        }
        return probe;
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

/// A file of the probe's own in `dir`: unnamed (O_TMPFILE), or named (and
/// returned with its name, for the caller to remove) where the filesystem
/// has no O_TMPFILE (FUSE, NFS: EOPNOTSUPP) or on overlayfs, whose real
/// upper file is found by its name.
fn scratch_file(dir: &Path) -> io::Result<(File, Option<PathBuf>)> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(true);
    let overlay = sys::fs_magic(File::open(dir)?.as_fd())? == FsMagic::OVERLAYFS;
    if !overlay {
        match o.clone().custom_flags(libc::O_TMPFILE).open(dir) {
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EISDIR)
                ) => {}
            r => return r.map(|f| (f, None)),
        }
    }
    let name = dir.join(format!(".ubio-probe-{}", std::process::id()));
    Ok((o.create_new(true).open(&name)?, Some(name)))
}

/// Decide which backend serves a file. `flags` are the open file's status
/// flags (F_GETFL); `residency_known`: cachestat() (or a truthful mincore())
/// works on it. A backend named explicitly that cannot work is an error.
///
/// `auto` prefers `emulated`: measured on Linux 6.18 (docs/guide/library.md,
/// "How auto chooses"), it reads about twice as fast as RWF_DONTCACHE (which drops
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
