//! The filesystems a scratch filesystem can be, and how each is made (mkfs).

use super::*;

/// Below this size btrfs is made in mixed mode (`mkfs.btrfs -M`): the normal
/// layout needs 109 MiB with btrfs-progs 6.2; the margin covers other versions.
pub const BTRFS_MIXED_BELOW: u64 = 128 * MIB;

/// A filesystem that [`ScratchFs::create`] can make on a loop device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
    /// Not in [`FsKind::ALL`]: this machine's kernel has no f2fs; the test
    /// guest of scripts/guest/run.sh (Debian's 6.1 kernel) makes it.
    F2fs,
}

impl FsKind {
    /// Every kind, for tests that cover them all.
    pub const ALL: [FsKind; 3] = [FsKind::Ext4, FsKind::Xfs, FsKind::Btrfs];

    /// The type name given to `mount -t` (and shown in /proc/mounts).
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
            FsKind::F2fs => "f2fs",
        }
    }

    /// The mkfs program for this kind.
    pub fn mkfs_tool(self) -> &'static str {
        match self {
            FsKind::Ext4 => "mkfs.ext4",
            FsKind::Xfs => "mkfs.xfs",
            FsKind::Btrfs => "mkfs.btrfs",
            FsKind::F2fs => "mkfs.f2fs",
        }
    }

    /// The smallest size [`ScratchFs::create`] accepts (see the module docs).
    pub fn min_size_bytes(self) -> u64 {
        match self {
            FsKind::Ext4 => 8 * MIB,
            FsKind::Xfs => 300 * MIB,
            FsKind::Btrfs => 16 * MIB,
            FsKind::F2fs => 128 * MIB,
        }
    }

    /// Why the minimum is what it is, for the error message.
    pub(super) fn min_size_reason(self) -> &'static str {
        match self {
            FsKind::Ext4 => "mkfs.ext4 makes no journal below that",
            FsKind::Xfs => "mkfs.xfs refuses smaller filesystems",
            FsKind::Btrfs => "mkfs.btrfs refuses smaller ones even in mixed mode",
            FsKind::F2fs => "mkfs.f2fs 1.15 refuses 40 MiB, and at 64 MiB its over-provisioning (35%) leaves too little for data",
        }
    }
}

impl fmt::Display for FsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FsKind {
    type Err = io::Error;
    fn from_str(s: &str) -> io::Result<FsKind> {
        match s {
            "ext4" => Ok(FsKind::Ext4),
            "xfs" => Ok(FsKind::Xfs),
            "btrfs" => Ok(FsKind::Btrfs),
            "f2fs" => Ok(FsKind::F2fs),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown filesystem kind {s:?}: expected ext4, xfs, btrfs or f2fs"),
            )),
        }
    }
}

/// Runs `mkfs` (the tool of `kind`) on `dev`, with this module's options
/// for the kind and `opts`' own.
pub(super) fn make_fs(
    mkfs: &Path,
    kind: FsKind,
    size_bytes: u64,
    opts: &ScratchOpts,
    dev: &Path,
) -> io::Result<()> {
    let mut args: Vec<&OsStr> = Vec::new();
    match kind {
        // 4 KiB blocks always: below 512 MiB mke2fs would pick 1 KiB
        // ("small" type), unlike any real filesystem ubio will meet.
        FsKind::Ext4 => args.extend(
            [
                "-q",
                "-F",
                "-b",
                "4096",
                "-E",
                "lazy_itable_init=1,lazy_journal_init=1",
            ]
            .map(OsStr::new),
        ),
        FsKind::Xfs => args.extend(["-q", "-f"].map(OsStr::new)),
        FsKind::Btrfs => {
            args.extend(["-q", "-f"].map(OsStr::new));
            if size_bytes < BTRFS_MIXED_BELOW {
                args.push("-M".as_ref());
            }
        }
        FsKind::F2fs => args.extend(["-q", "-f"].map(OsStr::new)),
    }
    args.extend(opts.mkfs_args.iter().map(OsStr::new));
    args.push(dev.as_os_str());
    run_tool(mkfs, &args).map(drop)
}
