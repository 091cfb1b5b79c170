//! What a loop device is backed by: a sealable memfd (the EIO fixture) and
//! the room for a backing file.

use super::*;

/// A sealable memfd of `size` bytes (sparse), named after its use so that
/// `losetup -l` shows `/memfd:ubio-eio-<kind>-<pid>-<n> (deleted)`.
pub(super) fn make_memfd(kind: FsKind, size: u64) -> io::Result<OwnedFd> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "ubio-eio-{kind}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let cname = CString::new(name.clone()).expect("no NUL in memfd name");
    // SAFETY: cname is a valid C string; the flags are valid for memfd_create.
    let raw =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if raw < 0 {
        return Err(context(
            io::Error::last_os_error(),
            format_args!("memfd_create {name}"),
        ));
    }
    // SAFETY: raw is a freshly created descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let file = fs::File::from(fd);
    file.set_len(size)
        .map_err(|e| context(e, format_args!("size memfd {name} to {size} bytes")))?;
    Ok(file.into())
}

/// The data of `from` (its holes skipped) written at the same offsets into
/// `to`, which is at least as long.
pub(super) fn copy_data(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let (src, dst) = (
        fs::File::from(from.try_clone_to_owned()?),
        fs::File::from(to.try_clone_to_owned()?),
    );
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while let Some(start) = ubio::sys::seek_data(from, off)? {
        let end = ubio::sys::seek_hole(from, start)?;
        let mut at = start;
        while at < end {
            let n = buf.len().min((end - at) as usize);
            src.read_exact_at(&mut buf[..n], at)?;
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        off = end;
    }
    Ok(())
}

/// Bytes an unprivileged user could still write under `dir`
/// (`statvfs`: `f_bavail * f_frsize`).
pub fn available_bytes(dir: &Path) -> io::Result<u64> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value for it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and st a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(context(
            io::Error::last_os_error(),
            format_args!("statvfs {}", dir.display()),
        ));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

pub(super) fn check_free_space(dir: &Path, need: u64) -> io::Result<()> {
    let avail = available_bytes(dir)?;
    if avail < need {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "{} has {} MiB free, less than the {} MiB scratch filesystem asked for; choose a smaller size or another backing_dir",
                dir.display(),
                avail / MIB,
                need / MIB
            ),
        ));
    }
    Ok(())
}
