//! Undoing a scratch filesystem: unmount, detach the loop device, remove
//! the backing file and directories, in drop and on the signal thread.

use super::*;

pub(super) fn register_teardown(res: &Arc<Mutex<Resources>>, what: &str) -> CleanupGuard {
    let r = Arc::clone(res);
    cleanup::register(format!("remove scratch {what} filesystem"), move || {
        teardown(&mut lock(&r))
    })
}

/// Undoes whatever `res` records, last-made first. Problems are reported on
/// stderr: this runs in drop and on the signal thread, with nobody to return
/// an error to, and a leaked mount or loop device must not go unnoticed.
pub(super) fn teardown(res: &mut Resources) {
    for (file, majmin) in res.throttles.drain(..) {
        if let Err(e) = fs::write(&file, format!("{majmin} 0")) {
            eprintln!(
                "ubio-bench: cannot reset throttle {majmin} in {}: {e}",
                file.display()
            );
        }
    }
    for (file, old) in res.queue_settings.drain(..) {
        if let Err(e) = fs::write(&file, &old) {
            eprintln!(
                "ubio-bench: cannot put {old} back in {}: {e}",
                file.display()
            );
        }
    }
    if let Some(mp) = res.mounted_at.take() {
        unmount(&mp);
    }
    if let Some(dev) = res.loop_dev.take() {
        detach(&dev, res.loop_backing.take());
    }
    res.memfd = None;
    if let Some(file) = res.backing_file.take() {
        if let Err(e) = fs::remove_file(&file) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!(
                    "ubio-bench: cannot remove backing file {}: {e}",
                    file.display()
                );
            }
        }
    }
    while let Some(dir) = res.dirs.pop() {
        if let Err(e) = fs::remove_dir(&dir) {
            if e.kind() != io::ErrorKind::NotFound {
                eprintln!("ubio-bench: cannot remove directory {}: {e}", dir.display());
            }
        }
    }
}

/// `umount`, retried while busy, then `umount --lazy` as a last resort (the
/// filesystem goes once its last user closes it).
pub(super) fn unmount(mp: &Path) {
    let Ok(umount) = require_tool("umount") else {
        eprintln!(
            "ubio-bench: umount not found; {} stays mounted",
            mp.display()
        );
        return;
    };
    let mut last = None;
    for attempt in 0..10 {
        match run_tool(&umount, &[mp.as_os_str()]) {
            Ok(_) => return,
            Err(e) => {
                if !is_mounted(mp) {
                    return;
                }
                log::debug!("umount {} (attempt {attempt}): {e}", mp.display());
                last = Some(e);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    eprintln!(
        "ubio-bench: cannot unmount {} ({}); detaching it lazily",
        mp.display(),
        last.map(|e| e.to_string()).unwrap_or_default()
    );
    if let Err(e) = run_tool(&umount, &["--lazy".as_ref(), mp.as_os_str()]) {
        eprintln!("ubio-bench: lazy umount {} failed too: {e}", mp.display());
    }
}

/// `losetup -d`, then waits (up to 5 s) until the device really lets go of
/// the backing file: the kernel defers the detach while someone still has the
/// device open.
pub(super) fn detach(dev: &Path, backing: Option<String>) {
    let result =
        require_tool("losetup").and_then(|l| run_tool(&l, &["-d".as_ref(), dev.as_os_str()]));
    if let Err(e) = result {
        eprintln!(
            "ubio-bench: cannot detach loop device {}: {e}",
            dev.display()
        );
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while backing.is_some() && loop_backing_file(dev) == backing {
        if Instant::now() > deadline {
            eprintln!(
                "ubio-bench: {} still attached to {} 5 s after losetup -d (in use?); the kernel detaches it when closed",
                dev.display(),
                backing.as_deref().unwrap_or("?")
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// /sys/block/loopN/loop/backing_file: what the device is attached to now.
pub(super) fn loop_backing_file(dev: &Path) -> Option<String> {
    let name = dev.file_name()?.to_str()?;
    fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// Whether `path` is a mount point in our mount namespace.
pub fn is_mounted(path: &Path) -> bool {
    ubio::mounts::mounts().is_ok_and(|m| m.iter().any(|m| m.mount_point == path))
}

/// A fresh directory `<parent>/<prefix>XXXXXX`, recorded for removal.
pub(super) fn make_temp_dir(
    parent: &Path,
    prefix: &str,
    res: &Mutex<Resources>,
) -> io::Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .map_err(|e| {
            context(
                e,
                format_args!("create a temporary directory in {}", parent.display()),
            )
        })?
        // Removal is ours (in teardown, also from the signal thread).
        .keep();
    lock(res).dirs.push(dir.clone());
    Ok(dir)
}
