//! `ubio-taildetect`: a deterministic detector for the ext4 loss of
//! integrity-3 (issue 37, item 2): a `direct`-backend copy whose last
//! partial block, written through the page cache after an O_DIRECT body,
//! was missing on the disk although fsync had returned
//! (bench/runs/2026-11-26-integrity-3, section 1).
//!
//! The destination side of `ubio cp -r --sync --backend direct` is replayed
//! call for call, as strace showed it (bench/runs/2026-12-06-ext4-tail has
//! the traces), on new files in a scratch ext4 (a loop device, mounted
//! `commit=1`), many times over, with the flusher woken every
//! `--writeback-centisecs` (default 1: 10 ms) and writing every dirty inode
//! older than `--expire-centisecs` (default 0: every one it finds), so that
//! it races with the copy's own writeback (`--probe` counts how often it got
//! to the tail's page first). New files, not one file rewritten: the loss
//! was of a new file whose O_DIRECT write allocated its blocks and whose
//! tail went into (i3, pre) or after (cur) them; a rewrite would overwrite
//! allocated blocks or go through truncation, other paths. Each worker
//! unlinks its files `--keep` iterations later, so blocks freed by earlier
//! files are reused, as on a filesystem in use. After each
//! fsync returns, the file is read back with O_DIRECT (which writes dirty
//! pages of the range first: zeroes or other foreign bytes there mean a page
//! that was made clean without its data reaching the disk) and its dirty
//! and writeback pages are counted (cachestat; none may be left); the file
//! is read again with O_DIRECT, by path, `--keep` iterations later, just
//! before it is unlinked. Any difference is printed with the file's
//! extents and the iteration's calls, timed.
//!
//! Variants (`--variants`, taken in turn, iteration by iteration):
//! - `i3`: the build that lost the tail (96cc7a3, integrity-3's `cp -r`):
//!   O_DIRECT body up to the last 512-byte boundary, the rest buffered, in
//!   the block the O_DIRECT write allocated (and zeroed past the body), then
//!   a same-size ftruncate (removed in f27acfa);
//! - `pre`: the build just before the fix (bc8cb83, d434527's first
//!   parent): `i3` without the ftruncate;
//! - `cur`: main (d434527 and later): O_DIRECT body up to the last
//!   filesystem-block boundary, the whole last block buffered;
//! - `lib`: not a transcription: the library itself (`ubio::File`, direct
//!   backend) reads the source, writes the file in one call, `sync_all`,
//!   closes;
//! - `race`: the library's emulated backend with every aligned write forced
//!   through O_DIRECT (`DirectWrites::Always`, the path its race takes
//!   where O_DIRECT wins): the body in one call of whole blocks from an
//!   aligned buffer, then the tail in a second call (through the page
//!   cache), as `ubio cp` copies through its buffers; `sync_all`, close;
//! - controls, which must be reported every time (the detector sees what it
//!   claims to): `ctl-lost`, `pre` with the tail never written (ftruncate
//!   sets the size: zeroes where the tail belongs), and `ctl-dirty`, `pre`
//!   checked before any sync (dirty pages counted; the O_DIRECT read flushes
//!   them first, so its bytes match).
//!
//! The calls of a copy (dst: the new file, dio: its O_RDWR|O_DIRECT
//! reopening, src/srcdio: the source's), with the variants' differences
//! marked:
//!   open(src) fstat getfl fstatfs getfl preadv2(src,1@size,RWF_DONTCACHE)
//!   reopen(src,O_DIRECT)+statx(DIOALIGN)+close cachestat(src,0..4K) getfl
//!   srcdio=reopen(src,O_RDONLY|O_DIRECT) [cur: fadvise(srcdio,RANDOM)
//!   fstat(src)] statx(src)
//!   dst=open(O_WRONLY|O_CREAT|O_EXCL,0644) fstat getfl cachestat(dst,0..4K)
//!   getfl dio=reopen(dst,O_RDWR|O_DIRECT) [cur: fadvise(dio,RANDOM)
//!   fstat(dst)] statx(src) statx(dst) FICLONE(dst,src)=EOPNOTSUPP
//!   lseek(src,SEEK_DATA/SEEK_HOLE) cachestat(src,0..20M) cachestat(src,0..2M)
//!   getfl mincore(src,0..2M) cachestat(src,2M chunks to 20M)
//!   fstat(srcdio) preadv2(srcdio,whole)
//!   cachestat(dst,0..2M) fstat(dst) pwritev2(dio,body,0) fstat(dst)
//!   pwritev2(dst,tail,body) fstat(srcdio) statx(dst) statx(src)
//!   [i3: ftruncate(dst,size) instead of statx(dst)]
//!   sync_file_range(dst,0,page_up(size),WRITE)
//!   sync_file_range(dst,0,page_up(size),WAIT_BEFORE|WRITE|WAIT_AFTER)
//!   cachestat(dst,0..2M) fadvise(dst,0,2M,DONTNEED) cachestat(dst,0..2M)
//!   fsync(dst) -- check --
//!   cachestat(src) x3 close(src) close(srcdio) cachestat(dst,0..2M) x2
//!   close(dst) close(dio)
//! Left out: the source's read of /sys/class/bdi/*/read_ahead_kb (it touches
//! neither file nor the device). The source's residency queries (cachestat,
//! mincore) depend on what of it is cached (one cachestat in 96cc7a3's
//! trace of a cached source); those of main's trace are made: pure queries,
//! they change no page. The bytes written are the iteration's own
//! (seeded, no zero byte), not the source's: a block of an earlier file
//! reused without being written is then told apart. Sizes up to 2 MiB (the
//! traced ranges are those of one 2 MiB window).
//!
//! Machine-wide: vm.dirty_writeback_centisecs and vm.dirty_expire_centisecs
//! are set for the run and restored at its end, on an error, a panic and
//! SIGINT/SIGTERM/SIGHUP (not on SIGKILL: then restore them by hand from the
//! TAILDETECT-SYSCTL line). Root, losetup, mkfs.ext4, mount.
//!
//! Prints `TAILDETECT-*` lines: the setup, progress, every mismatch in
//! full, and one `TAILDETECT-RESULT` line per variant. Exit status 0: every
//! iteration ran and matched; 1: a mismatch; 2: an error.

