//! An fsx-style exerciser for ubio: a reproducible random sequence of
//! operations applied to one file, every read checked against an in-memory
//! model of the file (its bytes and its size).
//!
//! The operations: `ubio::File` reads and writes at random, unaligned
//! offsets and lengths (reads crossing and past end of file, writes
//! extending it); truncation up and down (through the ubio descriptor or a
//! second one); fallocate (keeping the size or extending it) and hole
//! punching; flush, fdatasync and fsync; close and reopen with the same
//! backend; and, through a second handle opened separately, plain buffered
//! pwrite, O_DIRECT aligned writes (where the filesystem takes O_DIRECT) and
//! mmap reads and writes (MAP_SHARED, sometimes msync). Every so many
//! operations the whole file is read back through ubio and compared.
//!
//! The sequence depends only on the seed, the settings and the outcomes the
//! filesystem decides (an fallocate mode or O_DIRECT it does not support
//! leaves the model unchanged): the same seed, settings, backend and
//! filesystem replay the same operations. On a mismatch, [`run`] returns a
//! [`Failure`] with the seed, the operation number, the tail of the
//! operation log and the differing bytes.

pub mod guest;
pub mod logwrites;

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::fs::File as StdFile;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use ubio::sys;
use ubio::BackendKind;
pub use ubio_testenv::rng::mix;
use ubio_testenv::rng::{SplitMix64, GOLDEN_GAMMA};

const PAGE: u64 = 4096;
/// ubio's residency granularity (ubio::residency::CHUNK).
const CHUNK: u64 = ubio::residency::CHUNK;

/// The exerciser's generator: the whole sequence of operations and their
/// data follows from the seed.
type Rng = SplitMix64;

/// The data of a write: a function of its seed and the position in it.
fn fill(seed: u64, buf: &mut [u8]) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = mix(seed ^ (i as u64).wrapping_mul(GOLDEN_GAMMA)).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The kinds of operation, for weights and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Read,
    Write,
    Truncate,
    Fallocate,
    PunchHole,
    Sync,
    Reopen,
    BufferedWrite,
    DirectWrite,
    MmapRead,
    MmapWrite,
    Verify,
}

impl Kind {
    /// The kinds drawn at random (Verify is scheduled instead).
    pub const RANDOM: [Kind; 11] = [
        Kind::Read,
        Kind::Write,
        Kind::Truncate,
        Kind::Fallocate,
        Kind::PunchHole,
        Kind::Sync,
        Kind::Reopen,
        Kind::BufferedWrite,
        Kind::DirectWrite,
        Kind::MmapRead,
        Kind::MmapWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Truncate => "truncate",
            Kind::Fallocate => "fallocate",
            Kind::PunchHole => "punch_hole",
            Kind::Sync => "sync",
            Kind::Reopen => "reopen",
            Kind::BufferedWrite => "buffered_write",
            Kind::DirectWrite => "direct_write",
            Kind::MmapRead => "mmap_read",
            Kind::MmapWrite => "mmap_write",
            Kind::Verify => "verify",
        }
    }

    /// Operations through the second handle (they leave pages cached that
    /// ubio did not bring in).
    fn second_handle(self) -> bool {
        matches!(
            self,
            Kind::BufferedWrite | Kind::DirectWrite | Kind::MmapRead | Kind::MmapWrite
        )
    }
}

/// Relative weights of the random operations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Weights(pub BTreeMap<&'static str, u32>);

impl Default for Weights {
    fn default() -> Self {
        let w = [
            (Kind::Read, 20),
            (Kind::Write, 20),
            (Kind::Truncate, 4),
            (Kind::Fallocate, 3),
            (Kind::PunchHole, 3),
            (Kind::Sync, 2),
            (Kind::Reopen, 1),
            (Kind::BufferedWrite, 5),
            (Kind::DirectWrite, 4),
            (Kind::MmapRead, 4),
            (Kind::MmapWrite, 4),
        ];
        Weights(w.into_iter().map(|(k, n)| (k.name(), n)).collect())
    }
}

impl Weights {
    pub fn get(&self, k: Kind) -> u32 {
        self.0.get(k.name()).copied().unwrap_or(0)
    }
    fn set(&mut self, k: Kind, n: u32) {
        self.0.insert(k.name(), n);
    }
    /// No operation through the second handle.
    pub fn ubio_only(mut self) -> Weights {
        for k in Kind::RANDOM.into_iter().filter(|k| k.second_handle()) {
            self.set(k, 0);
        }
        self
    }
    fn uses_second_handle(&self) -> bool {
        Kind::RANDOM
            .into_iter()
            .any(|k| k.second_handle() && self.get(k) > 0)
    }
    /// Apply "read=10,write=5,mmap_write=0" on top of these weights.
    pub fn apply(&mut self, spec: &str) -> Result<(), String> {
        for item in spec.split(',').filter(|s| !s.trim().is_empty()) {
            let (name, n) = item
                .split_once('=')
                .ok_or_else(|| format!("weight {item:?}: expected NAME=N"))?;
            let kind = Kind::RANDOM
                .into_iter()
                .find(|k| k.name() == name.trim())
                .ok_or_else(|| {
                    let names: Vec<_> = Kind::RANDOM.iter().map(|k| k.name()).collect();
                    format!("unknown operation {name:?} (one of {})", names.join(", "))
                })?;
            let n = n
                .trim()
                .parse()
                .map_err(|e| format!("weight {item:?}: {e}"))?;
            self.set(kind, n);
        }
        if Kind::RANDOM.iter().all(|&k| self.get(k) == 0) {
            return Err("every weight is zero".into());
        }
        Ok(())
    }
    fn pick(&self, rng: &mut Rng) -> Kind {
        let total: u64 = Kind::RANDOM.iter().map(|&k| u64::from(self.get(k))).sum();
        let mut x = rng.below(total);
        for k in Kind::RANDOM {
            let w = u64::from(self.get(k));
            if x < w {
                return k;
            }
            x -= w;
        }
        unreachable!("x < total")
    }
}

