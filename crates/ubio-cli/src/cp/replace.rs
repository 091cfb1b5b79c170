//! A destination replaced by a link, a symlink or a special file, in one step: the
//! new one is made at a fresh name beside it and renamed over it, so that
//! the name holds the old file until the new one is in place. A link that
//! cannot be made (another filesystem, a full link count, no inode left)
//! leaves the old file where it was, as GNU cp's -f does for -l and -s
//! (it links to a temporary name in the same directory, then renames).
//! --remove-destination still removes first: that is what it asks for.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Make `dst` with `make`, which fails with EEXIST where its name is taken
/// (link, symlink, mknod). `replace`: an existing `dst` may be replaced,
/// which happens by a rename of what `make` made beside it. An error is
/// `make`'s (or the rename's): `dst` is then as it was.
pub fn make_over(
    dst: &Path,
    replace: bool,
    make: impl Fn(&Path) -> io::Result<()>,
) -> io::Result<()> {
    match make(dst) {
        Err(e) if replace && e.raw_os_error() == Some(libc::EEXIST) => {}
        made => return made,
    }
    let temp = make_beside(dst, &make)?;
    // rename(2) of one name of a file onto another of the same file does
    // nothing and leaves both: `dst` already is what was asked for.
    let same = match (temp.symlink_metadata(), dst.symlink_metadata()) {
        (Ok(t), Ok(d)) => (t.dev(), t.ino()) == (d.dev(), d.ino()),
        _ => false,
    };
    let renamed = if same {
        Ok(())
    } else {
        std::fs::rename(&temp, dst)
    };
    if same || renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}

/// How many fresh names are tried before giving up (each taken one means
/// another process made that very name meanwhile).
const TRIES: usize = 100;

/// `make` at an unused name in `dst`'s directory: `make` itself fails on a
/// name that is taken, so no existing file is ever touched.
fn make_beside(dst: &Path, make: impl Fn(&Path) -> io::Result<()>) -> io::Result<PathBuf> {
    let mut last = io::Error::from_raw_os_error(libc::EEXIST);
    for _ in 0..TRIES {
        let temp = dst.with_file_name(temp_name());
        match make(&temp) {
            Ok(()) => return Ok(temp),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// `ubio-cp.` and 12 random letters and digits: short, so that it fits
/// where the destination's own name is as long as a name may be.
fn temp_name() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    // std's hasher keys are random per process and per RandomState: a
    // random word without a crate for it.
    let mut word = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let mut name = String::from("ubio-cp.");
    for _ in 0..12 {
        name.push(CHARS[(word % CHARS.len() as u64) as usize] as char);
        word /= CHARS.len() as u64;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_make_leaves_the_destination_and_no_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("dst");
        std::fs::write(&dst, b"old").unwrap();
        let e = make_over(&dst, true, |p| {
            if p == dst {
                Err(io::Error::from_raw_os_error(libc::EEXIST))
            } else {
                Err(io::Error::from_raw_os_error(libc::EXDEV))
            }
        })
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
        assert_eq!(std::fs::read(&dst).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_replaces_the_destination_and_a_link_to_itself_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
        std::fs::write(&src, b"new").unwrap();
        std::fs::write(&dst, b"old").unwrap();
        make_over(&dst, true, |p| std::os::unix::fs::symlink(&src, p)).unwrap();
        assert_eq!(std::fs::read_link(&dst).unwrap(), src);
        // Not allowed to replace: EEXIST as it came.
        let e = make_over(&dst, false, |p| std::fs::hard_link(&src, p)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
        // dst a hard link of src already: the rename would do nothing.
        std::fs::remove_file(&dst).unwrap();
        std::fs::hard_link(&src, &dst).unwrap();
        make_over(&dst, true, |p| std::fs::hard_link(&src, p)).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn temporary_names_differ() {
        let names: std::collections::HashSet<String> = (0..1000).map(|_| temp_name()).collect();
        assert_eq!(names.len(), 1000);
        assert!(names.iter().all(|n| n.len() == 20));
    }
}
