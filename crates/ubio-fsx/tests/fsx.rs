//! The exerciser on every backend and filesystem (ext4, xfs, btrfs on loop
//! devices made here, and a tmpfs), a bounded number of operations each;
//! proof that its checker fails when it should; replay of a seed; and the
//! soak (ignored; see crates/ubio-fsx/README.md, "Soak").

mod common;

use common::{scratch, target_dir, MIB};
use std::io;
use std::path::Path;
use std::process::Command;
use ubio::{BackendKind, DirectReads, DirectWrites, SmallReadahead};
use ubio_fsx::{Config, Error, Summary, Tamper, Weights};

/// The backend is refused on this filesystem: check that the refusal is the
/// clear error the contract asks for and that the probe agrees.
fn assert_refused(e: &io::Error, backend: BackendKind, fs: &str, path: &Path) {
    let msg = e.to_string();
    assert_eq!(
        e.kind(),
        io::ErrorKind::Unsupported,
        "{backend} on {fs}: {msg}"
    );
    assert!(msg.contains(&format!("backend '{backend}'")), "{msg}");
    assert!(msg.contains(fs), "refusal must name the filesystem: {msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    let probe = ubio::probe_path(path.parent().unwrap()).unwrap();
    let possible = match backend {
        BackendKind::Kernel => probe.fs.dontcache.available,
        BackendKind::Direct => probe.fs.direct_io.available,
        _ => true,
    };
    assert!(
        !possible,
        "{backend} refused on {fs} though the probe says it works: {msg}"
    );
}

/// Run one configuration: Some(summary), or None where the backend does
/// not apply to the filesystem (after checking the refusal). Panics with
/// the exerciser's report on a mismatch.
fn exercise(cfg: &Config, fs: &str) -> Option<Summary> {
    let r = ubio_fsx::run(cfg);
    let _ = std::fs::remove_file(&cfg.path);
    match r {
        Ok(s) => Some(s),
        Err(Error::Open(e)) => {
            assert_refused(&e, cfg.backend, fs, &cfg.path);
            None
        }
        Err(e) => panic!("{fs}:\n{e}"),
    }
}

/// One way of opening the file under test.
#[derive(Clone)]
struct Variant {
    backend: BackendKind,
    direct_reads: DirectReads,
    direct_writes: DirectWrites,
    small_readahead: SmallReadahead,
    /// What its lines print.
    name: String,
}

impl Variant {
    fn apply(&self, cfg: &mut Config) {
        cfg.backend = self.backend;
        cfg.direct_reads = self.direct_reads;
        cfg.direct_writes = self.direct_writes;
        cfg.small_readahead = self.small_readahead;
    }
}

/// Every backend with the page cache alone, and the emulated backend with
/// its reads of ranges others have not cached, and its aligned writes,
/// made through O_DIRECT (`Always`: the race's choice forced), and with
/// its own readahead in small folios (`Always`: as where memory is
/// fragmented).
fn variants() -> Vec<Variant> {
    let plain = |backend: BackendKind| Variant {
        backend,
        direct_reads: DirectReads::Never,
        direct_writes: DirectWrites::Never,
        small_readahead: SmallReadahead::Never,
        name: backend.to_string(),
    };
    let mut all: Vec<Variant> = BackendKind::ALL.map(plain).into();
    all.push(Variant {
        direct_reads: DirectReads::Always,
        name: "emulated (direct reads)".into(),
        ..plain(BackendKind::Emulated)
    });
    all.push(Variant {
        direct_writes: DirectWrites::Always,
        name: "emulated (direct writes)".into(),
        ..plain(BackendKind::Emulated)
    });
    all.push(Variant {
        small_readahead: SmallReadahead::Always,
        name: "emulated (small readahead)".into(),
        ..plain(BackendKind::Emulated)
    });
    all
}

/// Every variant on one filesystem: two seeds with every operation, one
/// with ubio's alone (then nothing may stay cached after close).
fn every_backend_on(fs_name: &str) {
    let fs = scratch(fs_name);
    let mut total = 0;
    for variant in variants() {
        let Variant {
            backend, ref name, ..
        } = variant;
        let mut line = Vec::new();
        for seed in [1u64, 2, 3] {
            let mut cfg = Config::new(fs.mount_point().join(format!("fsx-{backend}")), seed);
            variant.apply(&mut cfg);
            cfg.ops = 2000;
            cfg.max_size = 2 * MIB;
            cfg.max_len = 256 << 10;
            cfg.verify_every = 500;
            if seed == 3 {
                cfg.weights = Weights::default().ubio_only();
            }
            let Some(s) = exercise(&cfg, fs_name) else {
                line.push(format!("seed {seed}: refused (does not apply)"));
                continue;
            };
            assert_eq!(s.ops, cfg.ops);
            assert_eq!(s.fs_type, fs_name);
            // Checked at every close (ubio_fsx fails the run otherwise):
            // no page left but those cached before the stream reached them.
            let managed = backend != BackendKind::Buffered && fs_name != "tmpfs";
            assert_eq!(s.cache.checked, seed == 3 && managed, "{}", s.cache.detail);
            if backend == BackendKind::Direct || backend == BackendKind::Kernel {
                assert_eq!(s.backend, backend.name(), "explicit backend honoured");
            }
            if variant.direct_reads == DirectReads::Always && managed {
                assert!(s.ubio_bytes_read_direct > 0, "{name}: no read went direct");
            }
            if variant.small_readahead == SmallReadahead::Always && managed {
                assert!(
                    s.ubio_small_readahead_bytes > 0,
                    "{name}: no read asked for its pages ahead"
                );
            }
            if variant.direct_writes == DirectWrites::Always && managed {
                assert!(
                    s.ubio_bytes_written_direct > 0,
                    "{name}: no write went direct"
                );
            }
            total += s.ops;
            line.push(format!(
                "seed {seed}: {} ops as {}{}{} in {:.1} s{}",
                s.ops,
                s.backend,
                match (s.ubio_bytes_read_direct, s.ubio_bytes_written_direct) {
                    (0, 0) => String::new(),
                    (r, w) => format!(" ({r} bytes read and {w} written direct)"),
                },
                match s.ubio_small_readahead_bytes {
                    0 => String::new(),
                    n => format!(" ({n} bytes asked for ahead in small folios)"),
                },
                s.elapsed_secs,
                if s.cache.checked {
                    format!(" ({})", s.cache.detail)
                } else {
                    String::new()
                }
            ));
        }
        eprintln!("fsx {fs_name} {name}: {}", line.join("; "));
    }
    eprintln!("fsx {fs_name}: {total} operations, 0 mismatches");
}

#[test]
fn fsx_every_backend_on_ext4() {
    every_backend_on("ext4");
}

#[test]
fn fsx_every_backend_on_xfs() {
    every_backend_on("xfs");
}

#[test]
fn fsx_every_backend_on_btrfs() {
    every_backend_on("btrfs");
}

#[test]
fn fsx_every_backend_on_tmpfs() {
    every_backend_on("tmpfs");
}

fn workdir() -> tempfile::TempDir {
    let base = target_dir().join("fsx-tests");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

/// A run that must fail at operation `at`, at the byte it tampered with.
fn tampered(tamper: Tamper, at: u64) -> ubio_fsx::Failure {
    let dir = workdir();
    let mut cfg = Config::new(dir.path().join("f"), 99);
    cfg.ops = 2000;
    cfg.tamper = Some(tamper);
    match ubio_fsx::run(&cfg) {
        Err(Error::Failed(f)) => {
            assert_eq!(f.seed, 99);
            assert_eq!(f.op_number, at, "found by the verify right after");
            assert_eq!(f.diff_count, 1, "one byte flipped:\n{f}");
            let d = f.diffs[0];
            assert_eq!(d.got, !d.expected, "flipped:\n{f}");
            assert!(f.log_tail.iter().any(|l| l.contains("TAMPER")), "{f}");
            assert!(f.log_tail.len() <= cfg.log_tail);
            let report = f.to_string();
            assert!(report.contains("seed 99"), "{report}");
            assert!(report.contains(&format!("{:#x}", d.offset)), "{report}");
            *f
        }
        other => panic!("tampering went unnoticed: {other:?}"),
    }
}

#[test]
fn fsx_detects_a_file_changed_behind_its_back() {
    let f = tampered(Tamper::File { at: 700 }, 700);
    eprintln!("{f}");
}

#[test]
fn fsx_detects_a_corrupted_model() {
    tampered(Tamper::Model { at: 300 }, 300);
}

#[test]
fn fsx_replays_a_seed() {
    let dir = workdir();
    let run = |seed: u64| {
        let mut cfg = Config::new(dir.path().join("f"), seed);
        cfg.ops = 1500;
        cfg.keep_log = true;
        ubio_fsx::run(&cfg).unwrap()
    };
    let (a, b, c) = (run(5), run(5), run(6));
    assert_eq!(a.log, b.log, "same seed, same operations");
    assert_eq!(a.op_digest, b.op_digest);
    assert_eq!(
        a.log.as_ref().unwrap().len(),
        1501,
        "1500 and the final verify"
    );
    assert_ne!(a.log, c.log, "another seed, other operations");
    assert_ne!(a.op_digest, c.op_digest);
}

/// The binary: a tampered run exits 1 and prints the seed, the operation
/// log and the differing bytes; a clean run exits 0 and prints a summary.
#[test]
fn fsx_binary_reports_a_mismatch() {
    let dir = workdir();
    let file = dir.path().join("f");
    let bin = env!("CARGO_BIN_EXE_ubio-fsx");
    let out = Command::new(bin)
        .args([
            "--seed",
            "42",
            "--ops",
            "1000",
            "--tamper-file-at",
            "400",
            "--file",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("FAILED at operation 400"), "{err}");
    assert!(err.contains("seed 42"), "{err}");
    assert!(err.contains("1 bytes differ"), "{err}");
    assert!(err.contains("last 30 operations"), "{err}");
    let out = Command::new(bin)
        .args(["--seed", "42", "--ops", "1000", "--json", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["ops"], 1000);
    assert_eq!(s["mismatches"], 0);
    assert!(!file.exists(), "removed after a clean run");
}

/// The soak: `UBIO_FSX_SOAK_OPS` operations (default 60,000) for every
/// backend on every filesystem, in runs of 20,000 with their own seeds
/// (half of them with ubio's operations alone). Prints the counts per
/// backend and filesystem; fails if any run found a mismatch.
///
///     cargo test --release -p ubio-fsx --test fsx -- --ignored soak --nocapture
#[test]
#[ignore = "soak: minutes; run by hand (crates/ubio-fsx/README.md)"]
fn soak() {
    let per_combo: u64 = std::env::var("UBIO_FSX_SOAK_OPS")
        .map(|v| v.parse().expect("UBIO_FSX_SOAK_OPS: a number"))
        .unwrap_or(60_000);
    let base: u64 = std::env::var("UBIO_FSX_SOAK_SEED")
        .map(|v| v.parse().expect("UBIO_FSX_SOAK_SEED: a number"))
        .unwrap_or(1000);
    let filesystems: Vec<String> = std::env::var("UBIO_FSX_SOAK_FS")
        .unwrap_or_else(|_| "ext4,xfs,btrfs,tmpfs".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    const RUN: u64 = 20_000;
    let mut table = Vec::new();
    let mut failures = Vec::new();
    let mut total = 0;
    for fs_name in &filesystems {
        let fs = scratch(fs_name);
        for (v, variant) in variants().into_iter().enumerate() {
            let Variant {
                backend, ref name, ..
            } = variant;
            let (mut ops, mut runs, mut refused) = (0, 0, false);
            let mut i = 0;
            while ops < per_combo && !refused {
                let seed =
                    base + ubio_fsx::mix(i ^ (v as u64 * 1000) ^ fs_name.len() as u64) % 1_000_000;
                let mut cfg = Config::new(fs.mount_point().join(format!("soak-{v}")), seed);
                variant.apply(&mut cfg);
                cfg.ops = RUN.min(per_combo - ops);
                if i % 2 == 1 {
                    cfg.weights = Weights::default().ubio_only();
                }
                i += 1;
                match ubio_fsx::run(&cfg) {
                    Ok(s) => {
                        ops += s.ops;
                        runs += 1;
                    }
                    Err(Error::Open(e)) => {
                        assert_refused(&e, backend, fs_name, &cfg.path);
                        refused = true;
                    }
                    Err(e) => {
                        eprintln!("{fs_name} {name}:\n{e}");
                        failures.push(format!("{fs_name} {name} seed {seed}"));
                        ops += cfg.ops;
                    }
                }
                let _ = std::fs::remove_file(&cfg.path);
            }
            total += ops;
            let row = if refused {
                format!("{fs_name:6} {name:9} refused (does not apply)")
            } else {
                format!("{fs_name:6} {name:9} {ops:>9} ops in {runs} runs")
            };
            eprintln!("soak {row}");
            table.push(row);
        }
    }
    eprintln!(
        "soak total: {total} operations, {} failed runs",
        failures.len()
    );
    for row in &table {
        eprintln!("  {row}");
    }
    assert!(failures.is_empty(), "failed runs: {failures:?}");
}

/// Replay one run on a scratch filesystem made here, e.g. a soak failure:
/// `UBIO_FSX_REPLAY="xfs kernel 959707 20000 ubio-only"` (filesystem,
/// backend, seed, operations, and optionally `ubio-only` and
/// `direct-reads`, for the soak's "emulated (direct reads)").
///
///     UBIO_FSX_REPLAY="..." cargo test --release -p ubio-fsx --test fsx -- --ignored replay --nocapture
#[test]
#[ignore = "by hand: replays UBIO_FSX_REPLAY"]
fn replay() {
    let spec = std::env::var("UBIO_FSX_REPLAY").expect(
        "UBIO_FSX_REPLAY=\"FS BACKEND SEED OPS [ubio-only] [direct-reads] [direct-writes]\"",
    );
    let w: Vec<&str> = spec.split_whitespace().collect();
    let fs = scratch(w[0]);
    let mut cfg = Config::new(fs.mount_point().join("replay"), w[2].parse().unwrap());
    cfg.backend = w[1].parse().unwrap();
    cfg.ops = w[3].parse().unwrap();
    if w[4..].contains(&"ubio-only") {
        cfg.weights = Weights::default().ubio_only();
    }
    if w[4..].contains(&"direct-reads") {
        cfg.direct_reads = DirectReads::Always;
    }
    if w[4..].contains(&"direct-writes") {
        cfg.direct_writes = DirectWrites::Always;
    }
    if let Ok(n) = std::env::var("UBIO_FSX_REPLAY_LOG") {
        // Print the whole operation log of the first N operations.
        let mut c = cfg.clone();
        c.ops = n.parse().unwrap();
        c.keep_log = true;
        c.check_cache = false;
        for line in ubio_fsx::run(&c).unwrap().log.unwrap() {
            eprintln!("LOG {line}");
        }
    }
    match ubio_fsx::run(&cfg) {
        Ok(s) => eprintln!("{}", serde_json::to_string_pretty(&s).unwrap()),
        Err(e) => panic!("{e}"),
    }
}