/// Which descriptor a truncation goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    Ubio,
    Second,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncHow {
    /// `File::flush_writeback`: no durability, just the write-behind.
    Flush,
    SyncData,
    SyncAll,
}

/// One operation, as generated from the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read {
        off: u64,
        len: u64,
    },
    Write {
        off: u64,
        len: u64,
        data: u64,
    },
    Truncate {
        size: u64,
        via: Via,
    },
    Fallocate {
        off: u64,
        len: u64,
        keep_size: bool,
    },
    PunchHole {
        off: u64,
        len: u64,
    },
    Sync(SyncHow),
    Reopen,
    BufferedWrite {
        off: u64,
        len: u64,
        data: u64,
    },
    DirectWrite {
        off: u64,
        len: u64,
        data: u64,
    },
    MmapRead {
        off: u64,
        len: u64,
    },
    MmapWrite {
        off: u64,
        len: u64,
        data: u64,
        msync: bool,
    },
    Verify,
    /// Test hook: the file changed behind the exerciser's back.
    TamperFile {
        off: u64,
    },
    /// Test hook: the model changed, the file did not.
    TamperModel {
        off: u64,
    },
}

impl Op {
    pub fn kind(&self) -> Kind {
        match self {
            Op::Read { .. } => Kind::Read,
            Op::Write { .. } => Kind::Write,
            Op::Truncate { .. } => Kind::Truncate,
            Op::Fallocate { .. } => Kind::Fallocate,
            Op::PunchHole { .. } => Kind::PunchHole,
            Op::Sync(_) => Kind::Sync,
            Op::Reopen => Kind::Reopen,
            Op::BufferedWrite { .. } => Kind::BufferedWrite,
            Op::DirectWrite { .. } => Kind::DirectWrite,
            Op::MmapRead { .. } => Kind::MmapRead,
            Op::MmapWrite { .. } => Kind::MmapWrite,
            Op::Verify | Op::TamperFile { .. } | Op::TamperModel { .. } => Kind::Verify,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = |f: &mut fmt::Formatter<'_>, name: &str, off: u64, len: u64| {
            write!(
                f,
                "{name:<14} {off:#10x} .. {:#10x} ({len} bytes)",
                off + len
            )
        };
        match *self {
            Op::Read { off, len } => range(f, "read", off, len),
            Op::Write { off, len, .. } => range(f, "write", off, len),
            Op::Truncate { size, via } => write!(f, "{:<14} {size:#10x} via {via:?}", "truncate"),
            Op::Fallocate {
                off,
                len,
                keep_size,
            } => {
                range(f, "fallocate", off, len)?;
                if keep_size {
                    f.write_str(" keep-size")?;
                }
                Ok(())
            }
            Op::PunchHole { off, len } => range(f, "punch_hole", off, len),
            Op::Sync(how) => write!(f, "{:<14} {how:?}", "sync"),
            Op::Reopen => f.write_str("reopen"),
            Op::BufferedWrite { off, len, .. } => range(f, "buffered_write", off, len),
            Op::DirectWrite { off, len, .. } => range(f, "direct_write", off, len),
            Op::MmapRead { off, len } => range(f, "mmap_read", off, len),
            Op::MmapWrite {
                off, len, msync, ..
            } => {
                range(f, "mmap_write", off, len)?;
                if msync {
                    f.write_str(" msync")?;
                }
                Ok(())
            }
            Op::Verify => f.write_str("verify (whole file)"),
            Op::TamperFile { off } => write!(f, "TAMPER file byte {off:#x} (test hook)"),
            Op::TamperModel { off } => write!(f, "TAMPER model byte {off:#x} (test hook)"),
        }
    }
}

/// A deliberate inconsistency, to show that the checker can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    /// Before operation `at`, flip a byte of the file through a descriptor
    /// of its own (the model does not know).
    File { at: u64 },
    /// Before operation `at`, flip a byte of the model (the file does not change).
    Model { at: u64 },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub seed: u64,
    /// Operations to run (Verify included).
    pub ops: u64,
    /// Stop earlier once this much time has passed.
    pub duration: Option<Duration>,
    pub backend: BackendKind,
    /// The file never grows beyond this.
    pub max_size: u64,
    /// The longest single read or write.
    pub max_len: u64,
    /// The ubio write-behind window (small, so that write-behind and its
    /// page drops happen often in a small file).
    pub window: u64,
    /// When the emulated backend reads through O_DIRECT.
    pub direct_reads: ubio::DirectReads,
    /// When the emulated backend writes through O_DIRECT.
    pub direct_writes: ubio::DirectWrites,
    /// When the emulated backend reads ahead in small folios itself.
    pub small_readahead: ubio::SmallReadahead,
    pub weights: Weights,
    /// A whole-file verify every this many operations (0: only at the end).
    pub verify_every: u64,
    /// Operations kept in the log printed on failure.
    pub log_tail: usize,
    /// Differing bytes shown on failure.
    pub max_diffs: usize,
    /// Keep every operation in `Summary::log` (for replay checks).
    pub keep_log: bool,
    /// At every close (reopens and the end): in the chunks ubio I/O
    /// reached, no page may stay cached but those cached before the stream
    /// reached them (checked only where it applies: a managed backend, not
    /// tmpfs, no second handle).
    pub check_cache: bool,
    pub tamper: Option<Tamper>,
}

