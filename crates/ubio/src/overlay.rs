//! The real file behind an overlayfs descriptor.
//!
//! Reads and writes through an overlay go to the real upper or lower file
//! and fill *its* page cache, but cachestat() and sync_file_range() on the
//! overlay descriptor act on the overlay inode's own mapping, which stays
//! empty (fs/overlayfs/file.c forwards read_iter, write_iter, fsync,
//! fadvise and mmap to the real file; sync_file_range and cachestat use
//! `file->f_mapping` of the overlay file itself). So ubio finds the real
//! file, from the mount's `upperdir`/`lowerdir` options in
//! /proc/self/mountinfo and the descriptor's path under the mount, and
//! manages that file's pages.
//!
//! A lower file is copied up when someone opens it for writing; reads
//! through a descriptor opened before then go to the new upper file from
//! the next call on (measured on 6.18). [`RealFile::current`] notices the
//! upper appearing and switches to it.

use crate::sys;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which layer holds the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Upper,
    Lower,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layer::Upper => "upper",
            Layer::Lower => "lower",
        })
    }
}

/// Where a file of an overlay mount really lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The path of the file below the overlay's root.
    pub relative: PathBuf,
    pub upperdir: Option<PathBuf>,
    /// Top layer first.
    pub lowerdirs: Vec<PathBuf>,
}

impl Location {
    /// The real file: the upper one if it exists, else the first lower
    /// layer that has the file (a file visible through the overlay has no
    /// whiteout above it).
    pub fn resolve(&self) -> Option<(PathBuf, Layer)> {
        let is_file = |p: &Path| p.metadata().is_ok_and(|m| m.is_file());
        if let Some(up) = &self.upperdir {
            let p = up.join(&self.relative);
            if is_file(&p) {
                return Some((p, Layer::Upper));
            }
        }
        self.lowerdirs
            .iter()
            .map(|l| l.join(&self.relative))
            .find(|p| is_file(p))
            .map(|p| (p, Layer::Lower))
    }
}

