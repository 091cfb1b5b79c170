//! Filesystems stacked on a directory, for the contract tests: an overlayfs
//! mount (a container's root), a bindfs FUSE mount (a passthrough daemon)
//! and an NFS mount of a directory the kernel NFS server exports. Each lives in a temporary directory under `parent`, and is
//! unmounted and removed when dropped, or by the cleanup guard when the test
//! process is interrupted. Needs root.

use crate::cleanup::{self, CleanupGuard};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `umount`, then `umount --lazy` if busy.
fn unmount(mnt: &Path) {
    let ok = Command::new("umount")
        .arg(mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok && crate::scratchfs::is_mounted(mnt) {
        let _ = Command::new("umount").arg("--lazy").arg(mnt).status();
    }
}

fn make_dirs(parent: &Path, prefix: &str, subs: &[&str]) -> io::Result<tempfile::TempDir> {
    // Canonical, as /proc/self/mountinfo names mount points.
    let tmp = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent.canonicalize()?)?;
    for sub in subs {
        std::fs::create_dir(tmp.path().join(sub))?;
    }
    Ok(tmp)
}

/// An overlay of `lower` and `upper` mounted at `mnt`.
pub struct Overlay {
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub mnt: PathBuf,
    _cleanup: CleanupGuard,
    _tmp: tempfile::TempDir,
}

impl Overlay {
    pub fn mount(parent: &Path) -> io::Result<Overlay> {
        Self::mount_with(parent, false)
    }

    /// An overlay whose layers cannot be found from /proc/self/mountinfo:
    /// they are mounted through a bind mount of another directory, detached
    /// (`umount --lazy`) once the overlay is up, so the paths in its options
    /// name empty directories, as inside a container whose layers live in
    /// another mount namespace. `lower` and `upper` still name the real
    /// layers, for the test's own cachestat().
    pub fn mount_hidden(parent: &Path) -> io::Result<Overlay> {
        Self::mount_with(parent, true)
    }

    fn mount_with(parent: &Path, hidden: bool) -> io::Result<Overlay> {
        let tmp = make_dirs(
            parent,
            "ubio-ovl-",
            &["lower", "upper", "work", "mnt", "shown"],
        )?;
        let d = tmp.path();
        let mnt = d.join("mnt");
        // The directory the overlay's options name: `d` itself, or `shown`,
        // a bind mount of `d` detached after mounting.
        let named = if hidden {
            d.join("shown")
        } else {
            d.to_path_buf()
        };
        let mount = crate::require_tool("mount")?;
        let mut bound = None;
        if hidden {
            crate::run_tool(
                &mount,
                &["--bind".as_ref(), d.as_os_str(), named.as_os_str()],
            )?;
            let n = named.clone();
            bound = Some(cleanup::register(
                format!("umount {}", n.display()),
                move || unmount(&n),
            ));
        }
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            named.join("lower").display(),
            named.join("upper").display(),
            named.join("work").display()
        );
        let mounted = crate::run_tool(
            &mount,
            &[
                "-t".as_ref(),
                "overlay".as_ref(),
                "overlay".as_ref(),
                "-o".as_ref(),
                opts.as_ref(),
                mnt.as_ref(),
            ],
        );
        // Unmounted (lazily if busy): the overlay keeps its layers, and the
        // path its options name is an empty directory again.
        drop(bound);
        mounted?;
        let m = mnt.clone();
        let guard = cleanup::register(format!("umount {}", mnt.display()), move || unmount(&m));
        Ok(Overlay {
            lower: d.join("lower"),
            upper: d.join("upper"),
            mnt,
            _cleanup: guard,
            _tmp: tmp,
        })
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        unmount(&self.mnt);
    }
}

/// A bindfs (FUSE) mount of `backing` at `mnt` with `-o kernel_cache`, its
/// daemon run in the foreground as a child, optionally through a wrapper
/// (`ubio run --`).
pub struct Bindfs {
    pub backing: PathBuf,
    pub mnt: PathBuf,
    daemon: Child,
    _cleanup: CleanupGuard,
    _tmp: tempfile::TempDir,
}