impl Config {
    pub fn new(path: impl Into<PathBuf>, seed: u64) -> Config {
        Config {
            path: path.into(),
            seed,
            ops: 10_000,
            duration: None,
            backend: BackendKind::Auto,
            max_size: 4 << 20,
            max_len: 256 << 10,
            window: 256 << 10,
            direct_reads: ubio::DirectReads::default(),
            direct_writes: ubio::DirectWrites::default(),
            small_readahead: ubio::SmallReadahead::default(),
            weights: Weights::default(),
            verify_every: 1000,
            log_tail: 30,
            max_diffs: 16,
            keep_log: false,
            check_cache: true,
            tamper: None,
        }
    }
}

/// One differing byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub offset: u64,
    pub expected: u8,
    pub got: u8,
}

/// Why a run failed: a mismatch with the model, or an unexpected error.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub seed: u64,
    /// The backend asked for, and the one in use.
    pub backend: String,
    pub chosen: String,
    /// The operations the run was asked for.
    pub ops: u64,
    pub path: PathBuf,
    /// The operation that failed (0-based) and what it was.
    pub op_number: u64,
    pub op: String,
    pub what: String,
    /// Total differing bytes, and the first few.
    pub diff_count: u64,
    pub diffs: Vec<Diff>,
    /// The last operations, oldest first, the failing one last.
    pub log_tail: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "ubio-fsx: FAILED at operation {} ({}): {}",
            self.op_number, self.op, self.what
        )?;
        writeln!(
            f,
            "  seed {} backend {} (in use: {}) file {}",
            self.seed,
            self.backend,
            self.chosen,
            self.path.display()
        )?;
        writeln!(
            f,
            "  replay: ubio-fsx --seed {} --backend {} --ops {} --file {} (and the same settings)",
            self.seed,
            self.backend,
            self.ops,
            self.path.display()
        )?;
        if self.diff_count > 0 {
            writeln!(
                f,
                "  {} bytes differ; the first {}:",
                self.diff_count,
                self.diffs.len()
            )?;
            writeln!(f, "    {:>12}  expected  got", "offset")?;
            for d in &self.diffs {
                writeln!(
                    f,
                    "    {:#12x}  {:#04x}      {:#04x}",
                    d.offset, d.expected, d.got
                )?;
            }
        }
        writeln!(f, "  last {} operations:", self.log_tail.len())?;
        for line in &self.log_tail {
            writeln!(f, "    {line}")?;
        }
        Ok(())
    }
}

/// What [`run`] can end with instead of a summary.
#[derive(Debug)]
pub enum Error {
    /// The file could not be opened with the backend asked for (an explicit
    /// backend that cannot run on this filesystem refuses clearly).
    Open(io::Error),
    Failed(Box<Failure>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open(e) => write!(f, "ubio-fsx: cannot open: {e}"),
            Error::Failed(fl) => fl.fmt(f),
        }
    }
}

impl std::error::Error for Error {}

/// The page-cache check after the run.
#[derive(Debug, Clone, Serialize)]
pub struct CacheCheck {
    pub checked: bool,
    /// Why it was not checked, or what was seen.
    pub detail: String,
    pub cached_pages_after_close: Option<u64>,
    /// Pages left at closes beside pages the stream preserved (in the same
    /// large folio, which fadvise cannot split): tolerated, counted.
    pub leftovers_beside_preserved: u64,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub seed: u64,
    pub path: PathBuf,
    pub fs_type: String,
    pub backend_requested: String,
    pub backend: String,
    pub backend_reason: String,
    pub ops: u64,
    pub ops_by_kind: BTreeMap<&'static str, u64>,
    /// fallocate modes the filesystem refused (EOPNOTSUPP), by kind.
    pub unsupported: BTreeMap<&'static str, u64>,
    pub odirect: String,
    pub ubio_bytes_read: u64,
    pub ubio_bytes_written: u64,
    pub second_bytes_written: u64,
    pub mmap_bytes_read: u64,
    pub mmap_bytes_written: u64,
    pub bytes_verified: u64,
    pub ubio_pages_dropped: u64,
    /// Of `ubio_bytes_read`, read through O_DIRECT (`Config::direct_reads`).
    pub ubio_bytes_read_direct: u64,
    /// Of `ubio_bytes_written`, written through O_DIRECT
    /// (`Config::direct_writes`).
    pub ubio_bytes_written_direct: u64,
    /// Bytes the streams asked for in small folios themselves
    /// (`Config::small_readahead`).
    pub ubio_small_readahead_bytes: u64,
    pub final_size: u64,
    pub mismatches: u64,
    pub elapsed_secs: f64,
    /// A hash of every operation: equal for equal sequences.
    pub op_digest: String,
    pub cache: CacheCheck,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<Vec<String>>,
}

/// The second handle's O_DIRECT descriptor, if the filesystem takes O_DIRECT.
struct Direct {
    file: StdFile,
    align: u64,
    mem_align: usize,
}

struct Exerciser<'c> {
    cfg: &'c Config,
    rng: Rng,
    model: Vec<u8>,
    ubio: Option<ubio::File>,
    second: StdFile,
    direct: Option<Direct>,
    odirect: String,
    n: u64,
    tail: VecDeque<(u64, Op)>,
    log: Vec<String>,
    digest: DefaultHasher,
    summary_counts: BTreeMap<&'static str, u64>,
    unsupported: BTreeMap<&'static str, u64>,
    ubio_read: u64,
    ubio_written: u64,
    pages_dropped: u64,
    read_direct: u64,
    small_readahead: u64,
    written_direct: u64,
    second_written: u64,
    mmap_read: u64,
    mmap_written: u64,
    verified: u64,
    cache_applies: Result<(), String>,
    closes_checked: u64,
    leftovers_beside_preserved: u64,
    /// Chunks (of [`CHUNK`] bytes) ubio I/O reached since the last open.
    touched: std::collections::BTreeSet<u64>,
    /// The backend asked for and the one chosen, for reports.
    backend: String,
    /// The data of the current write, at `buf_at` in this page-aligned
    /// buffer: 0 in half the writes (a buffer O_DIRECT takes as it is), 8
    /// in the other half.
    buf: ubio::AlignedBuf,
    buf_at: std::ops::Range<usize>,
    got: Vec<u8>,
}

