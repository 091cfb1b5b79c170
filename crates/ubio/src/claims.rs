//! How the LD_PRELOAD shim tells the engine which files it manages, so that
//! both never manage the same file: one datagram per claim and release on
//! an abstract unix socket whose name `ubio run` puts in UBIO_ENGINE. The
//! shim claims a file at its first read or write through the shim (not at
//! open or dup: a shell that only redirects a file must not claim it for
//! the program it execs). The shim opens no lasting descriptor for this:
//! a socket per message, closed at once.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable that names the engine's socket.
pub const ENV: &str = "UBIO_ENGINE";

/// A file (by device and inode) that process `pid` manages itself, or
/// stopped managing (`claim` false).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub claim: bool,
    pub pid: u32,
    pub dev: u64,
    pub ino: u64,
}

impl Claim {
    fn encode(&self) -> String {
        let verb = if self.claim { "claim" } else { "release" };
        format!("{verb} {} {} {}", self.pid, self.dev, self.ino)
    }

    fn decode(s: &str) -> Option<Claim> {
        let mut w = s.split_whitespace();
        let claim = match w.next()? {
            "claim" => true,
            "release" => false,
            _ => return None,
        };
        Some(Claim {
            claim,
            pid: w.next()?.parse().ok()?,
            dev: w.next()?.parse().ok()?,
            ino: w.next()?.parse().ok()?,
        })
    }
}

/// Send one claim to the engine named `name`.
pub fn send(name: &str, c: &Claim) -> io::Result<()> {
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    let s = UnixDatagram::unbound()?;
    s.send_to_addr(c.encode().as_bytes(), &addr).map(drop)
}

/// The engine's end.
pub struct ClaimListener {
    sock: UnixDatagram,
    name: String,
}

impl ClaimListener {
    /// Bind a fresh abstract name (pid and time in it).
    pub fn bind() -> io::Result<ClaimListener> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!("ubio-engine-{}-{nanos}", std::process::id());
        let sock = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?;
        sock.set_nonblocking(true)?;
        Ok(ClaimListener { sock, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every claim waiting in the socket.
    pub fn take(&self) -> Vec<Claim> {
        let mut out = Vec::new();
        let mut buf = [0u8; 128];
        while let Ok(n) = self.sock.recv(&mut buf) {
            if let Some(c) = std::str::from_utf8(&buf[..n]).ok().and_then(Claim::decode) {
                out.push(c);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_reach_the_listener() {
        let l = ClaimListener::bind().unwrap();
        let c = Claim {
            claim: true,
            pid: 7,
            dev: 2049,
            ino: 99,
        };
        send(l.name(), &c).unwrap();
        send(l.name(), &Claim { claim: false, ..c }).unwrap();
        assert_eq!(l.take(), vec![c, Claim { claim: false, ..c }]);
        assert!(l.take().is_empty());
    }
}
