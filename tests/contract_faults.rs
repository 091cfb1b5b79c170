//! Cases 7 and 8 of the library issue: files the caller cannot write, and
//! errors (ENOSPC, EIO from writeback) that must reach the caller while data
//! flushed before the fault stays intact.

mod common;

use common::*;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use ubio::BackendKind;
use ubio_bench::kept_pages::{check_kept, with_damon_retries};
use ubio_bench::scratchfs::ScratchFs;

const NOBODY: u32 = 65534;
const CHILD_ENV: &str = "UBIO_TEST_READ_AS_NOBODY";

/// The child half of `unwritable_file_keeps_others_pages`: runs as nobody,
/// reads the file through ubio, prints its statistics.
fn child_read(path: &Path, backend: BackendKind) {
    let mut f = ubio::OpenOptions::new()
        .read(true)
        .backend(backend)
        .open(path)
        .unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut want = vec![0u8; MIB as usize];
    let mut off = 0;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        fill_pattern(7, off, &mut want[..n]);
        assert!(buf[..n] == want[..n], "data differs at {off}");
        off += n as u64;
    }
    let stats = f.close().unwrap();
    println!("STATS {}", serde_json::to_string(&stats).unwrap());
}

/// Case 7: for a file the caller cannot write, cachestat() says EPERM and
/// mincore() reports every page resident, so nothing tells others' pages
/// from ours: nothing cached by others is dropped, and the stats say why.
#[test]
fn unwritable_file_keeps_others_pages() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (backend, path) = spec.split_once(':').unwrap();
        return child_read(Path::new(path), backend.parse().unwrap());
    }
    if !ubio_bench::is_root() {
        return skip(
            "unwritable_file_keeps_others_pages",
            "needs root to run a reader as another user",
        );
    }
    for t in targets("unwritable", GIB) {
        std::fs::set_permissions(&t.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = t.path("not-yours");
        make_cold_file(&path, 7, 128 * MIB);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        for backend in [
            BackendKind::Auto,
            BackendKind::Emulated,
            BackendKind::Kernel,
        ] {
            with_damon_retries(&format!("{} {backend} unwritable", t.name), || {
                evict(&path);
                precache(&path, 40 * MIB, 8 * MIB);
                let before = cached_pages(&path);
                let out = std::process::Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        "unwritable_file_keeps_others_pages",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env(CHILD_ENV, format!("{backend}:{}", path.display()))
                    .uid(NOBODY)
                    .gid(NOBODY)
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                if !out.status.success() && stderr.contains("cannot run on this") {
                    eprintln!("{} {backend}: refused for nobody as for root", t.name);
                    return Ok(());
                }
                assert!(
                    out.status.success(),
                    "{} {backend}: child failed:\n{stdout}\n{stderr}",
                    t.name
                );
                let line = stdout
                    .lines()
                    .find_map(|l| l.split_once("STATS ").map(|(_, s)| s))
                    .unwrap_or_else(|| panic!("child printed no stats:\n{stdout}\n{stderr}"));
                let stats: serde_json::Value = serde_json::from_str(line).unwrap();
                let kept = resident_in(&path, 40 * MIB, 8 * MIB);
                eprintln!(
                    "{} {backend}: kept {kept} of 2048, {} cached after ({before} before); {stats}",
                    t.name,
                    cached_pages(&path)
                );
                check_kept(&path, 40 * MIB, 8 * MIB)?;
                if !t.pages_are_storage() {
                    let why = stats["residency_unknown"].as_str().unwrap_or_default();
                    // Before Linux 6.5 (the guest) cachestat() is missing for
                    // everyone: ENOSYS (os error 38) instead of EPERM.
                    let cause = if guest_mode() && why.contains("os error 38") {
                        "os error 38"
                    } else {
                        "EPERM"
                    };
                    assert!(
                        why.contains(cause) && why.contains("mincore"),
                        "{} {backend}: stats must say why: {stats}",
                        t.name
                    );
                    assert_eq!(stats["pages_dropped"], 0, "{} {backend}", t.name);
                }
                Ok(())
            });
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// Write until an error comes back from write, flush or close; returns it
/// and how much was written before it.
fn write_until_error(f: ubio::File, limit: u64, seed: u64, from: u64) -> (io::Error, u64) {
    let mut f = f;
    let mut buf = vec![0u8; MIB as usize];
    let mut off = from;
    while off < limit {
        fill_pattern(seed, off, &mut buf);
        if let Err(e) = f.write_all(&buf) {
            drop(f);
            return (e, off);
        }
        off += MIB;
    }
    if let Err(e) = f.flush() {
        drop(f);
        return (e, off);
    }
    match f.close() {
        Err(e) => (e, off),
        Ok(stats) => panic!("no error after writing {off} bytes: {stats:?}"),
    }
}

/// The first `len` bytes of the file equal the pattern (read cold).
fn verify_prefix(path: &Path, seed: u64, len: u64) {
    evict(path);
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; len as usize];
    f.read_exact(&mut buf).unwrap();
    let mut want = vec![0u8; len as usize];
    fill_pattern(seed, 0, &mut want);
    assert!(
        buf == want,
        "{}: data flushed before the fault changed",
        path.display()
    );
}

fn fault_backends() -> [BackendKind; 4] {
    [
        BackendKind::Auto,
        BackendKind::Kernel,
        BackendKind::Emulated,
        BackendKind::Direct,
    ]
}

/// Create `path` with `backend` (None if refused there), write and flush
/// 16 MiB of the pattern, and leave the stream position after it.
fn open_with_flushed_prefix(path: &Path, backend: BackendKind, seed: u64) -> Option<ubio::File> {
    let mut f = match ubio::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .backend(backend)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::Unsupported => return None,
        Err(e) => panic!("{e}"),
    };
    let mut buf = vec![0u8; MIB as usize];
    for i in 0..16 {
        fill_pattern(seed, i * MIB, &mut buf);
        f.write_all(&buf).unwrap();
    }
    f.sync_all().unwrap();
    Some(f)
}

/// Case 8: ENOSPC on a small filesystem comes back from the failing write,
/// flush or close, and the data flushed before it reads back intact.
#[test]
fn enospc_reaches_the_caller() {
    for kind in fault_kinds("enospc") {
        let size = kind.min_size_bytes().max(64 * MIB);
        let fs = match ScratchFs::create(kind, size, &Default::default()) {
            Ok(fs) => fs,
            Err(e) => {
                skip(&format!("enospc/{kind}"), &e.to_string());
                continue;
            }
        };
        for backend in fault_backends() {
            let path = fs.mount_point().join(format!("fill-{backend}"));
            let Some(f) = open_with_flushed_prefix(&path, backend, 8) else {
                continue;
            };
            let (err, at) = write_until_error(f, 4 * size, 8, 16 * MIB);
            eprintln!("{kind} {backend}: error after {} MiB: {err}", at / MIB);
            assert_eq!(
                ubio::error::raw_os_error(&err),
                Some(libc::ENOSPC),
                "{kind} {backend}: {err}"
            );
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "error must name the file: {err}"
            );
            verify_prefix(&path, 8, 16 * MIB);
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// Case 8: EIO from writeback (the device starts failing writes) comes back
/// from the next write, flush or close; data flushed before reads back.
#[test]
fn writeback_eio_reaches_the_caller() {
    for kind in fault_kinds("eio") {
        for backend in fault_backends() {
            // A fresh filesystem per backend: one that saw EIO may shut down.
            let fs = match ScratchFs::create_eio(kind, kind.min_size_bytes().max(256 * MIB)) {
                Ok(fs) => fs,
                Err(e) => {
                    skip(&format!("eio/{kind}"), &e.to_string());
                    break;
                }
            };
            let path = fs.mount_point().join(format!("eio-{backend}"));
            let Some(f) = open_with_flushed_prefix(&path, backend, 9) else {
                continue;
            };
            fs.fail_writes().unwrap();
            let (err, at) = write_until_error(f, 128 * MIB, 9, 16 * MIB);
            eprintln!("{kind} {backend}: error after {} MiB: {err}", at / MIB);
            let errno = ubio::error::raw_os_error(&err);
            assert!(
                matches!(errno, Some(libc::EIO) | Some(libc::EROFS)),
                "{kind} {backend}: {err}"
            );
            verify_prefix(&path, 9, 16 * MIB);
        }
    }
}
