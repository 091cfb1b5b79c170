//! Many writers and readers on one file at once, checked byte for byte
//! against a model, for every backend on ext4, xfs, btrfs and tmpfs:
//!
//! - threads sharing one `ubio::File` (`read_at`/`write_at` take `&self`):
//!   each operation takes a lock on its byte range only (neighbouring ranges
//!   share pages and O_DIRECT blocks), writes random bytes at an unaligned
//!   offset or reads a range and compares it with the model; some reads go
//!   through a plain descriptor of the same file (whose pages the direct
//!   backend must then write through the cache, coherently); flushes and
//!   fdatasync now and then; the whole file checked through ubio and a
//!   plain descriptor at the end;
//! - processes under the shim: c/share.c (PROCS children of one program
//!   under `ubio run --backend B`, each writing, reading back and checking
//!   its own regions, neighbours' regions sharing pages).
//!
//! `UBIO_CONCURRENT_OPS` operations per thread (default 400; the
//! integrity script runs more), `UBIO_CONCURRENT_SEED` the seed.

mod common;

use common::{compile_c, scratch, ubio_bin, MIB};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Condvar, Mutex, OnceLock};
use ubio::BackendKind;
use ubio_testenv::rng::SplitMix64;

const SIZE: u64 = 8 * MIB + 4321;
const THREADS: u64 = 4;

fn ops() -> u64 {
    std::env::var("UBIO_CONCURRENT_OPS")
        .ok()
        .map(|v| v.parse().expect("UBIO_CONCURRENT_OPS: a number"))
        .unwrap_or(400)
}

fn seed() -> u64 {
    std::env::var("UBIO_CONCURRENT_SEED")
        .ok()
        .map(|v| v.parse().expect("UBIO_CONCURRENT_SEED: a number"))
        .unwrap_or_else(ubio_fsx::clock_seed)
}

/// Byte ranges held by operations in flight; an operation waits until its
/// range overlaps none.
#[derive(Default)]
struct RangeLocks {
    held: Mutex<Vec<Range<u64>>>,
    freed: Condvar,
}

impl RangeLocks {
    fn lock(&self, r: Range<u64>) -> RangeGuard<'_> {
        let mut held = self.held.lock().unwrap();
        while held.iter().any(|h| h.start < r.end && r.start < h.end) {
            held = self.freed.wait(held).unwrap();
        }
        held.push(r.clone());
        RangeGuard {
            locks: self,
            range: r,
        }
    }
}

struct RangeGuard<'a> {
    locks: &'a RangeLocks,
    range: Range<u64>,
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.held.lock().unwrap();
        let i = held.iter().position(|h| *h == self.range).unwrap();
        held.swap_remove(i);
        self.locks.freed.notify_all();
    }
}

/// First differing byte of `got` against the model at `off`, as a message.
fn differ(what: &str, off: u64, got: &[u8], want: &[u8]) -> Option<String> {
    let i = got.iter().zip(want).position(|(a, b)| a != b)?;
    Some(format!(
        "{what}: byte {} is {:#x}, the model says {:#x}",
        off + i as u64,
        got[i],
        want[i]
    ))
}

fn threads_on(fs_name: &str) {
    let fs = scratch(fs_name);
    let base = seed();
    let mut total = 0;
    for (bi, backend) in BackendKind::ALL.into_iter().enumerate() {
        let path = fs.mount_point().join(format!("shared-{backend}"));
        let mut rng = SplitMix64::new(base ^ (bi as u64 + 1));
        let mut init = vec![0u8; SIZE as usize];
        rng.fill(&mut init);
        std::fs::write(&path, &init).unwrap();
        let f = match ubio::OpenOptions::new()
            .read(true)
            .write(true)
            .backend(backend)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                eprintln!("{fs_name} {backend}: refused as expected: {e}");
                continue;
            }
            Err(e) => panic!("{fs_name} {backend}: {e}"),
        };
        let plain = std::fs::File::open(&path).unwrap();
        let model = Mutex::new(init);
        let locks = RangeLocks::default();
        let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (f, plain, model, locks, errors) = (&f, &plain, &model, &locks, &errors);
                let mut rng = SplitMix64::new(base ^ (bi as u64 + 1) ^ ubio_fsx::mix(t + 100));
                s.spawn(move || {
                    let mut buf = vec![0u8; 256 << 10];
                    for op in 0..ops() {
                        let off = rng.below(SIZE - 1);
                        let len = 1 + rng.below((SIZE - off).min(256 << 10));
                        let r = off..off + len;
                        let b = &mut buf[..len as usize];
                        let kind = rng.below(20);
                        let failed = match kind {
                            0..=9 => {
                                rng.fill(b);
                                let _g = locks.lock(r.clone());
                                f.write_all_at(b, off)
                                    .err()
                                    .map(|e| format!("write_at: {e}"))
                                    .or_else(|| {
                                        model.lock().unwrap()[off as usize..r.end as usize]
                                            .copy_from_slice(b);
                                        None
                                    })
                            }
                            10..=17 => {
                                let _g = locks.lock(r.clone());
                                let through = if kind < 16 {
                                    "ubio read_at"
                                } else {
                                    "plain pread"
                                };
                                let res = if kind < 16 {
                                    f.read_exact_at(b, off)
                                } else {
                                    plain.read_exact_at(b, off)
                                };
                                match res {
                                    Err(e) => Some(format!("{through}: {e}")),
                                    Ok(()) => {
                                        let m = model.lock().unwrap();
                                        differ(through, off, b, &m[off as usize..r.end as usize])
                                    }
                                }
                            }
                            18 => f.sync_data().err().map(|e| format!("sync_data: {e}")),
                            _ => f
                                .flush_writeback()
                                .err()
                                .map(|e| format!("flush_writeback: {e}")),
                        };
                        if let Some(why) = failed {
                            errors
                                .lock()
                                .unwrap()
                                .push(format!("thread {t} op {op} at {off} ({len} bytes): {why}"));
                            return;
                        }
                    }
                });
            }
        });
        let errors = errors.into_inner().unwrap();
        assert!(
            errors.is_empty(),
            "{fs_name} {backend} seed {base}: {}",
            errors.join("\n")
        );
        let model = model.into_inner().unwrap();
        let mut got = vec![0u8; SIZE as usize];
        f.read_exact_at(&mut got, 0).unwrap();
        if let Some(d) = differ("whole file through ubio", 0, &got, &model) {
            panic!("{fs_name} {backend} seed {base}: {d}");
        }
        f.close().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len() as u64, SIZE, "{fs_name} {backend}: size");
        if let Some(d) = differ("whole file after close", 0, &got, &model) {
            panic!("{fs_name} {backend} seed {base}: {d}");
        }
        std::fs::remove_file(&path).unwrap();
        total += THREADS * ops();
        eprintln!("{fs_name} {backend}: {THREADS} threads x {} operations on one handle, 0 mismatches (seed {base})", ops());
    }
    eprintln!("threads on {fs_name}: {total} operations, 0 mismatches");
}

