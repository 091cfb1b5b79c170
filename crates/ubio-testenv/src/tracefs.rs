//! tracefs mounts for tests: a private one ([`crate::reclaim_trace`]), and
//! the system's place, /sys/kernel/tracing, for tests of programs that look
//! for it there (`ubio policy`).

use crate::cleanup::{self, CleanupGuard};
use crate::path_context;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Where systemd mounts tracefs (sys-kernel-tracing.mount).
pub const SYSTEM: &str = "/sys/kernel/tracing";

/// `mount -t tracefs nodev DIR` (nosuid, nodev, noexec).
pub(crate) fn mount(dir: &Path) -> io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: every pointer is a valid NUL-terminated string that outlives
    // the call; no mount data.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(path_context(
            io::Error::last_os_error(),
            "mount tracefs on",
            dir,
        ));
    }
    Ok(())
}

/// Detaches the mount at `dir`; a failure is logged (this runs in drop and
/// on the signal thread).
pub(crate) fn unmount(dir: &Path) {
    if let Ok(target) = CString::new(dir.as_os_str().as_bytes()) {
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            log::warn!("umount {}: {}", dir.display(), io::Error::last_os_error());
        }
    }
}

/// tracefs at [`SYSTEM`] while it lives: the mount that was there, or one
/// made for the test where none was (a machine without systemd, as this
/// project's CI), removed when the guard goes or on a termination signal.
pub struct SystemTracefs {
    _unmount: Option<CleanupGuard>,
}

/// tracefs at [`SYSTEM`], mounted there if it is not (needs root).
pub fn system() -> io::Result<SystemTracefs> {
    let dir = Path::new(SYSTEM);
    if dir.join("instances").is_dir() {
        return Ok(SystemTracefs { _unmount: None });
    }
    mount(dir)?;
    let guard = cleanup::register(format!("umount tracefs at {SYSTEM}"), move || {
        unmount(Path::new(SYSTEM))
    });
    Ok(SystemTracefs {
        _unmount: Some(guard),
    })
}
