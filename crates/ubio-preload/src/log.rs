//! The debug log (UBIO_LOG=debug): to UBIO_LOG_FILE if set, else stderr.
//! Written with the real libc calls, one write per line, so lines from
//! several processes do not interleave within a line.

use crate::config::{self, Config};
use crate::real::f;

pub fn enabled() -> bool {
    config::get().debug
}

/// Log a line if the debug log is on.
pub fn debug(msg: &str) {
    let c = config::get();
    if c.debug {
        write_line(c, msg);
    }
}

/// Read the settings now (in the constructor) and log them, and what in
/// them could not be read.
pub fn settings_loaded() {
    let c = config::get();
    if c.debug {
        write_line(
            c,
            &format!(
                "loaded: backend {}, window {} bytes",
                c.stream.backend, c.stream.window
            ),
        );
        for p in &c.problems {
            write_line(c, p);
        }
    }
}

fn write_line(c: &Config, msg: &str) {
    // SAFETY: getpid has no preconditions.
    let line = format!("ubio-preload[{}]: {msg}\n", unsafe { libc::getpid() });
    match &c.log_file {
        Some(path) => {
            let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC;
            // SAFETY: `path` is NUL-terminated; the mode is passed as the
            // variadic argument open(2) expects with O_CREAT.
            let fd = unsafe { f::open()(path.as_ptr(), flags, 0o644 as libc::c_uint) };
            if fd >= 0 {
                // SAFETY: `line` is a valid buffer; `fd` is ours to close.
                unsafe {
                    f::write()(fd, line.as_ptr().cast(), line.len());
                    f::close()(fd);
                }
            }
        }
        // SAFETY: writing a valid buffer to stderr.
        None => unsafe {
            f::write()(2, line.as_ptr().cast(), line.len());
        },
    }
}
