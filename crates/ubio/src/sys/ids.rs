//! Users and groups by name (through NSS, as `id` does), and who is at the
//! other end of a unix socket.

use super::cvt;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// A `get*nam_r` call: `call(name, entry, buf, buflen, result)`; the entry
/// found, or NotFound naming `kind`.
fn by_name<T>(
    kind: &str,
    name: &str,
    call: impl Fn(*const libc::c_char, *mut T, *mut libc::c_char, usize, *mut *mut T) -> libc::c_int,
) -> io::Result<T> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name holds a NUL byte"))?;
    // Large enough for a group with many members.
    let mut buf = vec![0u8; 64 << 10];
    let mut entry = std::mem::MaybeUninit::<T>::zeroed();
    let mut res: *mut T = std::ptr::null_mut();
    let ret = call(
        c.as_ptr(),
        entry.as_mut_ptr(),
        buf.as_mut_ptr().cast(),
        buf.len(),
        &mut res,
    );
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    if res.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no such {kind}: {name}"),
        ));
    }
    // SAFETY: the call succeeded and filled `entry` (res points at it);
    // the fields read by the callers are plain integers.
    Ok(unsafe { entry.assume_init() })
}

/// `getpwnam_r(name)`: the uid of user `name`.
///
/// See getpwnam_r(3).
pub fn user_id(name: &str) -> io::Result<u32> {
    // SAFETY: by_name passes valid pointers and the buffer's length.
    by_name("user", name, |n, e, b, l, r| unsafe {
        libc::getpwnam_r(n, e, b, l, r)
    })
    .map(|pw: libc::passwd| pw.pw_uid)
}

/// `getgrnam_r(name)`: the gid of group `name`.
///
/// See getgrnam_r(3).
pub fn group_id(name: &str) -> io::Result<u32> {
    // SAFETY: by_name passes valid pointers and the buffer's length.
    by_name("group", name, |n, e, b, l, r| unsafe {
        libc::getgrnam_r(n, e, b, l, r)
    })
    .map(|gr: libc::group| gr.gr_gid)
}

/// The credentials of the process at the other end of a connected unix
/// socket, as they were when it connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// `getsockopt(fd, SOL_SOCKET, SO_PEERCRED)`.
///
/// See unix(7), getsockopt(2).
pub fn peer_cred(sock: BorrowedFd<'_>) -> io::Result<PeerCred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` and `len` are valid out-pointers of the sizes given.
    let ret = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    cvt(ret as libc::c_long)?;
    Ok(PeerCred {
        pid: c.pid.max(0) as u32,
        uid: c.uid,
        gid: c.gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn root_and_its_group_are_found() {
        assert_eq!(user_id("root").unwrap(), 0);
        assert_eq!(group_id("root").unwrap(), 0);
        assert_eq!(
            user_id("no-such-user-ubio").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn peer_is_ourselves() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let c = peer_cred(a.as_fd()).unwrap();
        assert_eq!(c.pid, std::process::id());
        assert_eq!(c.uid, super::super::geteuid());
    }
}
