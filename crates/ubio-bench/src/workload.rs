//! Streaming workloads: write a dataset file to durability, or read it back,
//! in large sequential requests: with plain `std::fs` I/O, through `ubio`, or
//! straight to the kernel with `RWF_DONTCACHE` or `O_DIRECT` (the references
//! ubio is measured against, without its bookkeeping).
//!
//! A write is measured from open to durable: the file is truncated first
//! (outside the timing, so every write allocates fresh blocks and no mode
//! overwrites pages that another left behind), then opened, written in
//! `block`-sized requests, `fsync`ed and closed. A read is measured from open
//! to close over the whole file. Results carry the start and end on
//! [`crate::clock::monotonic_secs`], so other processes' samples can be
//! matched to the phase, and the CPU time the process spent in between
//! (`getrusage`, all its threads).

use crate::clock::monotonic_secs;
use crate::cpu;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use ubio::sys::{self, RwFlags};
use ubio::BackendKind;

/// The request size of the demo and of most streaming benchmarks.
pub const DEFAULT_BLOCK: u64 = 1 << 20;

/// Write or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Write,
    Read,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Read => "read",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Op, String> {
        match s {
            "write" => Ok(Op::Write),
            "read" => Ok(Op::Read),
            _ => Err(format!("unknown op '{s}' (expected write or read)")),
        }
    }
}

/// How the bytes move.
///
/// Written as `buffered` (plain `std::fs::File` calls, what an unmodified
/// program does), `ubio` (a `ubio::File`, auto backend) or `ubio:<backend>`
/// (`ubio:kernel`, `ubio:emulated`, ...), `dontcache` (preadv2/pwritev2 with
/// `RWF_DONTCACHE`, Linux 6.14+) or `odirect` (`O_DIRECT`, one request in
/// flight, an aligned buffer). Note that `ubio:buffered` is the library's own
/// pass-through backend, not the same code path as `buffered`, and that
/// `dontcache` and `odirect` call the kernel directly: `ubio:kernel` and
/// `ubio:direct` are the library's backends built on the same calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Mode {
    Buffered,
    Ubio(BackendKind),
    Dontcache,
    Odirect,
}

impl Mode {
    /// "buffered", "ubio", "dontcache" or "odirect": the family, without
    /// ubio's backend.
    pub fn family(self) -> &'static str {
        match self {
            Mode::Buffered => "buffered",
            Mode::Ubio(_) => "ubio",
            Mode::Dontcache => "dontcache",
            Mode::Odirect => "odirect",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Ubio(BackendKind::Auto) => f.write_str("ubio"),
            Mode::Ubio(k) => write!(f, "ubio:{k}"),
            m => f.write_str(m.family()),
        }
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.split_once(':') {
            None if s == "buffered" => Ok(Mode::Buffered),
            None if s == "ubio" => Ok(Mode::Ubio(BackendKind::Auto)),
            None if s == "dontcache" => Ok(Mode::Dontcache),
            None if s == "odirect" => Ok(Mode::Odirect),
            Some(("ubio", k)) => Ok(Mode::Ubio(k.parse()?)),
            _ => Err(format!(
                "unknown mode '{s}' (expected buffered, ubio, ubio:<backend>, dontcache or odirect)"
            )),
        }
    }
}

impl From<Mode> for String {
    fn from(m: Mode) -> String {
        m.to_string()
    }
}

impl TryFrom<String> for Mode {
    type Error = String;
    fn try_from(s: String) -> Result<Mode, String> {
        s.parse()
    }
}

/// One streaming run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSpec {
    pub path: PathBuf,
    pub op: Op,
    pub mode: Mode,
    /// Bytes to write (rounded up to whole requests is not done: the last
    /// request is short). Ignored by reads, which read the whole file.
    pub bytes: u64,
    /// Request size.
    pub block: u64,
}

/// What one run did and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub op: Op,
    pub mode: Mode,
    /// The backend that moved the data: `std` for plain I/O, else the one
    /// `ubio` chose.
    pub backend: String,
    /// Why that backend (from `ubio`), or a note for plain I/O.
    pub reason: String,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    /// Timed interval on the shared monotonic clock.
    pub start_mono_secs: f64,
    pub end_mono_secs: f64,
    /// CPU seconds the streaming process spent in user space and in the
    /// kernel during the timed interval (getrusage(RUSAGE_SELF), all its
    /// threads). Work the kernel does for it in other threads (flusher
    /// writeback, kswapd) is not in here.
    #[serde(default)]
    pub cpu_user_secs: f64,
    #[serde(default)]
    pub cpu_sys_secs: f64,
    /// `ubio::Stats` at close, for `ubio` modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubio_stats: Option<serde_json::Value>,
}