#![forbid(unsafe_code)]

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use ubio::sys::{self, Advice, RwFlags, SyncFlags};
use ubio::{AlignedBuf, BackendKind};
use ubio_testenv::cleanup::{self, AfterSignal};
use ubio_testenv::rng::{mix, SplitMix64};
use ubio_testenv::scratchfs::{FsKind, ScratchFs, ScratchOpts};

#[derive(Parser)]
#[command(
    name = "ubio-taildetect",
    about = "replay the direct backend's copy of a file with a partial last block on a scratch ext4, and check every fsynced file on the disk"
)]
struct Args {
    /// Copies in all (shared by the workers, variants in turn).
    #[arg(long, default_value_t = 100_000)]
    iterations: u64,
    /// Sequences, comma separated: i3, pre, cur, lib, race (controls: ctl-lost,
    /// ctl-dirty).
    #[arg(long, value_delimiter = ',', default_value = "i3,pre,cur")]
    variants: Vec<Variant>,
    /// Bytes per file (at most 2 MiB). 59798: integrity-3's dst/f9.
    #[arg(long, default_value_t = 59_798)]
    size: u64,
    /// Concurrent copies (`ubio cp -r` runs two workers).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Files each worker keeps before reading them again and unlinking them.
    #[arg(long, default_value_t = 32)]
    keep: usize,
    /// Size of the scratch ext4, MiB.
    #[arg(long, default_value_t = 256)]
    fs_mib: u64,
    /// Directory for the loop device's backing file (default: the system's
    /// temporary directory).
    #[arg(long)]
    backing_dir: Option<PathBuf>,
    /// vm.dirty_writeback_centisecs for the run (the flusher's period).
    #[arg(long, default_value_t = 1)]
    writeback_centisecs: u32,
    /// vm.dirty_expire_centisecs for the run: the age at which the flusher
    /// writes a dirty inode (0: every dirty inode it finds, so that it races
    /// with the copy's own writeback; at the default 3000 it never touches
    /// these files, which live for milliseconds); `keep`: left as it is.
    #[arg(long, default_value = "0")]
    expire_centisecs: String,
    /// Diagnostic, not in the copy's sequence: just before the copy's
    /// sync_file_range, count the tail page's state (cachestat): dirty (the
    /// copy writes it), under writeback or clean (someone else, the flusher,
    /// got there first). Says whether the race is exercised.
    #[arg(long)]
    probe: bool,
    /// Stress, not in the copy's sequence: one more thread starts the
    /// writeback of every file being copied (sync_file_range WRITE, without
    /// waiting, through a descriptor of its own), over and over, so that
    /// writeback meets the copy's every step, not only the flusher's 10 ms
    /// ticks.
    #[arg(long)]
    racer: bool,
    #[arg(long, default_value_t = 37)]
    seed: u64,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 10)]
    progress_secs: u64,
    /// Stop after this many mismatches.
    #[arg(long, default_value_t = 20)]
    max_mismatches: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, ValueEnum)]
enum Variant {
    I3,
    Pre,
    Cur,
    Lib,
    Race,
    /// Control: `pre` without the tail's write (the size set by ftruncate):
    /// what a lost tail looks like; every iteration must be reported.
    CtlLost,
    /// Control: `pre` without sync_file_range, DONTNEED and fsync: the tail's
    /// page is still dirty at the check; every iteration must be reported.
    CtlDirty,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::I3 => "i3",
            Variant::Pre => "pre",
            Variant::Cur => "cur",
            Variant::Lib => "lib",
            Variant::Race => "race",
            Variant::CtlLost => "ctl-lost",
            Variant::CtlDirty => "ctl-dirty",
        }
    }
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// The tracker's window, as traced: its cachestat, DONTNEED and the
/// source's read-side ranges are 2 MiB pieces of a 20 MiB lookahead.
const WINDOW: u64 = 2 * MIB;
const LOOKAHEAD: u64 = 20 * MIB;
/// ext4's block here (mkfs -b 4096) and the page.
const BLOCK: u64 = 4096;

/// What every worker shares.
struct Shared {
    args: Args,
    root: PathBuf,
    next: AtomicU64,
    stop: AtomicBool,
    /// Workers inside an iteration (the signal cleanup waits for 0).
    active: AtomicUsize,
    mismatches: AtomicU64,
    /// Per variant: iterations done, mismatches.
    done: Vec<AtomicU64>,
    bad: Vec<AtomicU64>,
    /// Per variant, with --probe: the tail page before the copy's
    /// sync_file_range was dirty, under writeback, clean, not cached.
    probed: Vec<[AtomicU64; 4]>,
    /// The file each worker is copying now (for --racer).
    current: Vec<Mutex<Option<PathBuf>>>,
    /// Writebacks the racer started.
    raced: AtomicU64,
    /// Worker errors (not mismatches).
    errors: Mutex<Vec<String>>,
}

/// The calls of one iteration with their start (µs from the iteration's
/// start) and outcome: printed beside a mismatch.
#[derive(Default)]
struct Timeline {
    t0: Option<Instant>,
    steps: Vec<(u64, String)>,
}

/// How a call's result is shown in the [`Timeline`].
trait Shown {
    fn shown(&self) -> String;
}

