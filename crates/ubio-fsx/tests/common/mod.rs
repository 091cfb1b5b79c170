//! What the exerciser's test files share: scratch filesystems.

use std::path::PathBuf;
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