impl StreamResult {
    /// User + system CPU seconds.
    pub fn cpu_secs(&self) -> f64 {
        self.cpu_user_secs + self.cpu_sys_secs
    }
}

/// Alignment of the `O_DIRECT` buffer, offsets and request sizes.
pub const DIRECT_ALIGN: u64 = 4096;

fn ctx(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Runs `spec` and measures it (see the module docs for what is timed).
pub fn run_stream(spec: &StreamSpec) -> io::Result<StreamResult> {
    if spec.block == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "request size must be at least 1 byte",
        ));
    }
    if spec.mode == Mode::Odirect {
        check_direct_sizes(spec)?;
    }
    let mut buf = AlignedBuf::new(spec.block as usize, DIRECT_ALIGN as usize);
    if spec.op == Op::Write {
        fill(&mut buf);
        // Untimed: free the old blocks, so every write allocates afresh.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&spec.path)
            .map_err(|e| ctx(e, "truncate", &spec.path))?;
    }
    let path = &spec.path;
    let start = monotonic_secs();
    let cpu_start = cpu::process_times()?;
    let (bytes, backend, reason, stats) = match (spec.mode, spec.op) {
        (Mode::Buffered, Op::Write) => {
            let mut f = open_write(path, 0)?;
            let n = write_stream(&mut f, &buf, spec.bytes).map_err(|e| ctx(e, "write", path))?;
            f.sync_all().map_err(|e| ctx(e, "fsync", path))?;
            (n, "std".to_owned(), "plain std::fs::File".to_owned(), None)
        }
        (Mode::Buffered, Op::Read) => {
            let mut f = File::open(path).map_err(|e| ctx(e, "open", path))?;
            let n = read_stream(&mut f, &mut buf).map_err(|e| ctx(e, "read", path))?;
            (n, "std".to_owned(), "plain std::fs::File".to_owned(), None)
        }
        (Mode::Ubio(kind), Op::Write) => {
            let mut f = ubio::OpenOptions::new()
                .write(true)
                .backend(kind)
                .open(path)?;
            let n = write_stream(&mut f, &buf, spec.bytes)?;
            f.sync_all()?;
            let st = f.close()?;
            (n, st.backend.to_string(), st.reason.clone(), Some(st))
        }
        (Mode::Ubio(kind), Op::Read) => {
            let mut f = ubio::OpenOptions::new()
                .read(true)
                .backend(kind)
                .open(path)?;
            let n = read_stream(&mut f, &mut buf)?;
            let st = f.close()?;
            (n, st.backend.to_string(), st.reason.clone(), Some(st))
        }
        (Mode::Dontcache, Op::Write) => {
            let f = open_write(path, 0)?;
            let n = dontcache_write(&f, &buf, spec.bytes)
                .map_err(|e| dontcache_err(e, "write", path))?;
            f.sync_all().map_err(|e| ctx(e, "fsync", path))?;
            (
                n,
                "RWF_DONTCACHE".to_owned(),
                DONTCACHE_REASON.to_owned(),
                None,
            )
        }
        (Mode::Dontcache, Op::Read) => {
            let f = File::open(path).map_err(|e| ctx(e, "open", path))?;
            let n = dontcache_read(&f, &mut buf).map_err(|e| dontcache_err(e, "read", path))?;
            (
                n,
                "RWF_DONTCACHE".to_owned(),
                DONTCACHE_REASON.to_owned(),
                None,
            )
        }
        (Mode::Odirect, Op::Write) => {
            let f = open_write(path, libc::O_DIRECT).map_err(|e| direct_err(e, path))?;
            let n =
                direct_write(&f, &buf, spec.bytes).map_err(|e| ctx(e, "O_DIRECT write", path))?;
            f.sync_all().map_err(|e| ctx(e, "fsync", path))?;
            (n, "O_DIRECT".to_owned(), DIRECT_REASON.to_owned(), None)
        }
        (Mode::Odirect, Op::Read) => {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
                .map_err(|e| direct_err(e, path))?;
            let n = direct_read(&f, &mut buf).map_err(|e| ctx(e, "O_DIRECT read", path))?;
            (n, "O_DIRECT".to_owned(), DIRECT_REASON.to_owned(), None)
        }
    };
    let cpu_used = cpu::process_times()?.since(cpu_start);
    let end = monotonic_secs();
    let seconds = (end - start).max(1e-9);
    Ok(StreamResult {
        op: spec.op,
        mode: spec.mode,
        backend,
        reason,
        bytes,
        seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
        start_mono_secs: start,
        end_mono_secs: end,
        cpu_user_secs: cpu_used.user_secs.max(0.0),
        cpu_sys_secs: cpu_used.sys_secs.max(0.0),
        ubio_stats: stats.map(|s| serde_json::to_value(s).unwrap_or_default()),
    })
}