impl Shown for () {
    fn shown(&self) -> String {
        "ok".into()
    }
}
impl Shown for usize {
    fn shown(&self) -> String {
        self.to_string()
    }
}
impl Shown for u64 {
    fn shown(&self) -> String {
        self.to_string()
    }
}
/// fcntl(F_GETFL)'s flags.
impl Shown for i32 {
    fn shown(&self) -> String {
        format!("{self:#x}")
    }
}
impl Shown for Option<u64> {
    fn shown(&self) -> String {
        format!("{self:?}")
    }
}
impl Shown for libc::stat {
    fn shown(&self) -> String {
        format!("size {}", self.st_size)
    }
}
impl Shown for std::fs::Metadata {
    fn shown(&self) -> String {
        format!("size {}", self.len())
    }
}
impl Shown for File {
    fn shown(&self) -> String {
        "ok".into()
    }
}
impl Shown for ubio::File {
    fn shown(&self) -> String {
        format!("backend {}", self.choice().backend.name())
    }
}
impl Shown for sys::CacheStat {
    fn shown(&self) -> String {
        format!(
            "cache {} dirty {} writeback {}",
            self.nr_cache, self.nr_dirty, self.nr_writeback
        )
    }
}
impl Shown for sys::FsMagic {
    fn shown(&self) -> String {
        self.name()
    }
}
impl Shown for Option<sys::DioAlign> {
    fn shown(&self) -> String {
        format!("{self:?}")
    }
}
/// mincore's vector.
impl Shown for Vec<u8> {
    fn shown(&self) -> String {
        format!(
            "{} pages resident",
            self.iter().filter(|b| **b & 1 == 1).count()
        )
    }
}

impl Timeline {
    fn start(&mut self) {
        self.t0 = Some(Instant::now());
        self.steps.clear();
    }

    /// Make call `what` (`f`), recording when and what it returned.
    fn step<T: Shown>(&mut self, what: &str, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let at = self.t0.map_or(0, |t| t.elapsed().as_micros() as u64);
        let r = f();
        let outcome = match &r {
            Ok(v) => v.shown(),
            Err(e) => format!("error: {e}"),
        };
        self.steps.push((at, format!("{what} = {outcome}")));
        r
    }

    /// A query whose failure does not matter (cachestat before 6.5).
    fn query<T: Shown>(&mut self, what: &str, f: impl FnOnce() -> io::Result<T>) {
        let _ = self.step(what, f);
    }

    fn render(&self) -> String {
        let mut s = String::new();
        for (at, what) in &self.steps {
            let _ = writeln!(s, "    +{at:>7} us  {what}");
        }
        s
    }
}

/// The bytes of iteration `i` (seeded; every byte odd, so never zero).
fn fill(seed: u64, i: u64, buf: &mut [u8]) {
    SplitMix64::new(mix(seed ^ mix(i))).fill(buf);
    for b in buf {
        *b |= 1;
    }
}

/// A file written and checked, waiting for its second read and unlink.
struct Written {
    i: u64,
    variant: Variant,
    path: PathBuf,
    /// Mismatched: kept (not unlinked) for the final report.
    bad: bool,
}

/// A worker's buffers: the bytes of the iteration, the copy's bounce
/// buffer, the read back.
struct Bufs {
    want: Vec<u8>,
    data: AlignedBuf,
    check: AlignedBuf,
}

/// `size` rounded up to the block: the O_DIRECT reads' length.
fn read_len(size: u64) -> usize {
    size.div_ceil(BLOCK) as usize * BLOCK as usize
}

/// Where the O_DIRECT body of a copy of `size` bytes ends in variant `v`:
/// before d434527 at the last 512-byte sector, since at the last
/// filesystem block.
fn body_end(v: Variant, size: u64) -> u64 {
    match v {
        Variant::Cur | Variant::Lib | Variant::Race => size / BLOCK * BLOCK,
        _ => size / 512 * 512,
    }
}

/// How the file's bytes on the disk differ from `want`: the first
/// difference and the runs of wrong bytes (zeroes apart), or None when they
/// match.
fn compare(got: &[u8], want: &[u8]) -> Option<String> {
    if got == want {
        return None;
    }
    let mut s = format!("read {} bytes, expected {}", got.len(), want.len());
    let n = got.len().min(want.len());
    let mut runs: Vec<(usize, usize, bool)> = Vec::new();
    for i in 0..n {
        if got[i] != want[i] {
            let zero = got[i] == 0;
            match runs.last_mut() {
                Some((_, end, z)) if *end == i && *z == zero => *end = i + 1,
                _ => runs.push((i, i + 1, zero)),
            }
        }
    }
    if let Some(&(first, _, _)) = runs.first() {
        let (from, to) = (first.saturating_sub(8), (first + 24).min(n));
        let _ = write!(
            s,
            "; first wrong byte at {first} (block {}, {} into it); bytes {from}..{to} expected {:02x?}, got {:02x?}",
            first as u64 / BLOCK,
            first as u64 % BLOCK,
            &want[from..to],
            &got[from..to]
        );
        let shown: Vec<String> = runs
            .iter()
            .take(8)
            .map(|(a, b, z)| format!("{a}..{b} {}", if *z { "zeroes" } else { "other" }))
            .collect();
        let more = runs.len().saturating_sub(8);
        let _ = write!(s, "; wrong runs: {}", shown.join(", "));
        if more > 0 {
            let _ = write!(s, " and {more} more");
        }
    }
    Some(s)
}

