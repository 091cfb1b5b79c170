//! Writers made to wait by the kernel: a dirty limit per device (Linux
//! 6.2+: /sys/class/bdi/MAJ:MIN/max_bytes with strict_limit). A writer
//! faster than its device outruns any look of the engine (dd from
//! /dev/zero at 3.3 GB/s: 162 MiB dirty + writeback against the 64 MiB
//! bound); only the kernel's dirty throttling can hold it, and with a
//! strict limit on the device it holds every writer of that device near
//! the limit (48 MiB peak in the same run, dd at half its speed).
//!
//! It is machine-wide for the device: every writer to it waits for its
//! writeback past the limit, whether the policy manages it or not. So it
//! is an opt-in the operator sets (`device_dirty_limit` in `[daemon]`,
//! `ubio run --device-dirty-limit`), and what was there before is put
//! back when [`DeviceLimit`] is dropped (a process killed with SIGKILL
//! leaves the limit until the next boot or `echo 100 > max_ratio`).

use std::path::{Path, PathBuf};

/// A device's dirty limit, set while this lives.
#[derive(Debug)]
pub struct DeviceLimit {
    /// /sys/class/bdi/MAJ:MIN.
    dir: PathBuf,
    /// What was there: max_ratio_fine (millionths of the dirty limit) and
    /// strict_limit.
    saved_ratio_fine: String,
    saved_strict: String,
    pub bytes: u64,
}

impl DeviceLimit {
    /// Limit the dirty + writeback pages of the device that holds the
    /// filesystem of `st_dev` to `bytes`, strictly. The error says why it
    /// cannot (no such knob before Linux 6.2, no block device behind the
    /// filesystem, not root).
    pub fn set(st_dev: u64, bytes: u64) -> Result<DeviceLimit, String> {
        let dir = bdi_of(st_dev)?;
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .map(|s| s.trim().to_string())
                .map_err(|e| {
                    format!(
                        "read {}/{f}: {e} (a dirty limit per device needs Linux 6.2)",
                        dir.display()
                    )
                })
        };
        let saved_ratio_fine = read("max_ratio_fine")?;
        let saved_strict = read("strict_limit")?;
        let me = DeviceLimit {
            dir,
            saved_ratio_fine,
            saved_strict,
            bytes,
        };
        me.write("max_bytes", &bytes.to_string())?;
        me.write("strict_limit", "1")?;
        Ok(me)
    }

    /// The device's bdi directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, f: &str, v: &str) -> Result<(), String> {
        let p = self.dir.join(f);
        std::fs::write(&p, v).map_err(|e| format!("write {v} to {}: {e}", p.display()))
    }
}

impl Drop for DeviceLimit {
    fn drop(&mut self) {
        // max_bytes is kept as a ratio of the dirty limit: put the ratio back.
        for (f, v) in [
            ("strict_limit", self.saved_strict.clone()),
            ("max_ratio_fine", self.saved_ratio_fine.clone()),
        ] {
            if let Err(e) = self.write(f, &v) {
                log::warn!("{e}");
            }
        }
    }
}

/// Strict dirty limits of `bytes` on the devices of `paths` (one per
/// device), and a line per device (or why not) for the log.
pub fn limit_devices(
    paths: impl IntoIterator<Item = PathBuf>,
    bytes: u64,
) -> (Vec<DeviceLimit>, Vec<String>) {
    use std::os::unix::fs::MetadataExt;
    let (mut limits, mut lines): (Vec<DeviceLimit>, Vec<String>) = (Vec::new(), Vec::new());
    for p in paths {
        let Ok(dev) = std::fs::metadata(&p).map(|m| m.dev()) else {
            continue;
        };
        // A device of several filesystems (partitions of a disk) once.
        if bdi_of(dev).is_ok_and(|dir| limits.iter().any(|l| l.dir == dir)) {
            continue;
        }
        match DeviceLimit::set(dev, bytes) {
            Ok(l) => {
                lines.push(format!(
                    "{} ({}): every writer's dirty + writeback held at {} (a device dirty limit)",
                    l.dir.display(),
                    p.display(),
                    ubio::size::human(bytes)
                ));
                limits.push(l);
            }
            Err(why) => lines.push(format!("no device dirty limit for {}: {why}", p.display())),
        }
    }
    (limits, lines)
}

/// The mount points of every filesystem that holds file data.
pub fn data_filesystems() -> Vec<PathBuf> {
    ubio::mounts::mounts()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| !ubio::mounts::holds_no_file_data(&m.fstype))
        .map(|m| m.mount_point)
        .collect()
}

/// The bdi of the block device behind `st_dev`: the device's own, or for a
/// partition its disk's.
pub fn bdi_of(st_dev: u64) -> Result<PathBuf, String> {
    let (major, minor) = (libc::major(st_dev), libc::minor(st_dev));
    let own = PathBuf::from(format!("/sys/class/bdi/{major}:{minor}"));
    if own.is_dir() {
        return Ok(own);
    }
    // A partition: /sys/dev/block/MAJ:MIN is .../vda/vda1; the disk's dev
    // file names its MAJ:MIN.
    let part = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let disk = std::fs::read_to_string(part.join("../dev"))
        .map(|s| s.trim().to_string())
        .map_err(|_| format!("device {major}:{minor} is no block device (a filesystem without one: tmpfs, nfs, btrfs over several)"))?;
    let dir = PathBuf::from(format!("/sys/class/bdi/{disk}"));
    match dir.is_dir() {
        true => Ok(dir),
        false => Err(format!(
            "no bdi for device {major}:{minor} (its disk {disk})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Set on the device of target/ and put back as it was.
    #[test]
    fn a_limit_is_set_and_put_back() {
        let name = "a_limit_is_set_and_put_back";
        if !ubio_testenv::is_root() {
            return ubio_testenv::skip(name, "needs root (sysfs)");
        }
        let dev = std::fs::metadata(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"))
            .unwrap()
            .dev();
        let dir = match bdi_of(dev) {
            Ok(d) => d,
            Err(e) => return ubio_testenv::skip(name, &e),
        };
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .unwrap()
                .trim()
                .to_string()
        };
        let before = (read("max_ratio_fine"), read("strict_limit"));
        let l = DeviceLimit::set(dev, 64 << 20).unwrap();
        let max: u64 = read("max_bytes").parse().unwrap();
        // Kept as a ratio of the machine's dirty limit, which moves with
        // its free memory: read back, a little less than asked, or more if
        // memory was freed since (67,268,702 beside a dd of 4 GB, once).
        assert!(max < 68 << 20 && max > 60 << 20, "{max}");
        assert_eq!(read("strict_limit"), "1");
        drop(l);
        assert_eq!((read("max_ratio_fine"), read("strict_limit")), before);
    }
}
