//! What the guest programs share (`ubio-powercut`, `ubio-diskfault`, run in
//! the QEMU guest of scripts/guest/run.sh, as root, with device-mapper):
//! the system's tools (losetup, dmsetup, mkfs, mount, the checkers) run as
//! commands whose failure is an error with their output, loop and
//! device-mapper devices removed when dropped, and the data pattern.

use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use ubio_testenv::rng::SplitMix64;

/// Run `cmd`; its standard output (trimmed), or an error with its status
/// and output.
pub fn run(cmd: &mut Command) -> io::Result<String> {
    run_with_input(cmd, None)
}

/// [`run`], with `input` on its standard input.
pub fn run_with_input(cmd: &mut Command, input: Option<&str>) -> io::Result<String> {
    let what = format!("{cmd:?}");
    let fail = |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(fail)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(fail)?;
    }
    let out = child.wait_with_output().map_err(fail)?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{what}: {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn sh(cmd: &str, args: &[&str]) -> io::Result<String> {
    run(Command::new(cmd).args(args))
}

/// `len` bytes of seeded data with no even byte: a zero (a hole, an
/// unwritten extent) read back is then never the data's own.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = SplitMix64::new(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    out.truncate(len);
    for b in &mut out {
        *b |= 1;
    }
    out
}

/// The size a test filesystem gets (mkfs.xfs wants 300 MiB at least).
pub fn fs_bytes(fs: &str) -> u64 {
    if fs == "xfs" {
        320 << 20
    } else {
        256 << 20
    }
}

pub fn mkfs(fs: &str, dev: &str) -> io::Result<()> {
    match fs {
        "ext4" => sh("mkfs.ext4", &["-q", "-F", "-b", "4096", dev]),
        "xfs" => sh("mkfs.xfs", &["-q", "-f", dev]),
        "btrfs" => sh("mkfs.btrfs", &["-q", "-f", dev]),
        "f2fs" => sh("mkfs.f2fs", &["-q", "-f", dev]),
        _ => Err(io::Error::other(format!("unknown filesystem {fs}"))),
    }
    .map(drop)
}

pub fn mount(fs: &str, dev: &str, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    sh("mount", &["-t", fs, dev, &dir.to_string_lossy()]).map(drop)
}

pub fn umount(dir: &Path) -> io::Result<()> {
    sh("umount", &[&dir.to_string_lossy()]).map(drop)
}

/// The filesystem's own checker, read-only; an error with its output if it
/// finds anything.
pub fn check_fs(fs: &str, dev: &str) -> io::Result<()> {
    match fs {
        "ext4" => sh("e2fsck", &["-fn", dev]),
        "xfs" => sh("xfs_repair", &["-n", dev]),
        "btrfs" => sh("btrfs", &["check", "--readonly", dev]),
        "f2fs" => sh("fsck.f2fs", &["-f", "--dry-run", dev]),
        _ => Err(io::Error::other(format!("unknown filesystem {fs}"))),
    }
    .map(drop)
}

/// A loop device over a file, detached when dropped.
pub struct Loop(pub String);

impl Loop {
    pub fn attach(file: &Path) -> io::Result<Loop> {
        sh("losetup", &["-f", "--show", &file.to_string_lossy()]).map(Loop)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = sh("losetup", &["-d", &self.0]);
    }
}

/// A device-mapper device, removed when dropped.
pub struct Dm {
    pub name: String,
}

impl Dm {
    pub fn create(name: &str, table: &str) -> io::Result<Dm> {
        sh("dmsetup", &["create", name, "--table", table])?;
        let _ = sh("dmsetup", &["mknodes", name]);
        Ok(Dm { name: name.into() })
    }

    pub fn path(&self) -> String {
        format!("/dev/mapper/{}", self.name)
    }

    /// Swap the table (one line per target) under a mounted filesystem:
    /// load, suspend without freezing it (a freeze would write back its
    /// dirty pages first), resume.
    pub fn swap(&self, table: &str) -> io::Result<()> {
        run_with_input(
            Command::new("dmsetup").args(["load", &self.name]),
            Some(table),
        )?;
        sh("dmsetup", &["suspend", "--nolockfs", &self.name])?;
        sh("dmsetup", &["resume", &self.name]).map(drop)
    }
}

impl Drop for Dm {
    fn drop(&mut self) {
        let _ = sh("dmsetup", &["remove", &self.name]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_never_holds_zero() {
        let p = pattern(3, 1 << 16);
        assert!(p.iter().all(|&b| b != 0));
        assert_eq!(p, pattern(3, 1 << 16));
    }
}
