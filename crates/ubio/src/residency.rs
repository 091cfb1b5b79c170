//! Which pages of a file were cached before this stream touched them.
//!
//! The contract says pages cached by others stay cached. The only moment we
//! can tell "theirs" from "ours" is before our own I/O (or its readahead)
//! reaches a region, so regions are snapshotted ahead of the stream, in
//! chunks, and remembered as byte ranges: `known` (snapshotted) and
//! `precached` (resident at snapshot time). A cold file costs one
//! cachestat() per lookahead step and two ranges of memory.
//!
//! [`count`] is the one place that counts a file's cached pages for everyone
//! (the command's `stat`, the samplers, the tests): cachestat(), or mincore()
//! where cachestat() is missing or refused, saying which and why.

use crate::sys::{self, page_size, CacheStat, FileRange};
use rangemap::RangeSet;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// Why a [`Count`] came from mincore() instead of cachestat().
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// cachestat() said ENOSYS: Linux before 6.5.
    NoCachestat,
    /// cachestat() said ENOSYS on a kernel that has it (6.5+): a seccomp
    /// filter refuses it (a container runtime's default profile).
    CachestatBlocked,
    /// cachestat() said EPERM: the caller can neither write nor own the
    /// file, and for such files mincore() reports every page resident.
    NotPermitted,
    /// An overlayfs descriptor whose real file cannot be found: cachestat()
    /// sees only the overlay's own, empty, mapping, while mincore() of a
    /// mapping of the descriptor sees the real file's pages.
    OverlayHidden,
}

impl Fallback {
    /// The fallback an error of cachestat() calls for, if any.
    pub fn of(e: &io::Error) -> Option<Fallback> {
        match e.raw_os_error() {
            Some(libc::ENOSYS) if crate::sys::kernel_at_least(6, 5) => {
                Some(Fallback::CachestatBlocked)
            }
            Some(libc::ENOSYS) => Some(Fallback::NoCachestat),
            Some(libc::EPERM) => Some(Fallback::NotPermitted),
            _ => None,
        }
    }

    /// What the fallback means for the numbers, in a sentence.
    pub fn note(self) -> &'static str {
        match self {
            Fallback::NotPermitted => {
                "cachestat() refused (EPERM: you can neither write nor own this file); \
                 mincore() reports every page resident for such files, so cached is an upper bound"
            }
            Fallback::NoCachestat => {
                "cachestat() unavailable (ENOSYS: Linux before 6.5); cached pages from mincore()"
            }
            Fallback::CachestatBlocked => {
                "cachestat() refused (ENOSYS on a kernel that has it: a seccomp filter, as a \
                 container runtime's default profile, blocks syscall 451); cached pages from \
                 mincore(), which reports every page resident for files you cannot write"
            }
            Fallback::OverlayHidden => {
                "overlayfs: the real file cannot be found and cachestat() sees only the overlay's \
                 empty mapping; cached pages from mincore() of the overlay's mapping"
            }
        }
    }
}

/// Where a [`Count`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Cachestat,
    /// Cached pages only: dirty, writeback and eviction counts are unknown.
    Mincore {
        why: Fallback,
        /// False when mincore() reports every page resident (a file the
        /// caller can neither write nor own): `cached` is an upper bound.
        truthful: bool,
    },
}

/// A file range's page-cache state, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Count {
    pub cached: u64,
    pub dirty: Option<u64>,
    pub writeback: Option<u64>,
    pub evicted: Option<u64>,
    pub recently_evicted: Option<u64>,
    pub source: Source,
}

impl From<CacheStat> for Count {
    fn from(cs: CacheStat) -> Count {
        Count {
            cached: cs.nr_cache,
            dirty: Some(cs.nr_dirty),
            writeback: Some(cs.nr_writeback),
            evicted: Some(cs.nr_evicted),
            recently_evicted: Some(cs.nr_recently_evicted),
            source: Source::Cachestat,
        }
    }
}