/// Write `data` at `off` into the model, extending it with zeros as a file
/// grows. (A function of the model alone, so that it can take one of the
/// exerciser's own buffers.)
fn model_write(model: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if end > model.len() {
        model.resize(end, 0);
    }
    model[off as usize..end].copy_from_slice(data);
}

fn fallocate_mode(op: &Op) -> i32 {
    match *op {
        Op::Fallocate {
            keep_size: true, ..
        } => libc::FALLOC_FL_KEEP_SIZE,
        Op::Fallocate { .. } => 0,
        _ => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    }
}

impl<'c> Exerciser<'c> {
    fn open_ubio(cfg: &Config, create: bool) -> io::Result<ubio::File> {
        ubio::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .backend(cfg.backend)
            .window(cfg.window)
            .direct_reads(cfg.direct_reads)
            .direct_writes(cfg.direct_writes)
            .small_readahead(cfg.small_readahead)
            .open(&cfg.path)
    }

    fn size(&self) -> u64 {
        self.model.len() as u64
    }

    fn f(&self) -> &ubio::File {
        self.ubio.as_ref().expect("open between operations")
    }

    fn fail(&self, op: &Op, what: String, diffs: (u64, Vec<Diff>)) -> Error {
        Error::Failed(Box::new(Failure {
            seed: self.cfg.seed,
            backend: self.cfg.backend.to_string(),
            chosen: self.backend.clone(),
            ops: self.cfg.ops,
            path: self.cfg.path.clone(),
            op_number: self.n,
            op: op.to_string(),
            what,
            diff_count: diffs.0,
            diffs: diffs.1,
            log_tail: self
                .tail
                .iter()
                .map(|(n, o)| format!("#{n:<9} {o}"))
                .collect(),
        }))
    }

    fn io_fail(&self, op: &Op, what: &str, e: io::Error) -> Error {
        self.fail(op, format!("{what}: {e}"), (0, Vec::new()))
    }

    /// Compare `got` (read at `off`) with the model.
    fn compare(&self, off: u64, got: &[u8]) -> (u64, Vec<Diff>) {
        if got.is_empty() {
            return (0, Vec::new());
        }
        let want = &self.model[off as usize..off as usize + got.len()];
        if want == got {
            return (0, Vec::new());
        }
        let mut diffs = Vec::new();
        let mut count = 0;
        for (i, (&w, &g)) in want.iter().zip(got).enumerate() {
            if w != g {
                count += 1;
                if diffs.len() < self.cfg.max_diffs {
                    diffs.push(Diff {
                        offset: off + i as u64,
                        expected: w,
                        got: g,
                    });
                }
            }
        }
        (count, diffs)
    }

    /// A length in `[1, max]`: often tiny, otherwise log-uniform.
    fn len(&mut self, max: u64) -> u64 {
        let max = max.max(1);
        if self.rng.chance(8) {
            return 1 + self.rng.below(max.min(16));
        }
        let bits = 64 - max.leading_zeros() as u64;
        let cap = (1u64 << self.rng.below(bits + 1)).min(max);
        1 + self.rng.below(cap)
    }

    /// An offset and length for a write inside `max_size`; a quarter of
    /// them page-aligned (the direct backend's fast path).
    fn write_range(&mut self) -> (u64, u64) {
        let max = self.cfg.max_size;
        let mut off = self.rng.below(max);
        let mut len = self.len(self.cfg.max_len.min(max - off));
        if self.rng.chance(4) {
            off = off / PAGE * PAGE;
            len = len.div_ceil(PAGE) * PAGE;
            len = len.min((max - off) / PAGE * PAGE).max(PAGE.min(max - off));
        }
        (off, len)
    }

    fn gen(&mut self) -> Op {
        let size = self.size();
        let kind = self.cfg.weights.pick(&mut self.rng);
        let data = self.rng.next_u64();
        match kind {
            Kind::Read => {
                // Past the end too, and across it.
                let off = self.rng.below(size + size / 8 + 2 * PAGE);
                let len = self.len(self.cfg.max_len);
                Op::Read { off, len }
            }
            Kind::Write => {
                let (off, len) = self.write_range();
                Op::Write { off, len, data }
            }
            Kind::Truncate => {
                let mut size = self.rng.below(self.cfg.max_size + 1);
                if self.rng.chance(4) {
                    size = size / PAGE * PAGE;
                }
                let via = if self.rng.chance(2) {
                    Via::Ubio
                } else {
                    Via::Second
                };
                Op::Truncate { size, via }
            }
            Kind::Fallocate => {
                let (off, len) = self.write_range();
                Op::Fallocate {
                    off,
                    len,
                    keep_size: self.rng.chance(2),
                }
            }
            Kind::PunchHole => {
                let off = self.rng.below(size.max(1));
                let len = self.len(self.cfg.max_len * 2);
                Op::PunchHole { off, len }
            }
            Kind::Sync => Op::Sync(match self.rng.below(3) {
                0 => SyncHow::Flush,
                1 => SyncHow::SyncData,
                _ => SyncHow::SyncAll,
            }),
            Kind::Reopen => Op::Reopen,
            Kind::BufferedWrite => {
                let (off, len) = self.write_range();
                Op::BufferedWrite { off, len, data }
            }
            Kind::DirectWrite => {
                let align = self.direct.as_ref().map_or(PAGE, |d| d.align);
                let blocks = self.cfg.max_size / align;
                let first = self.rng.below(blocks.max(1));
                let max_blocks = (self.cfg.max_len / align).max(1).min(blocks - first);
                let n = 1 + self.rng.below(max_blocks.max(1));
                Op::DirectWrite {
                    off: first * align,
                    len: n * align,
                    data,
                }
            }
            Kind::MmapRead => {
                let off = self.rng.below(size.max(1));
                let len = self.len(self.cfg.max_len.min(size - off.min(size)));
                Op::MmapRead { off, len }
            }
            Kind::MmapWrite => {
                let (off, len) = self.write_range();
                Op::MmapWrite {
                    off,
                    len,
                    data,
                    msync: self.rng.chance(2),
                }
            }
            Kind::Verify => Op::Verify,
        }
    }

