//! Streaming workloads: write a dataset file to durability, or read it back,
//! in large sequential requests, either with plain `std::fs` I/O or through
//! `ubio`.
//!
//! A write is measured from open to durable: the file is truncated first
//! (outside the timing, so every write allocates fresh blocks and no mode
//! overwrites pages that another left behind), then opened, written in
//! `block`-sized requests, `fsync`ed and closed. A read is measured from open
//! to close over the whole file. Results carry the start and end on
//! [`crate::clock::monotonic_secs`], so other processes' samples can be
//! matched to the phase.

use crate::clock::monotonic_secs;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
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

/// How the bytes move: plain `std::fs::File` calls (what an unmodified
/// program does), or a `ubio::File` with the given backend.
///
/// Written as `buffered`, `ubio` (auto backend) or `ubio:<backend>`
/// (`ubio:kernel`, `ubio:emulated`, ...). Note that `ubio:buffered` is the
/// library's own pass-through backend, not the same code path as `buffered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Mode {
    Buffered,
    Ubio(BackendKind),
}

impl Mode {
    /// "buffered" or "ubio": the family, without the backend.
    pub fn family(self) -> &'static str {
        match self {
            Mode::Buffered => "buffered",
            Mode::Ubio(_) => "ubio",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Buffered => f.write_str("buffered"),
            Mode::Ubio(BackendKind::Auto) => f.write_str("ubio"),
            Mode::Ubio(k) => write!(f, "ubio:{k}"),
        }
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.split_once(':') {
            None if s == "buffered" => Ok(Mode::Buffered),
            None if s == "ubio" => Ok(Mode::Ubio(BackendKind::Auto)),
            Some(("ubio", k)) => Ok(Mode::Ubio(k.parse()?)),
            _ => Err(format!(
                "unknown mode '{s}' (expected buffered, ubio or ubio:<backend>)"
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
    /// `ubio::Stats` at close, for `ubio` modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubio_stats: Option<serde_json::Value>,
}

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
    let mut buf = vec![0u8; spec.block as usize];
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
    let start = monotonic_secs();
    let (bytes, backend, reason, stats) = match (spec.mode, spec.op) {
        (Mode::Buffered, Op::Write) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&spec.path)
                .map_err(|e| ctx(e, "open", &spec.path))?;
            let n =
                write_stream(&mut f, &buf, spec.bytes).map_err(|e| ctx(e, "write", &spec.path))?;
            f.sync_all().map_err(|e| ctx(e, "fsync", &spec.path))?;
            (n, "std".to_owned(), "plain std::fs::File".to_owned(), None)
        }
        (Mode::Buffered, Op::Read) => {
            let mut f = std::fs::File::open(&spec.path).map_err(|e| ctx(e, "open", &spec.path))?;
            let n = read_stream(&mut f, &mut buf).map_err(|e| ctx(e, "read", &spec.path))?;
            (n, "std".to_owned(), "plain std::fs::File".to_owned(), None)
        }
        (Mode::Ubio(kind), Op::Write) => {
            let mut f = ubio::OpenOptions::new()
                .write(true)
                .backend(kind)
                .open(&spec.path)?;
            let n = write_stream(&mut f, &buf, spec.bytes)?;
            f.sync_all()?;
            let st = f.close()?;
            (n, st.backend.to_string(), st.reason.clone(), Some(st))
        }
        (Mode::Ubio(kind), Op::Read) => {
            let mut f = ubio::OpenOptions::new()
                .read(true)
                .backend(kind)
                .open(&spec.path)?;
            let n = read_stream(&mut f, &mut buf)?;
            let st = f.close()?;
            (n, st.backend.to_string(), st.reason.clone(), Some(st))
        }
    };
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
        ubio_stats: stats.map(|s| serde_json::to_value(s).unwrap_or_default()),
    })
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
        assert_eq!(Mode::Ubio(BackendKind::Kernel).family(), "ubio");
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