/// Find where the file behind the overlay descriptor `fd` lives. An error
/// says why it cannot be found (the layers are not visible in this mount
/// namespace, as inside a container, or the file was unlinked).
pub fn locate(fd: BorrowedFd<'_>) -> io::Result<Location> {
    let raw = fd.as_raw_fd();
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{raw}"))?;
    let mnt_id = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .map(str::trim)
        .ok_or_else(|| io::Error::other("no mnt_id in /proc/self/fdinfo"))?
        .to_string();
    let path = std::fs::read_link(format!("/proc/self/fd/{raw}"))?;
    if path.to_string_lossy().ends_with(" (deleted)") {
        return Err(io::Error::other("the file was unlinked"));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').next() == Some(mnt_id.as_str()))
        .ok_or_else(|| io::Error::other(format!("mount {mnt_id} not in /proc/self/mountinfo")))?;
    parse_mountinfo_line(line, &path)
}

/// The location of `path` from the overlay's line of /proc/self/mountinfo:
/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SOURCE SUPEROPTS`.
fn parse_mountinfo_line(line: &str, path: &Path) -> io::Result<Location> {
    let fields: Vec<&str> = line.split(' ').collect();
    let bad = || io::Error::other(format!("unexpected mountinfo line: {line}"));
    let dash = fields.iter().position(|f| *f == "-").ok_or_else(bad)?;
    let (root, mount_point) = (
        unescape_mountinfo(fields.get(3).ok_or_else(bad)?),
        unescape_mountinfo(fields.get(4).ok_or_else(bad)?),
    );
    if fields.get(dash + 1) != Some(&"overlay") {
        return Err(io::Error::other("not an overlay mount"));
    }
    let opts = fields.get(dash + 3).ok_or_else(bad)?;
    let (mut upperdir, mut lowerdirs) = (None, Vec::new());
    // Values are escaped with octal (\054 for a comma), so splitting on
    // commas and colons is safe (fs/overlayfs/params.c: ovl_show_options).
    for opt in opts.split(',') {
        if let Some(v) = opt.strip_prefix("upperdir=") {
            upperdir = Some(PathBuf::from(unescape_mountinfo(v)));
        } else if let Some(v) = opt.strip_prefix("lowerdir=") {
            // "::" separates data-only layers, which hold no visible files.
            let visible = v.split("::").next().unwrap_or(v);
            lowerdirs.extend(
                visible
                    .split(':')
                    .filter(|s| !s.is_empty())
                    .map(|s| PathBuf::from(unescape_mountinfo(s))),
            );
        } else if let Some(v) = opt.strip_prefix("lowerdir+=") {
            lowerdirs.push(PathBuf::from(unescape_mountinfo(v)));
        }
    }
    let under_mount = path
        .strip_prefix(&mount_point)
        .map_err(|_| io::Error::other(format!("{} is not under {mount_point}", path.display())))?;
    let relative = Path::new(&root)
        .strip_prefix("/")
        .unwrap_or(Path::new(""))
        .join(under_mount);
    if upperdir.is_none() && lowerdirs.is_empty() {
        return Err(io::Error::other(
            "no upperdir or lowerdir in the mount options",
        ));
    }
    Ok(Location {
        relative,
        upperdir,
        lowerdirs,
    })
}

/// Undo /proc/self/mountinfo's octal escapes (`\040` for a space, and so
/// on for tab, newline, backslash and, in overlay options, comma and colon).
pub fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How often a stream on a lower file looks for its copy-up.
const COPY_UP_CHECK: Duration = Duration::from_millis(50);

/// The real file of an overlay stream, kept open for cachestat(),
/// sync_file_range() and fadvise().
#[derive(Debug)]
pub struct RealFile {
    location: Location,
    path: PathBuf,
    layer: Layer,
    file: Arc<File>,
    checked: Instant,
}

impl RealFile {
    /// Find and open the real file behind the overlay descriptor `fd`.
    pub fn open(fd: BorrowedFd<'_>) -> io::Result<RealFile> {
        let location = locate(fd)?;
        let (path, layer) = location.resolve().ok_or_else(|| {
            io::Error::other(format!(
                "{} is in none of the layers (upper {:?}, lower {:?}) visible here",
                location.relative.display(),
                location.upperdir,
                location.lowerdirs
            ))
        })?;
        let file = open_real(&path)?;
        Ok(RealFile {
            location,
            path,
            layer,
            file: Arc::new(file),
            checked: Instant::now(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn layer(&self) -> Layer {
        self.layer
    }

    /// The real file as it was last opened (see [`RealFile::current`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The real file now, and whether it changed since the last call (a
    /// lower file was copied up: the caller starts over on the new one).
    pub fn current(&mut self) -> (Arc<File>, bool) {
        let mut changed = false;
        if self.layer == Layer::Lower
            && self.location.upperdir.is_some()
            && self.checked.elapsed() >= COPY_UP_CHECK
        {
            self.checked = Instant::now();
            if let Some((path, Layer::Upper)) = self.location.resolve() {
                match open_real(&path) {
                    Ok(f) => {
                        log::debug!(
                            "overlay: {} was copied up to {}",
                            self.path.display(),
                            path.display()
                        );
                        self.file = Arc::new(f);
                        self.path = path;
                        self.layer = Layer::Upper;
                        changed = true;
                    }
                    Err(e) => log::debug!("overlay: open {}: {e}", path.display()),
                }
            }
        }
        (self.file.clone(), changed)
    }
}

/// Open the real file read-only (cachestat, fadvise and sync_file_range
/// need no more), checking that it is the same kind of file.
fn open_real(path: &Path) -> io::Result<File> {
    let f = File::open(path)?;
    if sys::fstat(f.as_fd())?.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_of_an_overlay_gives_the_layers_and_the_relative_path() {
        let line = "44 27 0:39 / /tmp/o\\040m rw,relatime - overlay overlay \
                    rw,lowerdir=/l1:/l\\0542::/data,upperdir=/up,workdir=/w,uuid=on";
        let loc = parse_mountinfo_line(line, Path::new("/tmp/o m/d/f")).unwrap();
        assert_eq!(loc.relative, Path::new("d/f"));
        assert_eq!(loc.upperdir.as_deref(), Some(Path::new("/up")));
        assert_eq!(
            loc.lowerdirs,
            vec![PathBuf::from("/l1"), PathBuf::from("/l,2")]
        );
        let bind = "45 27 0:39 /sub /b rw - overlay overlay rw,lowerdir+=/a,lowerdir+=/b";
        let loc = parse_mountinfo_line(bind, Path::new("/b/f")).unwrap();
        assert_eq!(loc.relative, Path::new("sub/f"));
        assert_eq!(loc.upperdir, None);
        assert_eq!(loc.lowerdirs.len(), 2);
        assert!(
            parse_mountinfo_line("1 2 0:3 / /x rw - ext4 /dev/x rw", Path::new("/x/f")).is_err()
        );
    }
}
