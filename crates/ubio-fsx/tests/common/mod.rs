//! What the exerciser's test files share: scratch filesystems.

use std::path::PathBuf;
pub use ubio_testenv::profile_dir;
use ubio_testenv::scratchfs::{FsKind, ScratchFs, ScratchOpts};

pub const MIB: u64 = 1 << 20;

/// target/ of the workspace: loop images go there (not /tmp, maybe tmpfs).
pub fn target_dir() -> PathBuf {
    profile_dir().parent().unwrap().to_path_buf()
}

/// A scratch filesystem of `name` (ext4, xfs, btrfs or tmpfs).
pub fn scratch(name: &str) -> ScratchFs {
    let fs = if name == "tmpfs" {
        ScratchFs::tmpfs(256 * MIB)
    } else {
        let kind: FsKind = name.parse().unwrap();
        ScratchFs::create(
            kind,
            (256 * MIB).max(kind.min_size_bytes()),
            &ScratchOpts::default()
                .backing_dir(target_dir())
                .direct_io(true),
        )
    };
    fs.unwrap_or_else(|e| panic!("cannot make a scratch {name}: {e}"))
}