impl Bindfs {
    /// `wrapper`: a command that runs the daemon (e.g. `["/path/ubio",
    /// "run", "--"]`), or empty.
    pub fn mount(parent: &Path, wrapper: &[&std::ffi::OsStr]) -> io::Result<Bindfs> {
        let bindfs = crate::require_tool("bindfs")?;
        let tmp = make_dirs(parent, "ubio-fuse-", &["backing", "mnt"])?;
        let (backing, mnt) = (tmp.path().join("backing"), tmp.path().join("mnt"));
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&bindfs);
                c
            }
            None => Command::new(&bindfs),
        };
        // -f: foreground, so the daemon is this child (and its wrapper
        // applies). kernel_cache: keep the mount's pages across opens, as a
        // disk filesystem does (by default FUSE drops a file's pages at every
        // open, so no cache outlives the program that read it).
        cmd.args(["-f", "-o", "kernel_cache"])
            .arg(&backing)
            .arg(&mnt)
            .stdin(Stdio::null());
        let daemon = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawn bindfs: {e}")))?;
        let m = mnt.clone();
        let guard = cleanup::register(format!("umount {}", mnt.display()), move || unmount(&m));
        let mut fs = Bindfs {
            backing,
            mnt,
            daemon,
            _cleanup: guard,
            _tmp: tmp,
        };
        let start = Instant::now();
        while !crate::scratchfs::is_mounted(&fs.mnt) {
            if let Some(status) = fs.daemon.try_wait()? {
                return Err(io::Error::other(format!(
                    "bindfs exited ({status}) before mounting"
                )));
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(io::Error::other("bindfs did not mount within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(fs)
    }
}

impl Drop for Bindfs {
    fn drop(&mut self) {
        unmount(&self.mnt);
        // The daemon exits once unmounted; kill it if it does not.
        let start = Instant::now();
        while self.daemon.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(5) {
                let _ = self.daemon.kill();
                let _ = self.daemon.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `dir` exported by the kernel NFS server to 127.0.0.1 and mounted over
/// NFSv4.2 at `mnt` (a temporary directory under `parent`); unexported and
/// unmounted when dropped. Needs nfsd and mountd running (the 6.12 test
/// guest starts them) and exportfs.
pub struct NfsMount {
    pub mnt: PathBuf,
    _cleanup: CleanupGuard,
    _tmp: tempfile::TempDir,
}

impl NfsMount {
    pub fn export(dir: &Path, parent: &Path) -> io::Result<NfsMount> {
        let exportfs = crate::require_tool("exportfs")?;
        let mount = crate::require_tool("mount")?;
        let tmp = make_dirs(parent, "ubio-nfs-", &["mnt"])?;
        let mnt = tmp.path().join("mnt");
        let client = format!("127.0.0.1:{}", dir.display());
        crate::run_tool(
            &exportfs,
            &[
                "-o".as_ref(),
                "rw,sync,no_root_squash,no_subtree_check,insecure".as_ref(),
                client.as_ref(),
            ],
        )?;
        let (m, c, e) = (mnt.clone(), client.clone(), exportfs.clone());
        let guard = cleanup::register(format!("umount {}", mnt.display()), move || {
            unmount(&m);
            let _ = Command::new(&e).arg("-u").arg(&c).status();
        });
        // The kernel parses the options itself (no mount.nfs helper): -i,
        // and the address given.
        crate::run_tool(
            &mount,
            &[
                "-i".as_ref(),
                "-t".as_ref(),
                "nfs4".as_ref(),
                "-o".as_ref(),
                "vers=4.2,addr=127.0.0.1,clientaddr=127.0.0.1".as_ref(),
                client.as_ref(),
                mnt.as_ref(),
            ],
        )?;
        Ok(NfsMount {
            mnt,
            _cleanup: guard,
            _tmp: tmp,
        })
    }
}