/// Count the pages of `range` of the file behind `fd` in the page cache:
/// cachestat(), or, where it says ENOSYS or EPERM, mincore() (through a
/// read-only reopen if `fd` is write-only), with [`Count::source`] saying so.
pub fn count(fd: BorrowedFd<'_>, range: impl Into<FileRange>) -> io::Result<Count> {
    let range = range.into();
    let e = match sys::cachestat(fd, range.clone()) {
        Ok(cs) => return Ok(cs.into()),
        Err(e) => e,
    };
    let Some(why) = Fallback::of(&e) else {
        return Err(e);
    };
    count_mincore(fd, range, why)
}

/// `range` of the file behind `fd` counted with mincore() (through a
/// read-only reopen if `fd` is write-only), for the reason `why`.
pub(crate) fn count_mincore(
    fd: BorrowedFd<'_>,
    range: FileRange,
    why: Fallback,
) -> io::Result<Count> {
    let r = range.within(sys::fstat(fd)?.st_size as u64);
    let readable = readable_fd(fd)?;
    Ok(Count {
        cached: sys::mincore_resident(readable.fd(), r.start, r.end - r.start)?,
        dirty: None,
        writeback: None,
        evicted: None,
        recently_evicted: None,
        source: Source::Mincore {
            why,
            truthful: why != Fallback::NotPermitted && mincore_trustworthy(fd),
        },
    })
}

/// [`count`] of `range` of the file at `path` (opened read-only), the error
/// naming the file.
pub fn count_path(path: &Path, range: impl Into<FileRange>) -> io::Result<Count> {
    let f = File::open(path).map_err(|e| crate::error::context(e, "open", Some(path)))?;
    count(f.as_fd(), range).map_err(|e| crate::error::context(e, "cachestat", Some(path)))
}

/// A whole file's size and page-cache state, counted on the file that holds
/// the pages: for an overlayfs descriptor, the real upper or lower file
/// (cachestat() on the overlay's own mapping always says 0). What `ubio
/// stat`, `ubio evict`, the C API and the Python module report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileCount {
    pub size_bytes: u64,
    /// Pages of [`page_size`] bytes the file spans.
    pub pages: u64,
    pub count: Count,
    /// The real file behind an overlay descriptor, when that is what was counted.
    pub real_file: Option<std::path::PathBuf>,
}

impl FileCount {
    /// Count the whole file behind `fd`.
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<FileCount> {
        FileCount::with(&PageHolder::of(fd)?, fd)
    }

    pub(crate) fn with(holder: &PageHolder, fd: BorrowedFd<'_>) -> io::Result<FileCount> {
        let size_bytes = sys::fstat(fd)?.st_size as u64;
        Ok(FileCount {
            size_bytes,
            pages: size_bytes.div_ceil(page_size()),
            count: holder.count(fd, FileRange::WHOLE)?,
            real_file: holder.real_path(),
        })
    }
}

/// The file whose mapping holds the pages of `fd`'s file: `fd`'s own, the
/// real file behind an overlayfs descriptor, or, where that real file
/// cannot be found, what overlayfs forwards (the same fallback a stream
/// takes: mincore() of the overlay's mapping, fadvise, fdatasync).
pub(crate) enum PageHolder {
    Own,
    Real(crate::overlay::RealFile),
    OverlayFallback,
}

impl PageHolder {
    pub(crate) fn of(fd: BorrowedFd<'_>) -> io::Result<PageHolder> {
        if sys::fs_magic(fd)? != sys::FsMagic::OVERLAYFS {
            return Ok(PageHolder::Own);
        }
        Ok(match crate::overlay::RealFile::open(fd) {
            Ok(real) => PageHolder::Real(real),
            Err(e) => {
                log::debug!("{}", crate::overlay::fallback_note(&e));
                PageHolder::OverlayFallback
            }
        })
    }

    /// The descriptor to count, drop and write back through.
    pub(crate) fn fd<'a>(&'a self, own: BorrowedFd<'a>) -> BorrowedFd<'a> {
        match self {
            PageHolder::Own | PageHolder::OverlayFallback => own,
            PageHolder::Real(r) => r.fd(),
        }
    }