const DONTCACHE_REASON: &str = "preadv2/pwritev2 with RWF_DONTCACHE, straight to the kernel";
const DIRECT_REASON: &str = "O_DIRECT, one request in flight, 4096-aligned buffer";

/// Checks, without timing anything, that `mode` can work on `path` (an
/// existing file that this process may write): `dontcache` sends a 1-byte
/// preadv2(RWF_DONTCACHE) at the end of the file (0 where supported,
/// EOPNOTSUPP where not; a zero-length call proves nothing), `odirect` opens
/// it with O_DIRECT. Other modes always pass (ubio reports its own errors).
pub fn check_mode(mode: Mode, path: &Path) -> io::Result<()> {
    match mode {
        Mode::Dontcache => {
            let f = File::open(path).map_err(|e| ctx(e, "open", path))?;
            let end = f.metadata().map_err(|e| ctx(e, "stat", path))?.len();
            let mut b = [0u8; 1];
            sys::preadv2(
                f.as_fd(),
                &mut [IoSliceMut::new(&mut b)],
                Some(end),
                RwFlags::DONTCACHE,
            )
            .map(drop)
            .map_err(|e| dontcache_err(e, "read", path))
        }
        Mode::Odirect => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map(drop)
            .map_err(|e| direct_err(e, path)),
        Mode::Buffered | Mode::Ubio(_) => Ok(()),
    }
}

fn open_write(path: &Path, flags: libc::c_int) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| ctx(e, "open", path))
}

/// EOPNOTSUPP from an RWF_DONTCACHE call, said plainly.
fn dontcache_err(e: io::Error, what: &str, path: &Path) -> io::Error {
    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{what} {} with RWF_DONTCACHE: not supported here ({e}); it needs Linux 6.14+ \
                 and a filesystem that has it (ext4, xfs; not btrfs, tmpfs or overlayfs): \
                 leave dontcache out of the modes or use another directory",
                path.display()
            ),
        )
    } else {
        ctx(e, &format!("{what} (RWF_DONTCACHE)"), path)
    }
}

/// EINVAL from an O_DIRECT open, said plainly.
fn direct_err(e: io::Error, path: &Path) -> io::Error {
    if e.raw_os_error() == Some(libc::EINVAL) {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "open {} with O_DIRECT: this filesystem does not support direct I/O ({e}): \
                 leave odirect out of the modes or use another directory",
                path.display()
            ),
        )
    } else {
        ctx(e, "open (O_DIRECT)", path)
    }
}

/// O_DIRECT moves whole aligned requests: the request size must be a
/// multiple of [`DIRECT_ALIGN`] (and of the file's own direct I/O alignment,
/// where statx reports one), and a write a whole number of requests.
fn check_direct_sizes(spec: &StreamSpec) -> io::Result<()> {
    let bad = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
    if !spec.block.is_multiple_of(DIRECT_ALIGN) {
        return bad(format!(
            "odirect: the request size ({} bytes) must be a multiple of {DIRECT_ALIGN}",
            spec.block
        ));
    }
    if spec.op == Op::Write && !spec.bytes.is_multiple_of(spec.block) {
        return bad(format!(
            "odirect: the size written ({} bytes) must be a multiple of the request size ({} bytes)",
            spec.bytes, spec.block
        ));
    }
    if let Ok(f) = File::open(&spec.path) {
        if let Ok(Some(a)) = sys::statx_dio_align(f.as_fd()) {
            let (mem, off) = (u64::from(a.mem_align), u64::from(a.offset_align));
            if !DIRECT_ALIGN.is_multiple_of(mem.max(1)) || !spec.block.is_multiple_of(off.max(1)) {
                return bad(format!(
                    "odirect: {} needs buffers aligned to {mem} and requests to {off} bytes",
                    spec.path.display()
                ));
            }
        }
    }
    Ok(())
}

