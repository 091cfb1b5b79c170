//! The C exerciser (c/fsx.c), compiled here with `cc`, run unmodified under
//! `ubio run --backend B` (the LD_PRELOAD shim) for every backend on ext4,
//! xfs, btrfs and tmpfs: no mismatch, and the shim's debug log proves it
//! was loaded with that backend and managed the file (or refused the
//! backend clearly where it cannot run), so a pass is never vacuous.
//!
//! Needs the workspace built (`cargo build --release`: `ubio` and
//! libubio_preload.so in target/release); scripts/test.sh does that.

mod common;

use common::{compile_c, scratch, ubio_bin, MIB};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const OPS: u64 = 3000;
const BACKENDS: [&str; 5] = ["auto", "kernel", "emulated", "direct", "buffered"];

/// c/fsx.c compiled once per test run.
fn fsx_c() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_c("fsx"))
}

/// What the shim does with `backend` on `fs`: Some(backend it manages the
/// file with), or None when it passes the file through (buffered asked
/// for; tmpfs, whose pages are its storage; kernel where RWF_DONTCACHE is
/// unsupported).
fn managed_as(backend: &str, fs: &str) -> Option<&'static str> {
    match (backend, fs) {
        ("buffered", _) | (_, "tmpfs") | ("kernel", "btrfs") => None,
        ("auto" | "emulated", _) => Some("emulated"),
        ("kernel", _) => Some("kernel"),
        ("direct", _) => Some("direct"),
        _ => unreachable!("{backend}"),
    }
}

fn c_fsx_under_shim_on(fs_name: &str) {
    let fs = scratch(fs_name);
    let mut total = 0;
    for (i, backend) in BACKENDS.into_iter().enumerate() {
        let seed = 11 + i as u64;
        let file = fs.mount_point().join(format!("cfsx-{backend}"));
        let log = fs.mount_point().join(format!("shim-{backend}-{seed}.log"));
        let out = Command::new(ubio_bin())
            .args(["run", "--backend", backend, "--"])
            .arg(fsx_c())
            .args(["-s", &seed.to_string(), "-N", &OPS.to_string()])
            .args(["-S", &(2 * MIB).to_string(), "-v", "500"])
            .arg(&file)
            .env("UBIO_LOG", "debug")
            .env("UBIO_LOG_FILE", &log)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{fs_name} {backend} seed {seed}: exit {:?}\n{stdout}\n{stderr}",
            out.status.code()
        );
        assert!(
            stdout.contains(&format!("fsx: ops {OPS} mismatches 0 seed {seed} ")),
            "{stdout}"
        );
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            log.contains(&format!("loaded: backend {backend}")),
            "{fs_name} {backend}: the shim was not loaded:\n{log}"
        );
        let path = file.display().to_string();
        match managed_as(backend, fs_name) {
            Some(chosen) => {
                // One line per finished description: this file, the
                // backend, and bytes that went through the stream.
                let written: u64 = log
                    .lines()
                    .filter(|l| l.contains(&format!("{path}: backend {chosen} ")))
                    .filter_map(|l| {
                        let w = l.split("written ").nth(1)?;
                        w.split(' ').next()?.parse::<u64>().ok()
                    })
                    .sum();
                assert!(
                    written > 0,
                    "{fs_name} {backend}: no managed writes of {path} as {chosen} in the shim log:\n{log}"
                );
            }
            None if backend == "kernel" => assert!(
                log.contains(&format!(
                    "passed through: backend 'kernel' cannot run on this {fs_name} file"
                )),
                "{fs_name} kernel: the refusal is not in the shim log:\n{log}"
            ),
            None => {}
        }
        let _ = std::fs::remove_file(&file);
        total += OPS;
        eprintln!(
            "c fsx {fs_name} {backend} seed {seed}: {}",
            stdout.trim_end()
        );
    }
    eprintln!("c fsx under the shim on {fs_name}: {total} operations, 0 mismatches");
}

#[test]
fn c_fsx_under_shim_on_ext4() {
    c_fsx_under_shim_on("ext4");
}

#[test]
fn c_fsx_under_shim_on_xfs() {
    c_fsx_under_shim_on("xfs");
}

#[test]
fn c_fsx_under_shim_on_btrfs() {
    c_fsx_under_shim_on("btrfs");
}

#[test]
fn c_fsx_under_shim_on_tmpfs() {
    c_fsx_under_shim_on("tmpfs");
}
