//! The mount table as this process sees it (/proc/self/mountinfo).

use crate::overlay::unescape_mountinfo;
use std::io;
use std::path::PathBuf;

/// One line of /proc/self/mountinfo:
/// `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SOURCE SUPEROPTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub id: u64,
    /// `st_dev` of the filesystem, as MAJ:MIN.
    pub dev: (u32, u32),
    /// The directory of the filesystem that is mounted here.
    pub root: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    pub super_opts: String,
}

/// Parse one mountinfo line (None if it is not one).
pub fn parse_line(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split(' ').collect();
    let mut right = right.split(' ');
    let (major, minor) = left.get(2)?.split_once(':')?;
    Some(Mount {
        id: left.first()?.parse().ok()?,
        dev: (major.parse().ok()?, minor.parse().ok()?),
        root: unescape_mountinfo(left.get(3)?),
        mount_point: PathBuf::from(unescape_mountinfo(left.get(4)?)),
        fstype: right.next()?.to_owned(),
        source: unescape_mountinfo(right.next().unwrap_or("")),
        super_opts: right.next().unwrap_or("").to_owned(),
    })
}

/// Every mount of this process's mount namespace, in mount order.
pub fn mounts() -> io::Result<Vec<Mount>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| io::Error::new(e.kind(), format!("read /proc/self/mountinfo: {e}")))?;
    Ok(text.lines().filter_map(parse_line).collect())
}

/// Filesystems that hold no file data of their own on a device or server:
/// kernel interfaces, and memory (tmpfs, ramfs: there the page cache *is*
/// the file, which ubio leaves alone).
pub fn holds_no_file_data(fstype: &str) -> bool {
    matches!(
        fstype,
        "proc"
            | "sysfs"
            | "cgroup"
            | "cgroup2"
            | "tmpfs"
            | "ramfs"
            | "devtmpfs"
            | "devpts"
            | "mqueue"
            | "debugfs"
            | "tracefs"
            | "securityfs"
            | "pstore"
            | "bpf"
            | "configfs"
            | "fusectl"
            | "hugetlbfs"
            | "autofs"
            | "binfmt_misc"
            | "efivarfs"
            | "nsfs"
            | "rpc_pipefs"
            | "selinuxfs"
            | "nfsd"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_parsed() {
        let m = parse_line(
            "36 35 98:0 /mnt1 /mnt\\0402 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
        )
        .unwrap();
        assert_eq!(m.id, 36);
        assert_eq!(m.dev, (98, 0));
        assert_eq!(m.root, "/mnt1");
        assert_eq!(m.mount_point, PathBuf::from("/mnt 2"));
        assert_eq!(m.fstype, "ext3");
        assert_eq!(m.source, "/dev/root");
        assert_eq!(m.super_opts, "rw,errors=continue");
        assert!(parse_line("garbage").is_none());
        assert!(mounts()
            .unwrap()
            .iter()
            .any(|m| m.mount_point.as_os_str() == "/"));
    }
}
