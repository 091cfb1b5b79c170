//! What the exerciser's test files share: scratch filesystems, the
//! workspace's `ubio` and the C programs in c/, compiled.
// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
pub use ubio_testenv::profile_dir;
use ubio_testenv::scratchfs::{FsKind, ScratchFs, ScratchOpts};

pub const MIB: u64 = 1 << 20;

/// target/ of the workspace: loop images go there (not /tmp, maybe tmpfs).
pub fn target_dir() -> PathBuf {
    profile_dir().parent().unwrap().to_path_buf()
}

/// A scratch filesystem of `name` (ext4, xfs, btrfs or tmpfs), on a loop
/// device over a file in target/ (with UBIO_FSX_SCRATCH_SHM=1 in
/// /dev/shm: a device as fast as memory, for the long soaks of
/// scripts/integrity.sh, whose fsyncs would otherwise wait on the disk).
pub fn scratch(name: &str) -> ScratchFs {
    let in_shm = std::env::var_os("UBIO_FSX_SCRATCH_SHM").is_some_and(|v| v == "1");
    let fs = if name == "tmpfs" {
        ScratchFs::tmpfs(256 * MIB)
    } else {
        let kind: FsKind = name.parse().unwrap();
        let opts = match in_shm {
            true => ScratchOpts::in_shm(),
            false => ScratchOpts::default()
                .backing_dir(target_dir())
                .direct_io(true),
        };
        ScratchFs::create(kind, (256 * MIB).max(kind.min_size_bytes()), &opts)
    };
    fs.unwrap_or_else(|e| panic!("cannot make a scratch {name}: {e}"))
}

/// The workspace's `ubio`, with libubio_preload.so beside it (`ubio run`).
pub fn ubio_bin() -> PathBuf {
    let p = profile_dir().join("ubio");
    assert!(
        p.is_file() && profile_dir().join("libubio_preload.so").is_file(),
        "{} or libubio_preload.so missing: build the workspace first (cargo build --release)",
        p.display()
    );
    p
}

/// c/NAME.c compiled with `cc`, warnings as errors, into target/<profile>/fsx-c/NAME.
/// Built under a name of our own, then renamed over the one binary every
/// run uses: nothing piles up, and a concurrent run never executes a
/// half-written file.
pub fn compile_c(name: &str) -> PathBuf {
    let dir = profile_dir().join("fsx-c");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join(name);
    let building = dir.join(format!("{name}.{}", std::process::id()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("c/{name}.c"));
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&building)
        .arg(&src)
        .output()
        .expect("cc (gcc comes from scripts/install-deps.sh)");
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&building, &bin).unwrap();
    bin
}
