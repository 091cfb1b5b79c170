//! What the benchmark engine's I/O modes share: the fill pattern of the
//! data, aligned buffers for O_DIRECT, and the checks that RWF_DONTCACHE
//! and O_DIRECT work on a filesystem (with errors that say what to do).

use crate::path_context;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;

/// Alignment of the `O_DIRECT` buffer, offsets and request sizes.
pub const DIRECT_ALIGN: u64 = 4096;

/// Checks, without timing anything, that RWF_DONTCACHE reads work on
/// `path` (an existing file), with the library's probe
/// ([`ubio::probe::check_dontcache`]).
pub fn check_dontcache(path: &Path) -> io::Result<()> {
    let f = File::open(path).map_err(|e| path_context(e, "open", path))?;
    let end = f
        .metadata()
        .map_err(|e| path_context(e, "stat", path))?
        .len();
    ubio::probe::check_dontcache(f.as_fd(), end).map_err(|e| dontcache_err(e, "read", path))
}

/// Checks that `path` (an existing file) can be opened with O_DIRECT
/// ([`ubio::probe::open_direct`]).
pub fn check_direct(path: &Path) -> io::Result<()> {
    let f = File::open(path).map_err(|e| path_context(e, "open", path))?;
    ubio::probe::open_direct(f.as_fd(), libc::O_RDONLY)
        .map(drop)
        .map_err(|e| direct_err(e, path))
}

/// EOPNOTSUPP from an RWF_DONTCACHE call, said plainly.
fn dontcache_err(e: io::Error, what: &str, path: &Path) -> io::Error {
    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{what} {} with RWF_DONTCACHE: not supported here ({e}); it needs Linux 6.14+ \
                 and a filesystem that has it (ext4, xfs; not btrfs, tmpfs or overlayfs): \
                 leave dontcache out of the modes or use another directory",
                path.display()
            ),
        )
    } else {
        path_context(e, &format!("{what} (RWF_DONTCACHE)"), path)
    }
}

/// EINVAL from an O_DIRECT open, said plainly.
fn direct_err(e: io::Error, path: &Path) -> io::Error {
    if e.raw_os_error() == Some(libc::EINVAL) {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "open {} with O_DIRECT: this filesystem does not support direct I/O ({e}): \
                 leave odirect out of the modes or use another directory",
                path.display()
            ),
        )
    } else {
        path_context(e, "open (O_DIRECT)", path)
    }
}

/// Every mode copies from and to the same kind of memory: the library's
/// aligned buffer, as O_DIRECT wants.
pub use ubio::AlignedBuf;

/// Fills `buf` with incompressible bytes (splitmix64), so no layer can
/// shortcut zeroes.
pub fn fill(buf: &mut [u8]) {
    let mut rng = crate::rng::SplitMix64(0x5EED);
    for chunk in buf.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why `check` says its kernel path cannot run in `dir`, or None.
    fn unsupported(check: fn(&Path) -> io::Result<()>, dir: &Path) -> Option<String> {
        let probe = dir.join("probe");
        std::fs::write(&probe, b"").unwrap();
        let r = check(&probe);
        std::fs::remove_file(&probe).unwrap();
        match r {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Some(e.to_string()),
            r => {
                r.unwrap();
                None
            }
        }
    }

    #[test]
    fn kernel_paths_work_here_or_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        for (name, check) in [
            ("dontcache", check_dontcache as fn(&Path) -> io::Result<()>),
            ("odirect", check_direct),
        ] {
            if let Some(why) = unsupported(check, dir.path()) {
                assert!(why.contains("out of the modes"), "{name}: {why}");
            }
        }
    }

    #[test]
    fn dontcache_unsupported_is_said_plainly() {
        let e = dontcache_err(
            io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            "read",
            Path::new("/x"),
        );
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(
            e.to_string().contains("RWF_DONTCACHE: not supported here"),
            "{e}"
        );
        let e = dontcache_err(
            io::Error::from_raw_os_error(libc::EIO),
            "read",
            Path::new("/x"),
        );
        assert_eq!(e.raw_os_error(), None);
        assert!(e.to_string().contains("read (RWF_DONTCACHE) /x"), "{e}");
    }

    #[test]
    fn buffers_are_aligned_and_exact() {
        for len in [1, 4096, (1 << 20) + 3] {
            let b = AlignedBuf::new(len, 4096);
            assert_eq!((b.len(), b.as_ptr() as usize % 4096), (len, 0));
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn fill_is_not_constant() {
        let mut b = vec![0u8; 4099];
        fill(&mut b);
        assert!(b.iter().filter(|&&x| x == 0).count() < 100);
        assert_ne!(b[..8], b[8..16]);
    }
}