    fn check_size(&self, op: &Op) -> Result<(), Error> {
        let st = sys::fstat(self.second.as_fd()).map_err(|e| self.io_fail(op, "fstat", e))?;
        if st.st_size as u64 != self.size() {
            return Err(self.fail(
                op,
                format!(
                    "file size is {} ({:#x}), model says {} ({:#x})",
                    st.st_size,
                    st.st_size,
                    self.size(),
                    self.size()
                ),
                (0, Vec::new()),
            ));
        }
        Ok(())
    }

    /// Read `[off, off + len)` through ubio (until that many bytes or end
    /// of file) and compare with the model: contents and where EOF is.
    fn ubio_read_check(&mut self, op: &Op, off: u64, len: u64) -> Result<(), Error> {
        self.touch(off, len);
        let mut got = std::mem::take(&mut self.got);
        got.resize(len as usize, 0);
        let mut done = 0usize;
        while done < got.len() {
            match self.f().read_at(&mut got[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_fail(op, "ubio read", e)),
            }
        }
        self.ubio_read += done as u64;
        let want = self.size().saturating_sub(off).min(len) as usize;
        let res = if done != want {
            Err(self.fail(
                op,
                format!(
                    "ubio read returned {done} bytes, the model has {want} there (size {:#x})",
                    self.size()
                ),
                self.compare(off, &got[..done.min(want)]),
            ))
        } else {
            let d = self.compare(off, &got[..done]);
            if d.0 > 0 {
                Err(self.fail(op, "ubio read differs from the model".into(), d))
            } else {
                Ok(())
            }
        };
        self.got = got;
        res
    }

    /// Close the ubio handle, count what its stream did, and check the
    /// page cache it left. Returns its statistics and the pages cached.
    fn close_ubio(&mut self, op: &Op) -> Result<(ubio::Stats, Option<u64>), Error> {
        let f = self.ubio.take().expect("open");
        let stats = f.close().map_err(|e| self.io_fail(op, "close", e))?;
        self.pages_dropped += stats.pages_dropped;
        self.read_direct += stats.bytes_read_direct;
        self.small_readahead += stats.small_readahead_bytes;
        self.written_direct += stats.bytes_written_direct;
        let cached = self.check_cache_after_close(op, &stats)?;
        Ok((stats, cached))
    }

    /// After a close: in the chunks the stream read or wrote, the pages
    /// still cached are at most those it found cached before it reached
    /// them (the contract keeps those: a truncation or a hole punched before
    /// the stream came by caches pages in the filesystem's name). Chunks it
    /// never reached are not its business.
    fn check_cache_after_close(
        &mut self,
        op: &Op,
        stats: &ubio::Stats,
    ) -> Result<Option<u64>, Error> {
        if self.cache_applies.is_err() {
            return Ok(None);
        }
        let touched = std::mem::take(&mut self.touched);
        let mut cached = ubio::sys::CacheStat::default();
        for &chunk in &touched {
            let cs = sys::cachestat(
                self.second.as_fd(),
                sys::FileRange::at(chunk * CHUNK, CHUNK),
            )
            .map_err(|e| self.io_fail(op, "cachestat", e))?;
            cached.nr_cache += cs.nr_cache;
            cached.nr_dirty += cs.nr_dirty;
            cached.nr_writeback += cs.nr_writeback;
        }
        self.closes_checked += 1;
        if cached.nr_cache > stats.pages_preserved && stats.pages_preserved > 0 {
            // Known limit, not failed: a page the stream preserved can share
            // a large folio with pages it brought in later (after the
            // preserved page was invalidated, e.g. by an O_DIRECT write or a
            // truncation, and the range refilled); fadvise(DONTNEED) skips a
            // folio that straddles the range it is given, so the whole folio stays.
            self.leftovers_beside_preserved += cached.nr_cache - stats.pages_preserved;
        } else if cached.nr_cache > stats.pages_preserved {
            return Err(self.fail(
                op,
                format!(
                    "page cache after close: {} pages cached ({} dirty, {} writeback) in the \
                     chunks the stream read or wrote, only {} were cached before it{}; {}",
                    cached.nr_cache,
                    cached.nr_dirty,
                    cached.nr_writeback,
                    stats.pages_preserved,
                    resident_pages(&self.second),
                    how_long_held(&self.second, &touched)
                ),
                (0, Vec::new()),
            ));
        }
        Ok(Some(cached.nr_cache))
    }

    /// Remember the chunks ubio I/O reached in this stream.
    fn touch(&mut self, off: u64, len: u64) {
        if self.cache_applies.is_ok() && len > 0 {
            self.touched
                .extend(off / CHUNK..(off + len).div_ceil(CHUNK));
        }
    }

    fn verify(&mut self, op: &Op) -> Result<(), Error> {
        self.check_size(op)?;
        let size = self.size();
        let mut off = 0;
        while off < size + 1 {
            // One byte past the end too: the read there must return 0.
            let len = (size + 1 - off).min(1 << 20);
            self.ubio_read_check(op, off, len)?;
            off += len;
        }
        self.verified += size;
        Ok(())
    }

    fn write_buf(&mut self, data: u64, len: u64) {
        let at = if data & 1 == 0 { 0 } else { 8 };
        let end = at + len as usize;
        if self.buf.len() < end {
            self.buf = ubio::AlignedBuf::page_aligned(end.next_multiple_of(PAGE as usize));
        }
        self.buf_at = at..end;
        fill(data, &mut self.buf.as_mut_slice()[at..end]);
    }