    /// Count `range` of the pages.
    pub(crate) fn count(&self, own: BorrowedFd<'_>, range: FileRange) -> io::Result<Count> {
        match self {
            PageHolder::OverlayFallback => count_mincore(own, range, Fallback::OverlayHidden),
            _ => count(self.fd(own), range),
        }
    }

    /// Write the dirty pages back and wait: sync_file_range, which does not
    /// reach through an overlay descriptor, so fdatasync in the fallback.
    pub(crate) fn write_back(&self, own: BorrowedFd<'_>) -> io::Result<()> {
        match self {
            PageHolder::OverlayFallback => sys::fdatasync(own),
            _ => sys::sync_file_range(self.fd(own), 0, 0, sys::SyncFlags::WRITE_AND_WAIT),
        }
    }

    fn real_path(&self) -> Option<std::path::PathBuf> {
        match self {
            PageHolder::Real(r) => Some(r.path().to_path_buf()),
            _ => None,
        }
    }
}

/// A descriptor of the same file that can be read: `fd` itself, or a
/// read-only reopen of a write-only one.
pub(crate) enum Readable<'a> {
    Same(BorrowedFd<'a>),
    Reopened(File),
}

impl Readable<'_> {
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Readable::Same(fd) => *fd,
            Readable::Reopened(f) => f.as_fd(),
        }
    }
}

pub(crate) fn readable_fd(fd: BorrowedFd<'_>) -> io::Result<Readable<'_>> {
    if sys::getfl(fd)? & libc::O_ACCMODE == libc::O_WRONLY {
        crate::descriptors::reopen(fd, libc::O_RDONLY).map(Readable::Reopened)
    } else {
        Ok(Readable::Same(fd))
    }
}

/// Snapshot granularity; also the alignment of drop ranges, so that drops
/// cover whole large folios (up to 2 MiB on x86_64).
pub const CHUNK: u64 = 2 << 20;

/// Why residency of a file cannot be known, if it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blindness {
    /// cachestat() said EPERM and mincore() reports every page resident for
    /// files the caller cannot write (Linux 5.2+): nothing can be told apart.
    NotWritable,
    /// Neither cachestat() nor a trustworthy mincore() is available.
    NoInterface(String),
}

