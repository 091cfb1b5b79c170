//! Settings, read once from the environment in the constructor (`ubio run`
//! sets them from its flags): UBIO_WINDOW (bytes, K/M/G suffixes allowed),
//! UBIO_BACKEND (auto, kernel, emulated, direct, buffered),
//! UBIO_DIRECT_READS (never, under-reclaim, when-faster, always;
//! `ubio::DirectReads`), UBIO_DIRECT_WRITES (never, when-faster, always;
//! `ubio::DirectWrites`), UBIO_SMALL_READAHEAD (never, when-fragmented,
//! always; `ubio::SmallReadahead`),
//! UBIO_LOG=debug, UBIO_LOG_FILE and UBIO_ENGINE.

use std::ffi::CString;
use std::sync::OnceLock;
use ubio::{BackendKind, StreamOptions};

#[derive(Debug)]
pub struct Config {
    pub stream: StreamOptions,
    /// One line per managed descriptor at finish.
    pub debug: bool,
    /// Where the debug log goes (appended); stderr when unset.
    pub log_file: Option<CString>,
    /// The socket of `ubio run`'s engine (UBIO_ENGINE): files managed here
    /// are claimed there, so that the engine leaves them alone.
    pub engine: Option<String>,
    /// Settings that could not be read, each with the default used instead
    /// (logged at load with UBIO_LOG=debug).
    pub problems: Vec<String>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn get() -> &'static Config {
    CONFIG.get_or_init(from_env)
}

fn from_env() -> Config {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let debug = var("UBIO_LOG").is_some_and(|v| v.eq_ignore_ascii_case("debug"));
    let log_file = var("UBIO_LOG_FILE").and_then(|p| CString::new(p).ok());
    let mut stream = StreamOptions::default();
    let mut problems = Vec::new();
    if let Some(w) = var("UBIO_WINDOW") {
        match parse_size(&w) {
            Some(n) if n > 0 => stream.window = n,
            _ => problems.push(format!("UBIO_WINDOW={w} is not a size; using the default")),
        }
    }
    if let Some(b) = var("UBIO_BACKEND") {
        match b.parse::<BackendKind>() {
            Ok(k) => stream.backend = k,
            Err(e) => problems.push(format!("UBIO_BACKEND: {e}; using auto")),
        }
    }
    if let Some(d) = var("UBIO_DIRECT_READS") {
        match d.parse::<ubio::DirectReads>() {
            Ok(w) => stream.direct_reads = w,
            Err(e) => problems.push(format!("UBIO_DIRECT_READS: {e}; using the default")),
        }
    }
    if let Some(d) = var("UBIO_DIRECT_WRITES") {
        match d.parse::<ubio::DirectWrites>() {
            Ok(w) => stream.direct_writes = w,
            Err(e) => problems.push(format!("UBIO_DIRECT_WRITES: {e}; using the default")),
        }
    }
    if let Some(d) = var("UBIO_SMALL_READAHEAD") {
        match d.parse::<ubio::SmallReadahead>() {
            Ok(w) => stream.small_readahead = w,
            Err(e) => problems.push(format!("UBIO_SMALL_READAHEAD: {e}; using the default")),
        }
    }
    Config {
        stream,
        debug,
        log_file,
        engine: var(ubio::claims::ENV),
        problems,
    }
}

/// "16777216", "16M", "16MiB", "1g", "512k": the library's parser.
pub fn parse_size(s: &str) -> Option<u64> {
    ubio::size::parse(s).ok()
}