    /// The current write's data.
    fn wdata(&self) -> &[u8] {
        &self.buf.as_slice()[self.buf_at.clone()]
    }

    fn apply(&mut self, op: &Op) -> Result<(), Error> {
        match *op {
            Op::Read { off, len } => self.ubio_read_check(op, off, len)?,
            Op::Write { off, len, data } => {
                self.touch(off, len);
                self.write_buf(data, len);
                self.f()
                    .write_all_at(self.wdata(), off)
                    .map_err(|e| self.io_fail(op, "ubio write", e))?;
                self.ubio_written += len;
                model_write(&mut self.model, off, &self.buf[self.buf_at.clone()]);
            }
            Op::Truncate { size, via } => {
                let file = match via {
                    Via::Ubio => self.f().get_ref(),
                    Via::Second => &self.second,
                };
                file.set_len(size)
                    .map_err(|e| self.io_fail(op, "ftruncate", e))?;
                self.model.resize(size as usize, 0);
            }
            Op::Fallocate { off, len, .. } | Op::PunchHole { off, len } => {
                let mode = fallocate_mode(op);
                if let Err(e) = sys::fallocate(self.f().as_fd(), mode, off, len) {
                    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                        *self.unsupported.entry(op.kind().name()).or_default() += 1;
                        return Ok(());
                    }
                    return Err(self.io_fail(op, "fallocate", e));
                }
                match op {
                    Op::PunchHole { .. } => {
                        let end = (off + len).min(self.size());
                        if off < end {
                            self.model[off as usize..end as usize].fill(0);
                        }
                    }
                    _ if mode == 0 && off + len > self.size() => {
                        self.model.resize((off + len) as usize, 0)
                    }
                    _ => {}
                }
            }
            Op::Sync(how) => {
                let r = match how {
                    SyncHow::Flush => self.f().flush_writeback(),
                    SyncHow::SyncData => self.f().sync_data(),
                    SyncHow::SyncAll => self.f().sync_all(),
                };
                r.map_err(|e| self.io_fail(op, "sync", e))?;
            }
            Op::Reopen => {
                self.close_ubio(op)?;
                self.ubio = Some(
                    Self::open_ubio(self.cfg, false).map_err(|e| self.io_fail(op, "reopen", e))?,
                );
            }
            Op::BufferedWrite { off, len, data } => {
                self.write_buf(data, len);
                self.second
                    .write_all_at(self.wdata(), off)
                    .map_err(|e| self.io_fail(op, "pwrite (second handle)", e))?;
                self.second_written += len;
                model_write(&mut self.model, off, &self.buf[self.buf_at.clone()]);
            }
            Op::DirectWrite { off, len, data } => {
                let Some(d) = &self.direct else {
                    *self.unsupported.entry(op.kind().name()).or_default() += 1;
                    return Ok(());
                };
                let mut block = ubio::AlignedBuf::new(len as usize, d.mem_align);
                fill(data, &mut block);
                let r = d.file.write_all_at(&block, off);
                if r.is_ok() {
                    model_write(&mut self.model, off, &block);
                }
                r.map_err(|e| self.io_fail(op, "O_DIRECT pwrite (second handle)", e))?;
                self.second_written += len;
            }
            Op::MmapRead { off, len } => {
                let size = self.size();
                if size == 0 || len == 0 {
                    return Ok(());
                }
                let start = off / PAGE * PAGE;
                let end = (off + len).div_ceil(PAGE) * PAGE;
                // SAFETY (memmap2's contract): the file may change under the
                // map, which only ever reads it through volatile-free
                // copies here; nothing else holds a reference into it.
                let map = unsafe {
                    memmap2::MmapOptions::new()
                        .offset(start)
                        .len((end - start) as usize)
                        .map(&self.second)
                }
                .map_err(|e| self.io_fail(op, "mmap", e))?;
                let got = &map[(off - start) as usize..(off - start + len) as usize];
                let d = self.compare(off, got);
                if d.0 > 0 {
                    return Err(self.fail(op, "mmap read differs from the model".into(), d));
                }
                // The page holding the end of file reads zeros past it.
                if end >= size.div_ceil(PAGE) * PAGE && !size.is_multiple_of(PAGE) {
                    let tail = &map[(size - start) as usize..];
                    if let Some(i) = tail.iter().position(|&b| b != 0) {
                        return Err(self.fail(
                            op,
                            format!(
                                "mmap: byte {:#x} past end of file {size:#x} is {:#04x}, not zero",
                                size + i as u64,
                                tail[i]
                            ),
                            (0, Vec::new()),
                        ));
                    }
                }
                self.mmap_read += len;
            }
            Op::MmapWrite {
                off,
                len,
                data,
                msync,
            } => {
                if off + len > self.size() {
                    // A mapping cannot extend the file: grow it first.
                    self.second
                        .set_len(off + len)
                        .map_err(|e| self.io_fail(op, "ftruncate before mmap write", e))?;
                    self.model.resize((off + len) as usize, 0);
                }
                self.write_buf(data, len);
                let start = off / PAGE * PAGE;
                let end = (off + len).div_ceil(PAGE) * PAGE;
                // SAFETY (memmap2's contract): the mapping is written only
                // here, within the file's size; other writers change the
                // file but not through references into this map.
                let mut map = unsafe {
                    memmap2::MmapOptions::new()
                        .offset(start)
                        .len((end - start) as usize)
                        .map_mut(&self.second)
                }
                .map_err(|e| self.io_fail(op, "mmap", e))?;
                map[(off - start) as usize..(off - start + len) as usize]
                    .copy_from_slice(self.wdata());
                if msync {
                    map.flush_range((off - start) as usize, len as usize)
                        .map_err(|e| self.io_fail(op, "msync", e))?;
                }
                drop(map);
                self.mmap_written += len;
                model_write(&mut self.model, off, &self.buf[self.buf_at.clone()]);
            }
            Op::Verify => self.verify(op)?,
            Op::TamperFile { off } => {
                let f = StdFile::options()
                    .read(true)
                    .write(true)
                    .open(&self.cfg.path)
                    .map_err(|e| self.io_fail(op, "tamper open", e))?;
                let mut b = [0u8];
                f.read_exact_at(&mut b, off)
                    .map_err(|e| self.io_fail(op, "tamper read", e))?;
                f.write_all_at(&[!b[0]], off)
                    .map_err(|e| self.io_fail(op, "tamper write", e))?;
            }
            Op::TamperModel { off } => self.model[off as usize] ^= 0xff,
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), Error> {
        let every = self.cfg.verify_every;
        let mut op = if every > 0 && (self.n + 1).is_multiple_of(every) {
            Op::Verify
        } else {
            self.gen()
        };
        // The test hook replaces one operation; a verify follows at once.
        let tampered = match self.cfg.tamper {
            Some(Tamper::File { at }) if at == self.n && self.size() > 0 => Some(Op::TamperFile {
                off: self.size() / 2,
            }),
            Some(Tamper::Model { at }) if at == self.n && self.size() > 0 => {
                Some(Op::TamperModel {
                    off: self.size() / 2,
                })
            }
            _ => None,
        };
        if let Some(t) = tampered {
            self.record(t);
            self.apply(&t)?;
            op = Op::Verify;
        }
        self.record(op);
        self.apply(&op)?;
        *self.summary_counts.entry(op.kind().name()).or_default() += 1;
        self.n += 1;
        Ok(())
    }