impl std::fmt::Display for Blindness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blindness::NotWritable => write!(
                f,
                "residency unknowable: cachestat() says EPERM and mincore() reports every page \
                 resident for a file the caller cannot write; no page is dropped"
            ),
            Blindness::NoInterface(why) => {
                write!(f, "residency unknowable ({why}); no page is dropped")
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct Residency {
    /// False when the caller asked not to preserve others' pages: regions
    /// are still recorded as known, but nothing is looked at.
    preserve: bool,
    known: RangeSet<u64>,
    /// The known range that answered the last query: most queries of a
    /// stream fall inside it, and then cost one comparison.
    hot: Range<u64>,
    precached: RangeSet<u64>,
    blind: Option<Blindness>,
    /// A read-only descriptor for mincore() when the stream's own is write-only.
    mincore_fd: Option<std::fs::File>,
    /// Look with mincore() only: cachestat() sees another mapping than the
    /// one I/O fills (an overlay descriptor whose real file is not found;
    /// its mmap maps the real file).
    mincore_only: bool,
    pub snapshots: u64,
}

fn align_down(x: u64, a: u64) -> u64 {
    x / a * a
}
fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl Residency {
    /// Start tracking a file. `blind` is what [`blindness`] found for it
    /// (the stream asks once, to choose its backend too); with `preserve`
    /// false it does not matter.
    pub fn new(preserve: bool, blind: Option<Blindness>) -> Residency {
        Residency {
            preserve,
            blind: blind.filter(|_| preserve),
            ..Residency::default()
        }
    }

    pub fn blindness(&self) -> Option<&Blindness> {
        self.blind.as_ref()
    }

    /// From now on look with mincore() only (see `mincore_only`).
    pub fn use_mincore_only(&mut self) {
        self.mincore_only = true;
    }

    /// Pages (4 KiB) that were cached before the stream and are left alone.
    pub fn precached_pages(&self) -> u64 {
        self.precached
            .iter()
            .map(|r| (r.end - r.start) / page_size())
            .sum()
    }

    /// True if any byte of `range` was cached before the stream.
    pub fn overlaps_precached(&self, range: &Range<u64>) -> bool {
        self.precached.overlaps(range)
    }

    /// Bytes of `range` that were cached before the stream.
    pub fn precached_bytes(&self, range: &Range<u64>) -> u64 {
        self.precached
            .overlapping(range)
            .map(|r| r.end.min(range.end) - r.start.max(range.start))
            .sum()
    }

    /// The first offset at or after `at` that is not in a range cached
    /// before the stream.
    pub fn past_precached(&self, at: u64) -> u64 {
        self.precached.get(&at).map_or(at, |r| r.end)
    }

    /// The parts of `range` that are known and were not cached before: the
    /// only pages this stream may drop.
    pub fn droppable(&self, range: Range<u64>) -> Vec<Range<u64>> {
        if self.blind.is_some() || range.is_empty() {
            return Vec::new();
        }
        if !self.preserve {
            return vec![range];
        }
        let mut out = Vec::new();
        for known in self.known.overlapping(&range) {
            let part = range.start.max(known.start)..range.end.min(known.end);
            out.extend(self.precached.gaps(&part));
        }
        out
    }

    /// Every known range that was not precached: what a final cleanup drops.
    pub fn all_droppable(&self) -> Vec<Range<u64>> {
        let ranges: Vec<_> = self.known.iter().cloned().collect();
        ranges.into_iter().flat_map(|r| self.droppable(r)).collect()
    }

    /// Record `range` as known and holding no page of others, without
    /// looking: for an observer that arrives after the stream (the engine of
    /// `ubio run`) and has decided from elsewhere whose the pages are. Also
    /// where a snapshot already took them for others' (a write under way
    /// while it looked): the decision replaces what it saw.
    pub fn mark_cold(&mut self, range: Range<u64>) {
        if !range.is_empty() {
            self.precached.remove(range.clone());
            self.known.insert(range);
        }
    }

    /// The chunks of `range` holding pages taken for others' (cached
    /// before the stream).
    pub fn precached_chunks(&self, range: Range<u64>) -> Vec<Range<u64>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        for r in self.precached.overlapping(&range) {
            let mut at = align_down(r.start.max(range.start), CHUNK);
            while at < r.end.min(range.end) {
                if out.last().is_none_or(|l| l.start != at) {
                    out.push(at..at + CHUNK);
                }
                at += CHUNK;
            }
        }
        out
    }

    /// Make sure `[start, end)` (widened to chunks) has been snapshotted.
    pub fn ensure_known(&mut self, fd: BorrowedFd<'_>, start: u64, end: u64) {
        if self.blind.is_some() || start >= end || (self.hot.start <= start && end <= self.hot.end)
        {
            return;
        }
        let want = align_down(start, CHUNK)..align_up(end, CHUNK);
        if !self.preserve {
            self.known.insert(want.clone());
            self.hot = self.known.get(&want.start).cloned().unwrap_or_default();
            return;
        }
        let gaps: Vec<_> = self.known.gaps(&want).collect();
        for gap in gaps {
            self.snapshot(fd, gap);
            if self.blind.is_some() {
                return;
            }
        }
        if let Some(r) = self.known.get(&want.start) {
            self.hot = r.clone();
        }
    }

    fn snapshot(&mut self, fd: BorrowedFd<'_>, range: Range<u64>) {
        self.snapshots += 1;
        let stat = match self.mincore_only {
            true => Err(io::Error::other("cachestat() sees another mapping")),
            false => sys::cachestat(fd, range.clone()),
        };
        match stat {
            Ok(cs) if cs.nr_cache == 0 => {
                self.known.insert(range);
            }
            // Something is cached: look chunk by chunk.
            Ok(_) => self.each_chunk(fd, range, Self::snapshot_chunk),
            Err(e) if Fallback::of(&e) == Some(Fallback::NotPermitted) => {
                self.blind = Some(Blindness::NotWritable);
            }
            Err(e) => {
                // No cachestat (before Linux 6.5): mincore alone, if it tells the truth.
                if mincore_trustworthy(fd) {
                    self.each_chunk(fd, range, Self::snapshot_chunk_mincore);
                } else {
                    self.blind = Some(Blindness::NoInterface(format!(
                        "cachestat: {e}; mincore untrustworthy for a file the caller cannot write"
                    )));
                }
            }
        }
    }

    fn each_chunk(
        &mut self,
        fd: BorrowedFd<'_>,
        range: Range<u64>,
        per_chunk: fn(&mut Self, BorrowedFd<'_>, Range<u64>),
    ) {
        let mut at = range.start;
        while at < range.end && self.blind.is_none() {
            let chunk = at..(at + CHUNK).min(range.end);
            at = chunk.end;
            per_chunk(self, fd, chunk);
        }
    }

    fn snapshot_chunk(&mut self, fd: BorrowedFd<'_>, chunk: Range<u64>) {
        match sys::cachestat(fd, chunk.clone()) {
            Ok(cs) if cs.nr_cache == 0 => {
                self.known.insert(chunk);
            }
            Ok(cs) if cs.nr_cache >= (chunk.end - chunk.start) / page_size() => {
                self.precached.insert(chunk.clone());
                self.known.insert(chunk);
            }
            _ => self.snapshot_chunk_mincore(fd, chunk),
        }
    }

    fn snapshot_chunk_mincore(&mut self, fd: BorrowedFd<'_>, chunk: Range<u64>) {
        let page = page_size();
        let vec = match self
            .mincore_fd(fd)
            .and_then(|f| sys::mincore_range(f, chunk.start, chunk.end - chunk.start))
        {
            Ok(v) => v,
            Err(_) => {
                // Cannot tell which pages: keep the whole chunk (the safe side).
                self.precached.insert(chunk.clone());
                self.known.insert(chunk);
                return;
            }
        };
        let mut i = 0;
        while i < vec.len() {
            if vec[i] & 1 == 1 {
                let first = i;
                while i < vec.len() && vec[i] & 1 == 1 {
                    i += 1;
                }
                let s = chunk.start + first as u64 * page;
                let e = (chunk.start + i as u64 * page).min(chunk.end);
                self.precached.insert(s..e);
            } else {
                i += 1;
            }
        }
        self.known.insert(chunk);
    }

    /// [`readable_fd`], the reopen kept for the stream's later snapshots.
    fn mincore_fd<'a>(&'a mut self, fd: BorrowedFd<'a>) -> io::Result<BorrowedFd<'a>> {
        if self.mincore_fd.is_none() {
            match readable_fd(fd)? {
                Readable::Same(fd) => return Ok(fd),
                Readable::Reopened(f) => self.mincore_fd = Some(f),
            }
        }
        Ok(self.mincore_fd.as_ref().unwrap().as_fd())
    }
}

/// Whether the residency of the file's pages can be known at all.
pub fn blindness(fd: BorrowedFd<'_>) -> Option<Blindness> {
    match sys::cachestat(fd, FileRange::at(0, page_size())) {
        Ok(_) => None,
        Err(e) if Fallback::of(&e) == Some(Fallback::NotPermitted) => Some(Blindness::NotWritable),
        Err(e) if !mincore_trustworthy(fd) => Some(Blindness::NoInterface(format!(
            "cachestat: {e}; mincore untrustworthy for a file the caller cannot write"
        ))),
        Err(_) => None,
    }
}

/// mincore() tells the truth for files the caller owns or can write
/// (mm/mincore.c: can_do_mincore()).
pub(crate) fn mincore_trustworthy(fd: BorrowedFd<'_>) -> bool {
    let euid = sys::geteuid();
    euid == 0
        || sys::fstat(fd).is_ok_and(|st| st.st_uid == euid)
        || sys::access_fd(fd, libc::W_OK).is_ok()
}

/// A cold 8 MiB file on the working filesystem (not tmpfs: its pages could
/// not be dropped to make it cold), for the tests of this module and the
/// tracker's.
#[cfg(test)]
pub(crate) fn cold_file() -> (tempfile::TempDir, std::fs::File) {
    use std::io::Write;
    let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
    let mut f = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("f"))
        .unwrap();
    f.write_all(&vec![1u8; 8 << 20]).unwrap();
    f.sync_all().unwrap();
    sys::fadvise(f.as_fd(), 0, 0, sys::Advice::DontNeed).unwrap();
    (dir, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    const MIB: u64 = 1 << 20;

    #[test]
    fn pages_cached_at_snapshot_time_are_never_droppable() {
        let (_dir, f) = cold_file();
        let page = page_size();
        // Someone else caches 3 pages in the middle of the second chunk.
        let mut buf = vec![0u8; 3 * page as usize];
        f.read_exact_at(&mut buf, CHUNK + 5 * page).unwrap();
        sys::fadvise(f.as_fd(), CHUNK + 8 * page, 0, sys::Advice::DontNeed).unwrap(); // no readahead tail
        let mut r = Residency::new(true, blindness(f.as_fd()));
        r.ensure_known(f.as_fd(), 0, 8 * MIB);
        assert_eq!(r.precached_pages(), 3);
        let drop = r.droppable(0..8 * MIB);
        assert_eq!(drop, vec![0..CHUNK + 5 * page, CHUNK + 8 * page..8 * MIB]);
        assert!(r.overlaps_precached(&(CHUNK + 6 * page..CHUNK + 6 * page + 1)));
        assert_eq!(r.precached_bytes(&(0..8 * MIB)), 3 * page);
        assert_eq!(r.precached_bytes(&(CHUNK + 6 * page..4 * CHUNK)), 2 * page);
        assert_eq!(r.past_precached(CHUNK + 6 * page), CHUNK + 8 * page);
        assert_eq!(r.past_precached(CHUNK), CHUNK);
    }

    #[test]
    fn unknown_regions_are_not_droppable() {
        let (_dir, f) = cold_file();
        let mut r = Residency::new(true, blindness(f.as_fd()));
        r.ensure_known(f.as_fd(), 0, 1);
        assert_eq!(r.droppable(0..8 * MIB), vec![0..CHUNK]);
    }

    /// A decision made after the snapshot (the engine's: these pages are
    /// the writer's) replaces what the snapshot saw there.
    #[test]
    fn marking_cold_after_a_snapshot_makes_its_pages_droppable() {
        let (_dir, f) = cold_file();
        let mut buf = vec![0u8; MIB as usize];
        f.read_exact_at(&mut buf, 0).unwrap();
        f.read_exact_at(&mut buf, 2 * CHUNK + MIB).unwrap();
        // No readahead tails.
        sys::fadvise(f.as_fd(), MIB, 2 * CHUNK, sys::Advice::DontNeed).unwrap();
        sys::fadvise(f.as_fd(), 3 * CHUNK, 0, sys::Advice::DontNeed).unwrap();
        let mut r = Residency::new(true, blindness(f.as_fd()));
        r.ensure_known(f.as_fd(), 0, 8 * MIB);
        assert!(r.precached_pages() >= 2 * MIB / page_size());
        assert_eq!(
            r.precached_chunks(0..8 * MIB),
            vec![0..CHUNK, 2 * CHUNK..3 * CHUNK]
        );
        r.mark_cold(2 * CHUNK..3 * CHUNK);
        assert_eq!(r.precached_chunks(0..8 * MIB), vec![0..CHUNK]);
        assert_eq!(r.droppable(CHUNK..8 * MIB), vec![CHUNK..8 * MIB]);
    }

    #[test]
    fn without_preserve_everything_is_droppable() {
        let r = Residency::new(false, None);
        assert_eq!(r.droppable(3..7), vec![3..7]);
    }
}