/// The file's extents (FIEMAP without sync: as the filesystem maps it now).
fn extents(fd: BorrowedFd<'_>) -> String {
    let x = match sys::fiemap(fd, false) {
        Err(e) => return format!("FIEMAP: {e}"),
        Ok(x) => x,
    };
    let named = [
        (sys::FIEMAP_EXTENT_DELALLOC, "delalloc"),
        (sys::FIEMAP_EXTENT_UNWRITTEN, "unwritten"),
        (sys::FIEMAP_EXTENT_LAST, "last"),
    ];
    x.iter()
        .map(|e| {
            let flags: Vec<&str> = named
                .iter()
                .filter(|(bit, _)| e.flags & bit != 0)
                .map(|(_, name)| *name)
                .collect();
            format!(
                "[{}..{} at disk byte {}, flags {:#x} {}]",
                e.logical,
                e.logical + e.length,
                e.physical,
                e.flags,
                flags.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One O_DIRECT read of the whole file at `fd` into `buf`: the bytes read.
fn read_direct(fd: BorrowedFd<'_>, buf: &mut AlignedBuf) -> io::Result<usize> {
    let whole = &mut [IoSliceMut::new(buf.as_mut_slice())];
    sys::preadv2(fd, whole, Some(0), RwFlags::NONE)
}

/// The source side's opening, as the copy does it: the source and its
/// O_DIRECT reopening.
fn open_source(src_path: &Path, size: u64, v: Variant, tl: &mut Timeline) -> Result<(File, File)> {
    let ctx = |what: &str| format!("{what} {}", src_path.display());
    let src = tl
        .step("open(src, O_RDONLY)", || File::open(src_path))
        .with_context(|| ctx("open"))?;
    let fd = src.as_fd();
    tl.step("fstat(src)", || sys::fstat(fd))?;
    tl.step("fcntl(src, F_GETFL)", || sys::getfl(fd))?;
    tl.step("fstatfs(src)", || sys::fs_magic(fd))?;
    tl.step("fcntl(src, F_GETFL)", || sys::getfl(fd))?;
    // The RWF_DONTCACHE probe: EOPNOTSUPP before 6.14, as in the guests.
    let mut one = [0u8; 1];
    tl.query("preadv2(src, 1 byte at the end, RWF_DONTCACHE)", || {
        let one = &mut [IoSliceMut::new(&mut one)];
        sys::preadv2(fd, one, Some(size), RwFlags::DONTCACHE)
    });
    let probe = tl
        .step("reopen(src, O_RDONLY|O_DIRECT)", || {
            ubio::descriptors::reopen(fd, libc::O_RDONLY | libc::O_DIRECT)
        })
        .with_context(|| ctx("reopen O_DIRECT"))?;
    tl.step("statx(srcdio', STATX_DIOALIGN)", || {
        sys::statx_dio_align(probe.as_fd())
    })?;
    tl.step("close(srcdio')", || sys::close(probe.into()))?;
    tl.query("cachestat(src, 0..4K)", || sys::cachestat(fd, 0..4 * KIB));
    tl.step("fcntl(src, F_GETFL)", || sys::getfl(fd))?;
    let srcdio = tl
        .step("reopen(src, O_RDONLY|O_DIRECT)", || {
            ubio::descriptors::reopen(fd, libc::O_RDONLY | libc::O_DIRECT)
        })
        .with_context(|| ctx("reopen O_DIRECT"))?;
    if v == Variant::Cur {
        tl.step("fadvise(srcdio, RANDOM)", || {
            sys::fadvise(srcdio.as_fd(), 0, 0, Advice::Random)
        })?;
        tl.step("fstat(src)", || sys::fstat(fd))?;
    }
    tl.step("statx(src)", || src.metadata())?;
    Ok((src, srcdio))
}

/// One copy of `args.size` bytes to the new file `path` with the traced
/// calls of `v` (not `lib`), writing `b.want`. Returns what the check right
/// after fsync found wrong, if anything.
fn copy_traced(
    sh: &Shared,
    v: Variant,
    src_path: &Path,
    path: &Path,
    b: &mut Bufs,
    tl: &mut Timeline,
) -> Result<Option<String>> {
    let size = sh.args.size;
    let ctx = |what: &str| format!("{what} {}", path.display());
    let (src, srcdio) = open_source(src_path, size, v, tl)?;
    let dst = tl
        .step("open(dst, O_WRONLY|O_CREAT|O_EXCL, 0644)", || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(path)
        })
        .with_context(|| ctx("create"))?;
    let (fd, sfd) = (dst.as_fd(), src.as_fd());
    tl.step("fstat(dst)", || sys::fstat(fd))?;
    tl.step("fcntl(dst, F_GETFL)", || sys::getfl(fd))?;
    tl.query("cachestat(dst, 0..4K)", || sys::cachestat(fd, 0..4 * KIB));
    tl.step("fcntl(dst, F_GETFL)", || sys::getfl(fd))?;
    let dio = tl
        .step("reopen(dst, O_RDWR|O_DIRECT)", || {
            ubio::descriptors::reopen(fd, libc::O_RDWR | libc::O_DIRECT)
        })
        .with_context(|| ctx("reopen O_RDWR|O_DIRECT"))?;
    if v == Variant::Cur {
        tl.step("fadvise(dio, RANDOM)", || {
            sys::fadvise(dio.as_fd(), 0, 0, Advice::Random)
        })?;
        tl.step("fstat(dst)", || sys::fstat(fd))?;
    }
    tl.step("statx(src)", || src.metadata())?;
    tl.step("statx(dst)", || dst.metadata())?;
    tl.query("FICLONE(dst, src)", || sys::ficlone(fd, sfd));
    tl.step("lseek(src, 0, SEEK_DATA)", || sys::seek_data(sfd, 0))?;
    tl.step("lseek(src, 0, SEEK_HOLE)", || sys::seek_hole(sfd, 0))?;
    // The source's residency: pure queries, as traced.
    tl.query("cachestat(src, 0..20M)", || {
        sys::cachestat(sfd, 0..LOOKAHEAD)
    });
    tl.query("cachestat(src, 0..2M)", || sys::cachestat(sfd, 0..WINDOW));
    tl.step("fcntl(src, F_GETFL)", || sys::getfl(sfd))?;
    tl.query("mmap+mincore(src, 0..2M)", || {
        sys::mincore_range(sfd, 0, WINDOW)
    });
    for k in 1..LOOKAHEAD / WINDOW {
        tl.query("cachestat(src, next 2M)", || {
            sys::cachestat(sfd, k * WINDOW..(k + 1) * WINDOW)
        });
    }
    tl.step("fstat(srcdio)", || sys::fstat(srcdio.as_fd()))?;
    let whole = size.div_ceil(512) as usize * 512;
    let n = tl
        .step("preadv2(srcdio, whole file, 0)", || {
            let buf = &mut [IoSliceMut::new(&mut b.data.as_mut_slice()[..whole])];
            sys::preadv2(srcdio.as_fd(), buf, Some(0), RwFlags::NONE)
        })
        .with_context(|| format!("O_DIRECT read of {}", src_path.display()))?;
    if n as u64 != size {
        bail!(
            "O_DIRECT read of {}: {n} bytes, not {size}",
            src_path.display()
        );
    }
    // The bytes this iteration writes are its own, not the source's.
    b.data.as_mut_slice()[..size as usize].copy_from_slice(&b.want);
    tl.query("cachestat(dst, 0..2M)", || sys::cachestat(fd, 0..WINDOW));
    tl.step("fstat(dst)", || sys::fstat(fd))?;
    let body = body_end(v, size);
    let data = b.data.as_slice();
    if body > 0 {
        let w = tl
            .step(
                &format!("pwritev2(dio, {body} bytes at 0) O_DIRECT body"),
                || {
                    let buf = &[IoSlice::new(&data[..body as usize])];
                    sys::pwritev2(dio.as_fd(), buf, Some(0), RwFlags::NONE)
                },
            )
            .with_context(|| ctx("O_DIRECT write"))?;
        if w as u64 != body {
            bail!("O_DIRECT write of {}: {w} of {body} bytes", path.display());
        }
        tl.step("fstat(dst)", || sys::fstat(fd))?;
    }
    if body < size && v != Variant::CtlLost {
        let tail = &data[body as usize..size as usize];
        let what = format!(
            "pwritev2(dst, {} bytes at {body}) buffered tail",
            tail.len()
        );
        let w = tl
            .step(&what, || {
                sys::pwritev2(fd, &[IoSlice::new(tail)], Some(body), RwFlags::NONE)
            })
            .with_context(|| ctx("buffered write"))?;
        if w != tail.len() {
            bail!(
                "buffered write of {}: {w} of {} bytes",
                path.display(),
                tail.len()
            );
        }
    }
    tl.step("fstat(srcdio)", || sys::fstat(srcdio.as_fd()))?;
    if v == Variant::I3 || v == Variant::CtlLost {
        tl.step(&format!("ftruncate(dst, {size})"), || {
            sys::ftruncate(fd, size)
        })
        .with_context(|| ctx("ftruncate"))?;
    } else {
        tl.step("statx(dst)", || dst.metadata())?;
    }
    tl.step("statx(src)", || src.metadata())?;
    let end = read_len(size) as u64;
    if sh.args.probe {
        let page = (size - 1) / BLOCK * BLOCK;
        let c = tl.step("probe: cachestat(dst, tail page)", || {
            sys::cachestat(fd, page..page + BLOCK)
        })?;
        let state = match c {
            c if c.nr_writeback > 0 => 1,
            c if c.nr_dirty > 0 => 0,
            c if c.nr_cache > 0 => 2,
            _ => 3,
        };
        sh.probed[v as usize][state].fetch_add(1, Ordering::Relaxed);
    }
    if v == Variant::CtlDirty {
        let found = check_after_fsync(dio.as_fd(), fd, size, b, tl)?;
        return Ok(found.map(|f| format!("{f}; extents {}", extents(fd))));
    }
    tl.step("sync_file_range(dst, WRITE)", || {
        sys::sync_file_range(fd, 0, end, SyncFlags::WRITE)
    })
    .with_context(|| ctx("sync_file_range"))?;
    tl.step("sync_file_range(dst, WAIT_BEFORE|WRITE|WAIT_AFTER)", || {
        sys::sync_file_range(fd, 0, end, SyncFlags::WRITE_AND_WAIT)
    })
    .with_context(|| ctx("sync_file_range"))?;
    tl.query("cachestat(dst, 0..2M)", || sys::cachestat(fd, 0..WINDOW));
    tl.step("fadvise(dst, 0, 2M, DONTNEED)", || {
        sys::fadvise(fd, 0, WINDOW, Advice::DontNeed)
    })?;
    tl.query("cachestat(dst, 0..2M)", || sys::cachestat(fd, 0..WINDOW));
    tl.step("fsync(dst)", || dst.sync_all())
        .with_context(|| ctx("fsync"))?;
    let found = check_after_fsync(dio.as_fd(), fd, size, b, tl)?;
    tl.query("cachestat(src, end..2M)", || {
        sys::cachestat(sfd, end..WINDOW)
    });
    for _ in 0..2 {
        tl.query("cachestat(src, end..20M)", || {
            sys::cachestat(sfd, end..LOOKAHEAD)
        });
    }
    tl.step("close(src)", || sys::close(src.into()))?;
    tl.step("close(srcdio)", || sys::close(srcdio.into()))?;
    for _ in 0..2 {
        tl.query("cachestat(dst, 0..2M)", || sys::cachestat(fd, 0..WINDOW));
    }
    let found = found.map(|f| format!("{f}; extents {}", extents(fd)));
    tl.step("close(dst)", || sys::close(dst.into()))
        .with_context(|| ctx("close"))?;
    tl.step("close(dio)", || sys::close(dio.into()))?;
    Ok(found)
}

/// Right after fsync returned: no page of the file may still be dirty or
/// under writeback, and an O_DIRECT read (`dio`) must find every byte of
/// `b.want`.
fn check_after_fsync(
    dio: BorrowedFd<'_>,
    fd: BorrowedFd<'_>,
    size: u64,
    b: &mut Bufs,
    tl: &mut Timeline,
) -> Result<Option<String>> {
    let mut wrong = Vec::new();
    match tl.step("check: cachestat(dst, 0..size)", || {
        sys::cachestat(fd, 0..size)
    }) {
        Ok(c) if c.nr_dirty + c.nr_writeback > 0 => wrong.push(format!(
            "after fsync {} pages dirty, {} under writeback",
            c.nr_dirty, c.nr_writeback
        )),
        Ok(_) => {}
        // Before 6.5: not counted (the O_DIRECT read still checks the disk).
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
        Err(e) => return Err(e).context("cachestat after fsync"),
    }
    let n = tl
        .step("check: preadv2(dio, whole file, 0) O_DIRECT", || {
            read_direct(dio, &mut b.check)
        })
        .context("O_DIRECT read after fsync")?;
    if let Some(d) = compare(&b.check.as_slice()[..n], &b.want) {
        wrong.push(d);
    }
    Ok((!wrong.is_empty()).then(|| wrong.join("; ")))
}

/// The `lib` and `race` variants: the library itself.
fn copy_lib(
    sh: &Shared,
    v: Variant,
    src_path: &Path,
    path: &Path,
    b: &mut Bufs,
    tl: &mut Timeline,
) -> Result<Option<String>> {
    let ctx = |what: &str| format!("{what} {}", path.display());
    let direct = || {
        let mut o = ubio::OpenOptions::new();
        match v {
            Variant::Race => o
                .backend(BackendKind::Emulated)
                .direct_writes(ubio::DirectWrites::Always),
            _ => o.backend(BackendKind::Direct),
        };
        o
    };
    let src = tl
        .step("ubio open(src)", || direct().read(true).open(src_path))
        .with_context(|| format!("open {}", src_path.display()))?;
    let dst = tl
        .step("ubio open(dst, create_new, 0644)", || {
            direct().write(true).create_new(true).mode(0o644).open(path)
        })
        .with_context(|| ctx("create"))?;
    let size = sh.args.size as usize;
    tl.step("ubio read_exact_at(src, whole file, 0)", || {
        src.read_exact_at(&mut b.data.as_mut_slice()[..size], 0)
    })
    .with_context(|| format!("read {}", src_path.display()))?;
    if v == Variant::Race {
        let body = body_end(v, sh.args.size) as usize;
        let data = &mut b.data.as_mut_slice()[..size];
        data.copy_from_slice(&b.want);
        tl.step("ubio write_all_at(dst, aligned body, 0)", || {
            dst.write_all_at(&data[..body], 0)
        })
        .with_context(|| ctx("write"))?;
        tl.step("ubio write_all_at(dst, tail, body)", || {
            dst.write_all_at(&data[body..], body as u64)
        })
        .with_context(|| ctx("write"))?;
        if dst.stats().bytes_written_direct != body as u64 {
            bail!(
                "race: {} of the body's {body} bytes went through O_DIRECT",
                dst.stats().bytes_written_direct
            );
        }
    } else {
        tl.step("ubio write_all_at(dst, whole file, 0)", || {
            dst.write_all_at(&b.want, 0)
        })
        .with_context(|| ctx("write"))?;
    }
    tl.step("ubio sync_all(dst)", || dst.sync_all())
        .with_context(|| ctx("sync_all"))?;
    let dio = tl
        .step("check: open(dst, O_RDONLY|O_DIRECT)", || {
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
        })
        .with_context(|| ctx("open O_DIRECT"))?;
    let found = check_after_fsync(dio.as_fd(), dst.get_ref().as_fd(), sh.args.size, b, tl)?;
    let found = found.map(|f| format!("{f}; extents {}", extents(dio.as_fd())));
    drop(dio);
    tl.step("ubio close(src)", || src.close().map(drop))?;
    tl.step("ubio close(dst)", || dst.close().map(drop))
        .with_context(|| ctx("close"))?;
    Ok(found)
}

/// The second look, `--keep` iterations later, by path: O_DIRECT read, then
/// unlink (a mismatched file stays).
fn late_check(sh: &Shared, w: &Written, b: &mut Bufs) -> Result<Option<String>> {
    fill(sh.args.seed, w.i, &mut b.want);
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&w.path)
        .with_context(|| format!("open O_DIRECT {}", w.path.display()))?;
    let n = read_direct(f.as_fd(), &mut b.check)
        .with_context(|| format!("O_DIRECT read {}", w.path.display()))?;
    let found = compare(&b.check.as_slice()[..n], &b.want)
        .map(|d| format!("{d}; extents {}", extents(f.as_fd())));
    drop(f);
    if found.is_none() && !w.bad {
        std::fs::remove_file(&w.path).with_context(|| format!("unlink {}", w.path.display()))?;
    }
    Ok(found)
}

/// [`late_check`], reported: a new mismatch counts, a file already found
/// wrong after its fsync is only shown again.
fn late(sh: &Shared, w: &Written, b: &mut Bufs) -> Result<()> {
    let keep = sh.args.keep;
    match late_check(sh, w, b)? {
        Some(what) if w.bad => println!(
            "TAILDETECT-LATE iteration {} file {}: still wrong {keep} iterations later: {what}",
            w.i,
            w.path.display()
        ),
        Some(what) => report(sh, "late", w, &what, None),
        None if w.bad => println!(
            "TAILDETECT-LATE iteration {} file {}: right {keep} iterations later",
            w.i,
            w.path.display()
        ),
        None => {}
    }
    Ok(())
}

/// Print a mismatch in full (the iteration's calls when `tl` has them);
/// stop everything after `--max-mismatches`.
fn report(sh: &Shared, check: &str, w: &Written, what: &str, tl: Option<&Timeline>) {
    sh.bad[w.variant as usize].fetch_add(1, Ordering::SeqCst);
    let n = sh.mismatches.fetch_add(1, Ordering::SeqCst) + 1;
    let size = sh.args.size;
    let body = body_end(w.variant, size);
    let mut s = format!(
        "TAILDETECT-MISMATCH {n} (check {check}): iteration {} variant {} file {} size {size} (O_DIRECT body 0..{body}, buffered tail {body}..{size}): {what}\n",
        w.i,
        w.variant.name(),
        w.path.display()
    );
    if let Some(tl) = tl {
        s.push_str("  the iteration's calls:\n");
        s.push_str(&tl.render());
    }
    print!("{s}");
    if n >= sh.args.max_mismatches {
        sh.stop.store(true, Ordering::SeqCst);
    }
}

fn worker(sh: &Shared, id: usize) -> Result<()> {
    let a = &sh.args;
    // One directory for every worker, as `cp -r`'s workers share dst/.
    let dir = sh.root.join("dst");
    // The source: written once, durable, its cache dropped (the copy reads
    // it with O_DIRECT either way).
    let src_path = sh.root.join(format!("src{id}"));
    {
        let mut data = vec![0u8; a.size as usize];
        fill(a.seed ^ 0x5eed, id as u64, &mut data);
        std::fs::write(&src_path, &data)
            .with_context(|| format!("write {}", src_path.display()))?;
        let f = File::open(&src_path)?;
        f.sync_all()
            .with_context(|| format!("fsync {}", src_path.display()))?;
        sys::fadvise(f.as_fd(), 0, 0, Advice::DontNeed)?;
    }
    let len = read_len(a.size);
    let mut b = Bufs {
        want: vec![0u8; a.size as usize],
        data: AlignedBuf::new(len, BLOCK as usize),
        check: AlignedBuf::new(len, BLOCK as usize),
    };
    let mut pending: VecDeque<Written> = VecDeque::new();
    let mut tl = Timeline::default();
    while !sh.stop.load(Ordering::SeqCst) {
        let i = sh.next.fetch_add(1, Ordering::SeqCst);
        if i >= a.iterations {
            break;
        }
        sh.active.fetch_add(1, Ordering::SeqCst);
        let r = (|| -> Result<()> {
            let v = a.variants[(i % a.variants.len() as u64) as usize];
            let path = dir.join(format!("f{i}"));
            fill(a.seed, i, &mut b.want);
            tl.start();
            if a.racer {
                *sh.current[id].lock().unwrap() = Some(path.clone());
            }
            let found = match v {
                Variant::Lib | Variant::Race => copy_lib(sh, v, &src_path, &path, &mut b, &mut tl)?,
                _ => copy_traced(sh, v, &src_path, &path, &mut b, &mut tl)?,
            };
            if a.racer {
                *sh.current[id].lock().unwrap() = None;
            }
            let mut w = Written {
                i,
                variant: v,
                path,
                bad: false,
            };
            if let Some(what) = found {
                w.bad = true;
                report(sh, "after fsync", &w, &what, Some(&tl));
            }
            sh.done[v as usize].fetch_add(1, Ordering::SeqCst);
            pending.push_back(w);
            while pending.len() > a.keep {
                let old = pending.pop_front().expect("not empty");
                late(sh, &old, &mut b)?;
            }
            Ok(())
        })();
        sh.active.fetch_sub(1, Ordering::SeqCst);
        r?;
    }
    // The files still kept get their second look too (not after a signal:
    // the filesystem is being taken down).
    for w in pending {
        if cleanup::signal_caught().is_some() {
            break;
        }
        late(sh, &w, &mut b)?;
    }
    Ok(())
}

/// `--racer`: while the workers run, start the writeback of the files they
/// are copying, again and again (the file may not exist yet, or be gone:
/// then the next one).
fn racer(sh: &Shared, finished: &AtomicUsize) {
    while finished.load(Ordering::SeqCst) < sh.args.threads && !sh.stop.load(Ordering::SeqCst) {
        let mut any = false;
        for slot in &sh.current {
            let Some(path) = slot.lock().unwrap().clone() else {
                continue;
            };
            let Ok(f) = File::open(&path) else {
                continue;
            };
            any = true;
            // This file for as long as the worker is on it, in bursts.
            while slot.lock().unwrap().as_ref() == Some(&path) {
                for _ in 0..16 {
                    let _ = sys::sync_file_range(f.as_fd(), 0, 0, SyncFlags::WRITE);
                    sh.raced.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if !any {
            std::thread::yield_now();
        }
    }
}

/// Set a vm sysctl for the run; the returned pair restores it.
fn sysctl_set(name: &str, value: u32) -> Result<(PathBuf, String)> {
    let path = PathBuf::from(format!("/proc/sys/vm/{name}"));
    let old = std::fs::read_to_string(&path)
        .with_context(|| format!("read {}", path.display()))?
        .trim()
        .to_string();
    std::fs::write(&path, format!("{value}\n"))
        .with_context(|| format!("write {value} to {}", path.display()))?;
    println!("TAILDETECT-SYSCTL vm.{name} {old} -> {value} (restored at exit)");
    Ok((path, old))
}

fn run(a: Args) -> Result<bool> {
    if a.size == 0 || a.size > WINDOW {
        bail!(
            "--size {}: from 1 byte to 2 MiB (the traced ranges are one 2 MiB window's)",
            a.size
        );
    }
    if a.variants.is_empty() || a.threads == 0 {
        bail!("--variants and --threads: at least one");
    }
    if !ubio_testenv::is_root() {
        bail!("root is needed (losetup, mount, vm sysctls)");
    }
    cleanup::after_signal(AfterSignal::Return)?;
    // Restored last (registered first): on a signal, after the workers
    // stopped and the filesystem went.
    let saved: Arc<Mutex<Vec<(PathBuf, String)>>> = Arc::default();
    let restore = {
        let saved = Arc::clone(&saved);
        cleanup::register("restore vm.dirty_* sysctls", move || {
            // Every value back first, then the words: printing may fail (a
            // closed pipe) and must not keep a value from being restored.
            let restored: Vec<String> = saved
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
                .map(
                    |(path, old)| match std::fs::write(&path, format!("{old}\n")) {
                        Ok(()) => format!("TAILDETECT-SYSCTL {} restored to {old}", path.display()),
                        Err(e) => format!(
                            "TAILDETECT-SYSCTL cannot restore {} to {old}: {e} (do it by hand)",
                            path.display()
                        ),
                    },
                )
                .collect();
            for line in restored {
                if writeln!(io::stdout(), "{line}").is_err() {
                    let _ = writeln!(io::stderr(), "{line}");
                }
            }
        })
    };
    let opts = ScratchOpts {
        backing_dir: a.backing_dir.clone(),
        mount_options: vec!["commit=1".into()],
        ..Default::default()
    };
    let fs = ScratchFs::create(FsKind::Ext4, a.fs_mib * MIB, &opts).context("scratch ext4")?;
    let root = fs.mount_point().join("t");
    std::fs::create_dir_all(root.join("dst"))
        .with_context(|| format!("mkdir {}/dst", root.display()))?;
    let mountline = std::fs::read_to_string("/proc/self/mounts")?
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(&fs.mount_point().to_string_lossy()))
        .unwrap_or("?")
        .to_string();
    println!(
        "TAILDETECT-SETUP kernel {}; {mountline}; loop device {:?} over {:?} (direct I/O: {:?})",
        sys::kernel_release(),
        fs.loop_device(),
        fs.backing_file(),
        fs.direct_io()
    );
    let expire = match a.expire_centisecs.as_str() {
        "keep" => None,
        n => Some(n.parse::<u32>().with_context(|| {
            format!("--expire-centisecs {n}: a number of centiseconds or `keep`")
        })?),
    };
    let settings = [
        ("dirty_writeback_centisecs", Some(a.writeback_centisecs)),
        ("dirty_expire_centisecs", expire),
    ];
    for (name, value) in settings {
        match value {
            Some(v) => {
                let pair = sysctl_set(name, v)?;
                saved.lock().unwrap().push(pair);
            }
            None => println!(
                "TAILDETECT-SYSCTL vm.{name} {} (kept)",
                std::fs::read_to_string(format!("/proc/sys/vm/{name}"))?.trim()
            ),
        }
    }
    let nv = a.variants.len();
    let sh = Arc::new(Shared {
        root,
        next: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        mismatches: AtomicU64::new(0),
        done: (0..Variant::value_variants().len())
            .map(|_| AtomicU64::new(0))
            .collect(),
        bad: (0..Variant::value_variants().len())
            .map(|_| AtomicU64::new(0))
            .collect(),
        probed: (0..Variant::value_variants().len())
            .map(|_| Default::default())
            .collect(),
        current: (0..a.threads).map(|_| Mutex::new(None)).collect(),
        raced: AtomicU64::new(0),
        errors: Mutex::new(Vec::new()),
        args: a,
    });
    println!(
        "TAILDETECT-START {} iterations of {} ({} variant(s) in turn), {} bytes each, {} workers, {} files kept per worker, seed {}",
        sh.args.iterations,
        sh.args.variants.iter().map(|v| v.name()).collect::<Vec<_>>().join(","),
        nv,
        sh.args.size,
        sh.args.threads,
        sh.args.keep,
        sh.args.seed
    );
    // Runs first on a signal: stop the workers and wait for them to leave
    // their iteration, so the filesystem can be unmounted.
    let stopper = {
        let sh = Arc::clone(&sh);
        cleanup::register("stop the workers", move || {
            sh.stop.store(true, Ordering::SeqCst);
            let t = Instant::now();
            while sh.active.load(Ordering::SeqCst) > 0 && t.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let t0 = Instant::now();
    let finished = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for id in 0..sh.args.threads {
            let (sh, finished) = (&sh, &finished);
            s.spawn(move || {
                if let Err(e) = worker(sh, id) {
                    sh.errors
                        .lock()
                        .unwrap()
                        .push(format!("worker {id}: {e:#}"));
                    sh.stop.store(true, Ordering::SeqCst);
                }
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        if sh.args.racer {
            let (sh, finished) = (&sh, &finished);
            s.spawn(move || racer(sh, finished));
        }
        let mut last = Instant::now();
        while finished.load(Ordering::SeqCst) < sh.args.threads {
            std::thread::sleep(Duration::from_millis(200));
            if last.elapsed() >= Duration::from_secs(sh.args.progress_secs) {
                last = Instant::now();
                let done: u64 = sh.done.iter().map(|d| d.load(Ordering::SeqCst)).sum();
                println!(
                    "TAILDETECT-PROGRESS {done} iterations in {:.0} s ({:.1}/s), {} mismatches",
                    t0.elapsed().as_secs_f64(),
                    done as f64 / t0.elapsed().as_secs_f64(),
                    sh.mismatches.load(Ordering::SeqCst)
                );
            }
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    drop(stopper);
    let kernel = sys::kernel_release();
    let mut total = 0;
    for &v in sh
        .args
        .variants
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
    {
        let d = sh.done[v as usize].load(Ordering::SeqCst);
        total += d;
        let p: Vec<u64> = sh.probed[v as usize]
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .collect();
        let probed = match sh.args.probe && !matches!(v, Variant::Lib | Variant::Race) {
            true => format!(
                " (probe, the tail page before sync_file_range: dirty {}, under writeback {}, clean {}, not cached {})",
                p[0], p[1], p[2], p[3]
            ),
            false => String::new(),
        };
        println!(
            "TAILDETECT-RESULT {kernel} {}: {d} iterations, {} mismatches{probed}",
            v.name(),
            sh.bad[v as usize].load(Ordering::SeqCst)
        );
    }
    let errors = sh.errors.lock().unwrap().clone();
    for e in &errors {
        println!("TAILDETECT-ERROR {e}");
    }
    if sh.args.racer {
        println!(
            "TAILDETECT-RACER {} writebacks started by the racer",
            sh.raced.load(Ordering::SeqCst)
        );
    }
    let mismatches = sh.mismatches.load(Ordering::SeqCst);
    let signal = cleanup::signal_caught();
    println!(
        "TAILDETECT-DONE {kernel}: {total} of {} iterations in {secs:.1} s ({:.1}/s), {mismatches} mismatches{}",
        sh.args.iterations,
        total as f64 / secs,
        signal.map_or(String::new(), |s| format!(", stopped by {}", cleanup::signal_name(s)))
    );
    drop(fs);
    drop(restore);
    if !errors.is_empty() {
        bail!("{} worker error(s)", errors.len());
    }
    if let Some(s) = signal {
        bail!("stopped by {}", cleanup::signal_name(s));
    }
    Ok(mismatches == 0 && total == sh.args.iterations)
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!("TAILDETECT-FAILED {e:#}");
            ExitCode::from(2)
        }
    }
}