    fn record(&mut self, op: Op) {
        op.hash(&mut self.digest);
        if self.tail.len() == self.cfg.log_tail.max(1) {
            self.tail.pop_front();
        }
        self.tail.push_back((self.n, op));
        if self.cfg.keep_log {
            self.log.push(format!("#{} {op}", self.n));
        }
    }
}

/// Open the second handle's O_DIRECT descriptor, if the filesystem takes
/// O_DIRECT; say what was found either way.
fn probe_direct(path: &Path) -> (Option<Direct>, String) {
    let opened =
        StdFile::open(path).and_then(|f| ubio::probe::open_direct(f.as_fd(), libc::O_WRONLY));
    match opened {
        Err(e) => (None, format!("unsupported (open O_DIRECT: {e})")),
        Ok(d) => {
            // A page covers every alignment seen here and keeps writes page-sized.
            let align = u64::from(d.align.offset_align).max(PAGE);
            let mem_align = (d.align.mem_align as usize).max(PAGE as usize);
            (
                Some(Direct {
                    file: d.file,
                    align,
                    mem_align,
                }),
                format!(
                    "supported (align {align}, statx {})",
                    if d.reported {
                        "DIOALIGN"
                    } else {
                        "reports none"
                    }
                ),
            )
        }
    }
}

/// Run the exerciser: `Ok` with a summary when every check passed.
pub fn run(cfg: &Config) -> Result<Summary, Error> {
    assert!(cfg.max_size >= PAGE, "max_size below a page");
    let t0 = Instant::now();
    let ubio = Exerciser::open_ubio(cfg, true).map_err(Error::Open)?;
    let second = StdFile::options()
        .read(true)
        .write(true)
        .open(&cfg.path)
        .map_err(Error::Open)?;
    let fs_type = sys::fs_magic(second.as_fd())
        .map(|m| m.name())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let (direct, odirect) = if cfg.weights.get(Kind::DirectWrite) > 0 {
        probe_direct(&cfg.path)
    } else {
        (None, "not used".into())
    };
    let choice = ubio.choice().clone();
    let mut x = Exerciser {
        cfg,
        rng: Rng::new(cfg.seed),
        model: Vec::new(),
        ubio: Some(ubio),
        second,
        direct,
        odirect,
        n: 0,
        tail: VecDeque::new(),
        log: Vec::new(),
        digest: DefaultHasher::new(),
        summary_counts: BTreeMap::new(),
        unsupported: BTreeMap::new(),
        ubio_read: 0,
        ubio_written: 0,
        pages_dropped: 0,
        read_direct: 0,
        small_readahead: 0,
        written_direct: 0,
        second_written: 0,
        mmap_read: 0,
        mmap_written: 0,
        verified: 0,
        cache_applies: cache_applies(cfg, &choice, &fs_type),
        closes_checked: 0,
        leftovers_beside_preserved: 0,
        touched: Default::default(),
        backend: choice.backend.to_string(),
        buf: ubio::AlignedBuf::page_aligned(0),
        buf_at: 0..0,
        got: Vec::new(),
    };
    while x.n < cfg.ops && cfg.duration.is_none_or(|d| t0.elapsed() < d) {
        x.step()?;
    }
    // The end: a last check through ubio, close, then the page cache and a
    // check through a plain descriptor (after close: nothing left to flush).
    x.record(Op::Verify);
    x.verify(&Op::Verify)?;
    let (stats, cached) = x.close_ubio(&Op::Verify)?;
    let cache = match &x.cache_applies {
        Err(why) => CacheCheck {
            checked: false,
            detail: why.clone(),
            cached_pages_after_close: None,
            leftovers_beside_preserved: 0,
        },
        Ok(()) => CacheCheck {
            checked: true,
            detail: format!(
                "{} pages cached after close, {} of them cached before the stream and preserved; \
                 {} closes checked; {} pages left beside preserved ones (shared large folios)",
                cached.unwrap_or(0),
                stats.pages_preserved,
                x.closes_checked,
                x.leftovers_beside_preserved
            ),
            cached_pages_after_close: cached,
            leftovers_beside_preserved: x.leftovers_beside_preserved,
        },
    };
    plain_verify(&mut x)?;
    Ok(Summary {
        seed: cfg.seed,
        path: cfg.path.clone(),
        fs_type,
        backend_requested: cfg.backend.to_string(),
        backend: choice.backend.to_string(),
        backend_reason: choice.reason.clone(),
        ops: x.n,
        ops_by_kind: x.summary_counts.clone(),
        unsupported: x.unsupported.clone(),
        odirect: x.odirect.clone(),
        ubio_bytes_read: x.ubio_read,
        ubio_bytes_written: x.ubio_written,
        second_bytes_written: x.second_written,
        mmap_bytes_read: x.mmap_read,
        mmap_bytes_written: x.mmap_written,
        bytes_verified: x.verified,
        ubio_pages_dropped: x.pages_dropped,
        ubio_bytes_read_direct: x.read_direct,
        ubio_small_readahead_bytes: x.small_readahead,
        ubio_bytes_written_direct: x.written_direct,
        final_size: x.size(),
        mismatches: 0,
        elapsed_secs: t0.elapsed().as_secs_f64(),
        op_digest: format!("{:016x}", x.digest.finish()),
        cache,
        log: cfg.keep_log.then(|| std::mem::take(&mut x.log)),
    })
}