#[test]
fn threads_share_one_file_on_ext4() {
    threads_on("ext4");
}

#[test]
fn threads_share_one_file_on_xfs() {
    threads_on("xfs");
}

#[test]
fn threads_share_one_file_on_btrfs() {
    threads_on("btrfs");
}

#[test]
fn threads_share_one_file_on_tmpfs() {
    threads_on("tmpfs");
}

/// c/share.c compiled once per test run.
fn share_c() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_c("share"))
}

fn processes_on(fs_name: &str) {
    let fs = scratch(fs_name);
    let base = seed();
    for (i, backend) in ["auto", "kernel", "emulated", "direct", "buffered"]
        .into_iter()
        .enumerate()
    {
        let file = fs.mount_point().join(format!("share-{backend}"));
        let log = fs.mount_point().join(format!("share-{backend}.log"));
        let seed = (base ^ i as u64) % 1_000_000_007;
        let mut cmd = Command::new(ubio_bin());
        cmd.args(["run", "--backend", backend, "--"]).arg(share_c());
        cmd.args([
            "-p",
            "4",
            "-n",
            &ops().to_string(),
            "-r",
            "12345",
            "-s",
            &seed.to_string(),
        ]);
        if backend == "direct" {
            // Another process's update of a shared block is lost to any
            // O_DIRECT read-modify-write (documented): regions on blocks.
            cmd.args(["-a", "4096"]);
        }
        let out = cmd
            .arg(&file)
            .env("UBIO_LOG", "debug")
            .env("UBIO_LOG_FILE", &log)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{fs_name} {backend} seed {seed}: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            log.contains(&format!("loaded: backend {backend}")),
            "{fs_name} {backend}: the shim was not loaded:\n{log}"
        );
        eprintln!("{fs_name} {backend}: {}", stdout.trim());
        let _ = std::fs::remove_file(&file);
    }
}

#[test]
fn processes_under_the_shim_on_ext4() {
    processes_on("ext4");
}

#[test]
fn processes_under_the_shim_on_xfs() {
    processes_on("xfs");
}

#[test]
fn processes_under_the_shim_on_btrfs() {
    processes_on("btrfs");
}

#[test]
fn processes_under_the_shim_on_tmpfs() {
    processes_on("tmpfs");
}

/// The direct backend appending unaligned pieces (all bytes 7) while
/// another thread watches the end of the file: its last byte is never a
/// zero, as it was when the last block went out whole through O_DIRECT and
/// was trimmed back after (a process killed or a power cut in between kept
/// the file longer than anything written, with zeroes at its end).
#[test]
fn a_direct_append_never_shows_zeroes_past_its_data() {
    let fs = scratch("ext4");
    let path = fs.mount_point().join("appended");
    let f = ubio::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .backend(BackendKind::Direct)
        .open(&path)
        .unwrap();
    let watcher = std::fs::File::open(&path).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let piece = vec![7u8; 3 * 4096 + 123];
    let (looks, zeroes) = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let (mut looks, mut zeroes) = (0u64, Vec::new());
            let mut last = [0u8; 1];
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let size = watcher.metadata().unwrap().len();
                if size > 0 && watcher.read_at(&mut last, size - 1).unwrap() == 1 && last[0] == 0 {
                    zeroes.push(size);
                }
                looks += 1;
            }
            (looks, zeroes)
        });
        let mut at = 0;
        for _ in 0..2000 {
            f.write_all_at(&piece, at).unwrap();
            at += piece.len() as u64;
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        w.join().unwrap()
    });
    f.close().unwrap();
    assert!(
        zeroes.is_empty(),
        "{} of {looks} looks found a zero as the last byte, at sizes {:?}...",
        zeroes.len(),
        &zeroes[..zeroes.len().min(10)]
    );
    let got = std::fs::read(&path).unwrap();
    assert_eq!(got.len(), 2000 * piece.len());
    assert!(got.iter().all(|&b| b == 7), "the appended data");
    eprintln!("direct append: {looks} looks at the end of the file, never a zero");
}