/// pwritev2(RWF_DONTCACHE) of `total` bytes from offset 0, `buf` at a time.
fn dontcache_write(f: &File, buf: &[u8], total: u64) -> io::Result<u64> {
    let mut done = 0u64;
    while done < total {
        let want = (total - done).min(buf.len() as u64) as usize;
        let mut part = &buf[..want];
        while !part.is_empty() {
            match sys::pwritev2(
                f.as_fd(),
                &[IoSlice::new(part)],
                Some(done),
                RwFlags::DONTCACHE,
            ) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    part = &part[n..];
                    done += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(done)
}

/// preadv2(RWF_DONTCACHE) from offset 0 to the end of the file.
fn dontcache_read(f: &File, buf: &mut [u8]) -> io::Result<u64> {
    let mut done = 0u64;
    loop {
        match sys::preadv2(
            f.as_fd(),
            &mut [IoSliceMut::new(buf)],
            Some(done),
            RwFlags::DONTCACHE,
        ) {
            Ok(0) => return Ok(done),
            Ok(n) => done += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// O_DIRECT writes of whole requests from offset 0 (sizes checked before).
fn direct_write(f: &File, buf: &[u8], total: u64) -> io::Result<u64> {
    let mut done = 0u64;
    while done < total {
        f.write_all_at(buf, done)?;
        done += buf.len() as u64;
    }
    Ok(done)
}

/// O_DIRECT reads of whole requests from offset 0 to the end of the file
/// (the last one may come back short).
fn direct_read(f: &File, buf: &mut [u8]) -> io::Result<u64> {
    let mut done = 0u64;
    loop {
        match f.read_at(buf, done) {
            Ok(0) => return Ok(done),
            Ok(n) => done += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A zeroed heap buffer of exactly `len` bytes whose address is aligned to
/// `align`, as O_DIRECT wants (every mode uses one, so they all copy from
/// and to the same kind of memory).
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align)
            .expect("alignment is a power of two and the size fits");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, layout }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to at least `len` initialised (zeroed) bytes
        // owned by `self` for its whole life.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

fn write_stream(w: &mut impl Write, buf: &[u8], total: u64) -> io::Result<u64> {
    let mut done = 0u64;
    while done < total {
        let n = (total - done).min(buf.len() as u64) as usize;
        w.write_all(&buf[..n])?;
        done += n as u64;
    }
    w.flush()?;
    Ok(done)
}

fn read_stream(r: &mut impl Read, buf: &mut [u8]) -> io::Result<u64> {
    let mut done = 0u64;
    loop {
        match r.read(buf) {
            Ok(0) => return Ok(done),
            Ok(n) => done += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Fills `buf` with incompressible bytes (splitmix64), so no layer can
/// shortcut zeroes.
pub fn fill(buf: &mut [u8]) {
    let mut x = 0x5EED_u64;
    for chunk in buf.chunks_mut(8) {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

/// Bytes an unprivileged user could still write under `dir`
/// (`statvfs`: `f_bavail * f_frsize`).
pub fn available_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: statvfs is plain old data; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(ctx(io::Error::last_os_error(), "statvfs", dir));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip() {
        for s in [
            "buffered",
            "ubio",
            "ubio:kernel",
            "ubio:emulated",
            "ubio:direct",
            "ubio:buffered",
            "dontcache",
            "odirect",
        ] {
            let m: Mode = s.parse().unwrap();
            assert_eq!(m.to_string(), s);
            let j = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<Mode>(&j).unwrap(), m);
        }
        assert_eq!(
            "ubio:auto".parse::<Mode>().unwrap(),
            Mode::Ubio(BackendKind::Auto)
        );
        assert!("ubio:fast".parse::<Mode>().is_err());
        assert!("direct".parse::<Mode>().is_err());
        assert!("dontcache:x".parse::<Mode>().is_err());
        assert!("ODIRECT".parse::<Mode>().is_err());
        let e = "uncached".parse::<Mode>().unwrap_err();
        assert!(e.contains("dontcache or odirect"), "{e}");
        assert_eq!(Mode::Ubio(BackendKind::Kernel).family(), "ubio");
        assert_eq!(Mode::Dontcache.family(), "dontcache");
        assert_eq!(Mode::Odirect.family(), "odirect");
    }

    /// Why `mode` cannot run in `dir`, or None.
    fn unsupported(mode: Mode, dir: &Path) -> Option<String> {
        let probe = dir.join("probe");
        std::fs::write(&probe, b"").unwrap();
        let r = check_mode(mode, &probe);
        std::fs::remove_file(&probe).unwrap();
        match r {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Some(e.to_string()),
            r => {
                r.unwrap();
                None
            }
        }
    }

    #[test]
    fn kernel_modes_write_then_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        for mode in [Mode::Dontcache, Mode::Odirect] {
            if let Some(why) = unsupported(mode, dir.path()) {
                eprintln!("SKIP kernel_modes_write_then_read ({mode}): {why}");
                continue;
            }
            let spec = StreamSpec {
                path: path.clone(),
                op: Op::Write,
                mode,
                bytes: 3 << 20,
                block: 1 << 20,
            };
            let w = run_stream(&spec).unwrap();
            assert_eq!((w.bytes, w.mode), (3 << 20, mode));
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 << 20);
            assert!(w.mb_per_s > 0.0 && w.cpu_secs() > 0.0, "{w:?}");
            assert!(w.cpu_user_secs >= 0.0 && w.cpu_sys_secs >= 0.0);
            let mut expect = vec![0u8; 1 << 20];
            fill(&mut expect);
            let data = std::fs::read(&path).unwrap();
            assert!(data.chunks(1 << 20).all(|c| c == expect), "{mode}: data");
            let r = run_stream(&StreamSpec {
                op: Op::Read,
                ..spec
            })
            .unwrap();
            assert_eq!(r.bytes, 3 << 20, "{mode}");
            assert!(r.ubio_stats.is_none());
        }
    }

    #[test]
    fn odirect_reads_a_short_tail() {
        let dir = tempfile::tempdir().unwrap();
        if let Some(why) = unsupported(Mode::Odirect, dir.path()) {
            return eprintln!("SKIP odirect_reads_a_short_tail: {why}");
        }
        let path = dir.path().join("data");
        std::fs::write(&path, vec![3u8; (1 << 20) + 4096 + 17]).unwrap();
        let r = run_stream(&StreamSpec {
            path,
            op: Op::Read,
            mode: Mode::Odirect,
            bytes: 0,
            block: 1 << 20,
        })
        .unwrap();
        assert_eq!(r.bytes, (1 << 20) + 4096 + 17);
    }

    #[test]
    fn odirect_refuses_unaligned_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let spec = StreamSpec {
            path: dir.path().join("data"),
            op: Op::Write,
            mode: Mode::Odirect,
            bytes: 3 << 20 | 5,
            block: 1 << 20,
        };
        let e = run_stream(&spec).unwrap_err();
        assert!(
            e.to_string().contains("multiple of the request size"),
            "{e}"
        );
        let e = run_stream(&StreamSpec {
            block: 1000,
            bytes: 3000,
            ..spec
        })
        .unwrap_err();
        assert!(e.to_string().contains("multiple of 4096"), "{e}");
    }

    #[test]
    fn dontcache_unsupported_is_said_plainly() {
        let e = dontcache_err(
            io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            "read",
            Path::new("/x"),
        );
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(
            e.to_string().contains("RWF_DONTCACHE: not supported here"),
            "{e}"
        );
        let e = dontcache_err(
            io::Error::from_raw_os_error(libc::EIO),
            "read",
            Path::new("/x"),
        );
        assert_eq!(e.raw_os_error(), None);
        assert!(e.to_string().contains("read (RWF_DONTCACHE) /x"), "{e}");
    }

    #[test]
    fn buffers_are_aligned_and_exact() {
        for len in [1, 4096, (1 << 20) + 3] {
            let b = AlignedBuf::new(len, 4096);
            assert_eq!((b.len(), b.as_ptr() as usize % 4096), (len, 0));
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn fill_is_not_constant() {
        let mut b = vec![0u8; 4099];
        fill(&mut b);
        assert!(b.iter().filter(|&&x| x == 0).count() < 100);
        assert_ne!(b[..8], b[8..16]);
    }

    #[test]
    fn write_then_read_every_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        for mode in [
            Mode::Buffered,
            Mode::Ubio(BackendKind::Auto),
            Mode::Ubio(BackendKind::Emulated),
        ] {
            let spec = StreamSpec {
                path: path.clone(),
                op: Op::Write,
                mode,
                bytes: 3 << 20 | 5,
                block: 1 << 20,
            };
            let w = run_stream(&spec).unwrap();
            assert_eq!(w.bytes, 3 << 20 | 5);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 << 20 | 5);
            assert!(w.end_mono_secs >= w.start_mono_secs && w.mb_per_s > 0.0);
            assert_eq!(w.ubio_stats.is_some(), mode != Mode::Buffered);
            assert!(w.cpu_secs() > 0.0, "{mode}: {w:?}");
            let r = run_stream(&StreamSpec {
                op: Op::Read,
                ..spec
            })
            .unwrap();
            assert_eq!(r.bytes, 3 << 20 | 5, "{mode}");
        }
    }

    #[test]
    fn free_space_is_known() {
        assert!(available_bytes(Path::new(".")).unwrap() > 0);
        assert!(available_bytes(Path::new("/nonexistent/ubio")).is_err());
    }
}
