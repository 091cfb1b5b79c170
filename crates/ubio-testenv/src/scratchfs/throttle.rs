//! Slow and throttled devices: blkio v1 rules on a scratch filesystem's
//! loop device, and its queue's writeback throttling.

use super::*;

impl ScratchFs {
    /// Throttles writes to this filesystem's loop device to `bytes_per_sec`
    /// (0 removes the limit), with the blkio v1 rule
    /// `blkio.throttle.write_bps_device` of the root blkio cgroup: writeback is
    /// issued by flusher threads in the root cgroup on v1, so a rule anywhere
    /// else would not slow it. Reset to no limit on drop.
    pub fn set_write_bps(&self, bytes_per_sec: u64) -> io::Result<()> {
        self.set_throttle("blkio.throttle.write_bps_device", bytes_per_sec)
    }

    /// Like [`ScratchFs::set_write_bps`], for reads (`blkio.throttle.read_bps_device`).
    pub fn set_read_bps(&self, bytes_per_sec: u64) -> io::Result<()> {
        self.set_throttle("blkio.throttle.read_bps_device", bytes_per_sec)
    }

    fn set_throttle(&self, file: &str, bytes_per_sec: u64) -> io::Result<()> {
        let Some((maj, min)) = self.dev_numbers else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "cannot throttle {}: a tmpfs has no block device",
                    self.mount_point.display()
                ),
            ));
        };
        let path = blkio_v1_root()?.join(file);
        let majmin = format!("{maj}:{min}");
        let rule = format!("{majmin} {bytes_per_sec}");
        let mut res = lock(&self.res);
        fs::write(&path, &rule)
            .map_err(|e| context(e, format_args!("write {rule:?} to {}", path.display())))?;
        let known = res.throttles.iter().any(|(p, _)| *p == path);
        if bytes_per_sec > 0 && !known {
            res.throttles.push((path, majmin));
        } else if bytes_per_sec == 0 {
            res.throttles.retain(|(p, _)| *p != path);
        }
        Ok(())
    }

    /// Turns off the block layer's writeback throttling (blk-wbt) on this
    /// filesystem's loop device (`queue/wbt_lat_usec` 0; put back on drop:
    /// the loop device outlives the filesystem). wbt holds buffered writes
    /// back while the device's reads complete later than its target (2 ms
    /// here); a loop device's reads do whenever its worker waits for the
    /// CPU, and a copy that reads and writes the device then has its
    /// writeback held for up to seconds: the device no longer keeps up with
    /// the writer, whoever starts the writeback.
    pub fn no_writeback_throttling(&self) -> io::Result<()> {
        let Some(dev) = self.loop_dev.as_deref().and_then(Path::file_name) else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{}: no loop device", self.mount_point.display()),
            ));
        };
        let path = Path::new("/sys/block").join(dev).join("queue/wbt_lat_usec");
        let old = fs::read_to_string(&path)
            .map_err(|e| context(e, format_args!("read {}", path.display())))?;
        fs::write(&path, "0")
            .map_err(|e| context(e, format_args!("write 0 to {}", path.display())))?;
        let mut res = lock(&self.res);
        if !res.queue_settings.iter().any(|(p, _)| *p == path) {
            res.queue_settings.push((path, old.trim().to_string()));
        }
        Ok(())
    }
}

/// The blkio v1 hierarchy's root directory (from /proc/self/mountinfo, else
/// /sys/fs/cgroup/blkio).
pub(super) fn blkio_v1_root() -> io::Result<PathBuf> {
    let blkio = ubio::mounts::mounts()?.into_iter().find(|m| {
        m.fstype == "cgroup" && m.root == "/" && m.super_opts.split(',').any(|o| o == "blkio")
    });
    if let Some(m) = blkio {
        return Ok(m.mount_point);
    }
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no blkio v1 hierarchy mounted (blkio.throttle.* rules need cgroup v1 blkio)",
    ))
}

/// Splits a Linux `dev_t` into major and minor (glibc's encoding).
pub(super) fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}
