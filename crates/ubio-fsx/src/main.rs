//! `ubio-fsx`: the exerciser's command line (see the crate docs and
//! crates/ubio-fsx/README.md).
//!
//! Exit status: 0 all checks passed, 1 a mismatch or an unexpected error
//! (the report names the seed, the operation and the differing bytes),
//! 2 bad usage, 3 the file cannot be opened with the backend asked for.

use anyhow::{bail, Result};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use ubio_fsx::{Config, Error, Weights};

#[derive(Parser)]
#[command(
    name = "ubio-fsx",
    about = "fsx-style exerciser for ubio: random operations on one file, every read checked against a model"
)]
struct Args {
    /// The file to exercise (created, truncated; removed at the end unless --keep).
    #[arg(long)]
    file: PathBuf,
    /// The seed (default: from the clock; printed, so a run can be replayed).
    #[arg(long, alias = "replay")]
    seed: Option<u64>,
    /// Operations to run.
    #[arg(long)]
    ops: Option<u64>,
    /// Soak: 2,000,000 operations unless --ops says otherwise (or --duration stops it).
    #[arg(long)]
    soak: bool,
    /// Stop after this many seconds, whatever --ops says.
    #[arg(long)]
    duration: Option<f64>,
    /// auto, kernel, emulated, direct or buffered.
    #[arg(long, default_value = "auto")]
    backend: ubio::BackendKind,
    /// The file never grows beyond this many bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_size: u64,
    /// The longest read or write.
    #[arg(long, default_value_t = 256 << 10)]
    max_len: u64,
    /// ubio's write-behind window in bytes.
    #[arg(long, default_value_t = 256 << 10)]
    window: u64,
    /// Operation weights, e.g. "read=10,write=10,mmap_write=0"; names: read,
    /// write, truncate, fallocate, punch_hole, sync, reopen, buffered_write,
    /// direct_write, mmap_read, mmap_write.
    #[arg(long, default_value = "")]
    weights: String,
    /// Only operations through the ubio handle (no second handle): then the
    /// page cache is checked after close.
    #[arg(long)]
    ubio_only: bool,
    /// Verify the whole file every N operations (0: only at the end).
    #[arg(long, default_value_t = 1000)]
    verify_every: u64,
    /// Operations shown on failure.
    #[arg(long, default_value_t = 30)]
    tail: usize,
    /// Differing bytes shown on failure.
    #[arg(long, default_value_t = 16)]
    diffs: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Keep the file afterwards.
    #[arg(long)]
    keep: bool,
    /// Test hook: flip a byte of the file behind the exerciser's back
    /// before operation N (the run must then fail).
    #[arg(long, hide = true)]
    tamper_file_at: Option<u64>,
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ubio-fsx: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(a: Args) -> Result<ExitCode> {
    let seed = a.seed.unwrap_or_else(ubio_fsx::clock_seed);
    let mut cfg = Config::new(&a.file, seed);
    cfg.ops = a.ops.unwrap_or(if a.soak { 2_000_000 } else { 10_000 });
    cfg.duration = a.duration.map(Duration::from_secs_f64);
    cfg.backend = a.backend;
    cfg.max_size = a.max_size;
    cfg.max_len = a.max_len;
    cfg.window = a.window;
    cfg.verify_every = a.verify_every;
    cfg.log_tail = a.tail;
    cfg.max_diffs = a.diffs;
    cfg.tamper = a.tamper_file_at.map(|at| ubio_fsx::Tamper::File { at });
    let mut w = Weights::default();
    if a.ubio_only {
        w = w.ubio_only();
    }
    if let Err(e) = w.apply(&a.weights) {
        bail!("--weights: {e}");
    }
    cfg.weights = w;
    if cfg.max_size < 4096 || cfg.max_len == 0 {
        bail!("--max-size must be at least 4096 and --max-len at least 1");
    }
    eprintln!(
        "ubio-fsx: seed {seed}, {} operations, backend {}, file {}",
        cfg.ops,
        cfg.backend,
        a.file.display()
    );
    let result = ubio_fsx::run(&cfg);
    let code = match result {
        Ok(s) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print_summary(&s);
            }
            ExitCode::SUCCESS
        }
        Err(Error::Open(e)) => {
            eprintln!(
                "ubio-fsx: cannot open {} with backend {}: {e}",
                a.file.display(),
                cfg.backend
            );
            ExitCode::from(3)
        }
        Err(e @ Error::Failed(_)) => {
            eprint!("{e}");
            if let (true, Error::Failed(f)) = (a.json, &e) {
                println!("{}", serde_json::to_string_pretty(f)?);
            }
            // Keep the evidence.
            return Ok(ExitCode::from(1));
        }
    };
    if !a.keep {
        let _ = std::fs::remove_file(&a.file);
    }
    Ok(code)
}

fn print_summary(s: &ubio_fsx::Summary) {
    println!(
        "ubio-fsx: {} operations, 0 mismatches, seed {}, {:.1} s",
        s.ops, s.seed, s.elapsed_secs
    );
    println!(
        "  file {} on {}: backend {} (requested {}: {})",
        s.path.display(),
        s.fs_type,
        s.backend,
        s.backend_requested,
        s.backend_reason
    );
    println!("  O_DIRECT second handle: {}", s.odirect);
    let kinds: Vec<_> = s
        .ops_by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!("  by kind: {}", kinds.join(", "));
    if !s.unsupported.is_empty() {
        println!(
            "  refused by the filesystem (model unchanged): {:?}",
            s.unsupported
        );
    }
    println!(
        "  bytes: ubio read {} written {}; second handle written {}; mmap read {} written {}; verified {}",
        s.ubio_bytes_read,
        s.ubio_bytes_written,
        s.second_bytes_written,
        s.mmap_bytes_read,
        s.mmap_bytes_written,
        s.bytes_verified
    );
    println!(
        "  final size {}; ubio dropped {} pages; page cache: {}",
        s.final_size, s.ubio_pages_dropped, s.cache.detail
    );
    println!("  op digest {}", s.op_digest);
}