/// Whether the page cache can be checked after close, or why not.
fn cache_applies(cfg: &Config, choice: &ubio::Choice, fs_type: &str) -> Result<(), String> {
    if !cfg.check_cache {
        return Err("not asked for".into());
    }
    if !choice.managed {
        return Err(format!("not managed: {}", choice.reason));
    }
    if cfg.weights.uses_second_handle() {
        return Err("the second handle (buffered, mmap) leaves pages of its own".into());
    }
    if fs_type == "tmpfs" {
        return Err("tmpfs: the page cache is the storage".into());
    }
    Ok(())
}

/// Which pages are resident (the first few), to say where a leftover is.
fn resident_pages(f: &StdFile) -> String {
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let Ok(v) = sys::mincore_range(f.as_fd(), 0, size) else {
        return String::new();
    };
    let pages: Vec<_> = (0..v.len())
        .filter(|&i| v[i] & 1 == 1)
        .take(16)
        .map(|i| format!("{:#x}", i as u64 * PAGE))
        .collect();
    if pages.is_empty() {
        return String::new();
    }
    format!(
        " (resident: pages at {}; file size {size:#x})",
        pages.join(", ")
    )
}

/// For a failure report: how long the pages left in `chunks` withstand
/// fadvise(DONTNEED) made here, at growing intervals up to about a second.
/// A page that goes at once was held only for a moment (or came back after
/// the stream's last drop); one that stays is held by someone.
fn how_long_held(f: &StdFile, chunks: &std::collections::BTreeSet<u64>) -> String {
    let cached = || -> u64 {
        chunks
            .iter()
            .filter_map(|&c| sys::cachestat(f.as_fd(), sys::FileRange::at(c * CHUNK, CHUNK)).ok())
            .map(|cs| cs.nr_cache)
            .sum()
    };
    let t0 = Instant::now();
    let mut pause = Duration::ZERO;
    while pause <= Duration::from_millis(512) {
        std::thread::sleep(pause);
        for &c in chunks {
            let _ = sys::fadvise(f.as_fd(), c * CHUNK, CHUNK, sys::Advice::DontNeed);
        }
        let left = cached();
        if left == 0 {
            return format!(
                "the checker's own fadvise(DONTNEED) took them {:.1} ms after its check began",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        pause = (pause * 2).max(Duration::from_millis(1));
    }
    format!(
        "{} pages still cached after the checker's own fadvise(DONTNEED) for {:.0} ms",
        cached(),
        t0.elapsed().as_secs_f64() * 1e3
    )
}

/// Read the whole file through a plain descriptor of its own.
fn plain_verify(x: &mut Exerciser<'_>) -> Result<(), Error> {
    let op = Op::Verify;
    let data = std::fs::read(&x.cfg.path).map_err(|e| x.io_fail(&op, "plain read", e))?;
    if data.len() as u64 != x.size() {
        return Err(x.fail(
            &op,
            format!(
                "plain read after close: {} bytes, model has {}",
                data.len(),
                x.size()
            ),
            x.compare(0, &data[..data.len().min(x.model.len())]),
        ));
    }
    let d = x.compare(0, &data);
    if d.0 > 0 {
        return Err(x.fail(&op, "plain read after close differs".into(), d));
    }
    Ok(())
}

/// A seed from the clock, for runs not given one (printed, so it replays).
pub fn clock_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    mix(t.as_nanos() as u64 ^ u64::from(std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The failure report tells a page held by someone (here mapped, which
    /// fadvise(DONTNEED) never drops) from one a later drop takes.
    #[test]
    fn how_long_held_tells_a_held_page_from_a_transient_one() {
        let mut f = tempfile::NamedTempFile::new_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        if sys::fs_magic(f.as_file().as_fd()).is_ok_and(|m| m.pages_are_storage()) {
            eprintln!("SKIP how_long_held: the crate's directory is on a memory filesystem");
            return;
        }
        f.write_all(&[7u8; 2 * PAGE as usize]).unwrap();
        f.as_file().sync_all().unwrap();
        let chunks = std::collections::BTreeSet::from([0]);
        // SAFETY (memmap2's contract): nothing else changes the file while mapped.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(PAGE as usize)
                .map(f.as_file())
        }
        .unwrap();
        assert_eq!(map[0], 7);
        let held = how_long_held(f.as_file(), &chunks);
        drop(map);
        let gone = how_long_held(f.as_file(), &chunks);
        assert!(held.contains("pages still cached"), "{held}");
        assert!(gone.contains("took them"), "{held} / {gone}");
    }
}
