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

/// A data-path setting read from the environment; one that names nothing
/// is noted in `problems`, and the default kept.
fn setting<T>(read: Result<Option<T>, String>, problems: &mut Vec<String>) -> Option<T> {
    read.unwrap_or_else(|e| {
        problems.push(format!("{e}; using the default"));
        None
    })
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
    if let Some(w) = setting(ubio::DirectReads::from_env(var), &mut problems) {
        stream.direct_reads = w;
    }
    if let Some(w) = setting(ubio::DirectWrites::from_env(var), &mut problems) {
        stream.direct_writes = w;
    }
    if let Some(w) = setting(ubio::SmallReadahead::from_env(var), &mut problems) {
        stream.small_readahead = w;
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
