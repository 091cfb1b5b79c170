//! The streams beside the services: the data they read (a tree of files
//! and an image file, random bytes, so that neither restic's deduplication
//! nor compression shrinks the work), the command of each stream in each
//! mode, and `ubio policy run` for the policy mode.

use super::plan::{Mode, Stream};
use crate::path_context;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use ubio_testenv::cgroup::MemCgroup;
use ubio_testenv::cleanup::{self, CleanupGuard};
use ubio_testenv::rng::SplitMix64;

/// restic's repository password (the repository lives for one run).
const RESTIC_PASSWORD: &str = "ubio-bench-neighbours";

/// The data the streams read.
#[derive(Debug, Clone)]
pub struct Data {
    /// The tree tar and restic read, and its files.
    pub tree: PathBuf,
    pub tree_files: Vec<PathBuf>,
    /// The file rsync and cp copy (a disk image).
    pub image: PathBuf,
    /// Each of the two holds this much.
    pub bytes: u64,
}

impl Data {
    /// What `stream` reads.
    pub fn read_by(&self, stream: Stream) -> Vec<PathBuf> {
        if stream.reads_tree() {
            self.tree_files.clone()
        } else {
            vec![self.image.clone()]
        }
    }
}

/// The sizes of the tree's files: log-uniform between 64 KiB and 16 MiB
/// (documents, photos, packages), from `seed`, adding up to `bytes`.
pub fn tree_sizes(bytes: u64, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64(seed);
    let (lo, hi) = ((64u64 << 10) as f64, (16u64 << 20) as f64);
    let mut sizes = Vec::new();
    let mut left = bytes;
    while left > 0 {
        let size = (lo * (hi / lo).powf(rng.unit())) as u64;
        let size = size.max(4096).min(left);
        sizes.push(size);
        left -= size;
    }
    sizes
}

/// Writes the tree and the image into `dir` (durable, then dropped from the
/// page cache), `bytes` each.
pub fn make_data(dir: &Path, bytes: u64, say: &dyn Fn(&str)) -> io::Result<Data> {
    let tree = dir.join("tree");
    let sizes = tree_sizes(bytes, 7);
    say(&format!(
        "writing the tree ({} files, {} MiB) and the image ({} MiB) in {}",
        sizes.len(),
        bytes >> 20,
        bytes >> 20,
        dir.display()
    ));
    let mut tree_files = Vec::with_capacity(sizes.len());
    for (i, &size) in sizes.iter().enumerate() {
        let path = tree.join(format!("dir{:03}/file{i:05}", i / 64));
        write_random(&path, size, i as u64 + 1)?;
        tree_files.push(path);
    }
    let image = dir.join("image.raw");
    write_random(&image, bytes, 0x1ace)?;
    Ok(Data {
        tree,
        tree_files,
        image,
        bytes,
    })
}

/// A file of `bytes` random bytes (from `seed`), durable and not cached.
fn write_random(path: &Path, bytes: u64, seed: u64) -> io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| path_context(e, "mkdir", d))?;
    }
    let mut f = std::fs::File::create(path).map_err(|e| path_context(e, "create", path))?;
    let mut rng = SplitMix64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(buf.len() as u64) as usize;
        rng.fill(&mut buf[..n]);
        f.write_all(&buf[..n])
            .map_err(|e| path_context(e, "write", path))?;
        done += n as u64;
    }
    drop(f);
    crate::harness::runner::process::drop_cached(path).map(drop)
}

/// The tool's own option for the page cache, or why there is none (said
/// in the report). `rsync_help` is `rsync --help`'s text.
pub fn own_option(stream: Stream, rsync_help: &str) -> Result<&'static str, &'static str> {
    match stream {
        Stream::Image => Ok("dd iflag=nocache oflag=nocache (GNU coreutils) instead of cp"),
        Stream::Rsync if rsync_help.contains("--drop-cache") => Ok("rsync --drop-cache"),
        Stream::Rsync => Err(
            "none: this rsync has no --drop-cache (a patch some distributions carry; `rsync --help`)",
        ),
        Stream::Tar => Err("none: GNU tar has no option for the page cache"),
        Stream::Restic => Err(
            "none: restic's --no-cache is about its own metadata cache, not the page cache",
        ),
    }
}

/// Where a run's output goes, and the command of `stream` in `mode` (the
/// policy mode's command is the plain one: the daemon does the rest).
pub fn command(stream: Stream, mode: Mode, data: &Data, out: &Path, ubio: &Path) -> Command {
    let plain: Vec<std::ffi::OsString> = match (stream, mode) {
        (Stream::Tar, _) => vec![
            "tar".into(),
            "-cf".into(),
            out.join("backup.tar").into(),
            "-C".into(),
            data.tree.parent().unwrap_or(Path::new("/")).into(),
            "tree".into(),
        ],
        (Stream::Restic, _) => vec![
            "restic".into(),
            "backup".into(),
            "--quiet".into(),
            "--repo".into(),
            out.join("repo").into(),
            data.tree.clone().into(),
        ],
        (Stream::Rsync, Mode::Own) => vec![
            "rsync".into(),
            "--drop-cache".into(),
            data.image.clone().into(),
            out.join("image.raw").into(),
        ],
        (Stream::Rsync, _) => vec![
            "rsync".into(),
            data.image.clone().into(),
            out.join("image.raw").into(),
        ],
        (Stream::Image, Mode::Own) => vec![
            "dd".into(),
            format!("if={}", data.image.display()).into(),
            format!("of={}", out.join("image.raw").display()).into(),
            "bs=1M".into(),
            "iflag=nocache".into(),
            "oflag=nocache".into(),
            "status=none".into(),
        ],
        (Stream::Image, _) => vec![
            "cp".into(),
            data.image.clone().into(),
            out.join("image.raw").into(),
        ],
    };
    let mut cmd = if mode == Mode::UbioRun {
        let mut c = Command::new(ubio);
        c.args(["run", "--"]).args(&plain);
        c
    } else {
        let mut c = Command::new(&plain[0]);
        c.args(&plain[1..]);
        c
    };
    restic_env(&mut cmd, out);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// restic's password, and its cache and temporary files in the run's
/// output (not in ~/.cache, not in /tmp).
fn restic_env(cmd: &mut Command, out: &Path) {
    cmd.env("RESTIC_PASSWORD", RESTIC_PASSWORD)
        .env("RESTIC_CACHE_DIR", out.join("restic-cache"))
        .env("TMPDIR", out.join("tmp"));
}

/// Makes the run's output directory; for restic, a new repository in it
/// (untimed: `restic init`).
pub fn prepare_output(stream: Stream, out: &Path) -> io::Result<()> {
    std::fs::create_dir_all(out.join("tmp")).map_err(|e| path_context(e, "mkdir", out))?;
    if stream == Stream::Restic {
        let mut cmd = Command::new("restic");
        cmd.args(["init", "--quiet", "--repo"])
            .arg(out.join("repo"));
        restic_env(&mut cmd, out);
        let o = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| ubio_testenv::context(e, "run restic init"))?;
        if !o.status.success() {
            return Err(io::Error::other(format!(
                "restic init failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
    }
    Ok(())
}

/// The stream's output made durable: `sync -f` (syncfs) of its
/// filesystem, part of the stream's time.
pub fn make_durable(out: &Path) -> io::Result<()> {
    let o = Command::new("sync")
        .arg("-f")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ubio_testenv::context(e, "run sync -f"))?;
    if !o.status.success() {
        return Err(io::Error::other(format!(
            "sync -f {} failed: {}",
            out.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(())
}

/// `ubio policy run` with one scope: the stream's cgroup.
pub struct PolicyDaemon {
    pid: u32,
    ubio: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    child: std::sync::Arc<std::sync::Mutex<Option<Child>>>,
    _guard: CleanupGuard,
}

impl PolicyDaemon {
    /// Writes its configuration into `dir` and starts it; returns once
    /// its status answers.
    pub fn start(ubio: &Path, dir: &Path, stream_cg: &MemCgroup) -> io::Result<PolicyDaemon> {
        std::fs::create_dir_all(dir).map_err(|e| path_context(e, "mkdir", dir))?;
        let socket = dir.join("policy.sock");
        let config = dir.join("policy.toml");
        let pattern = cgroup_pattern(stream_cg);
        std::fs::write(&config, policy_config(&socket, &pattern))
            .map_err(|e| path_context(e, "write", &config))?;
        let log = dir.join("policy.log");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| path_context(e, "open", &log))?;
        let mut cmd = Command::new(ubio);
        cmd.args(["policy", "run", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let child = ubio_testenv::cleanup::die_with_parent(&mut cmd)
            .spawn()
            .map_err(|e| {
                ubio_testenv::context(e, format_args!("start {} policy run", ubio.display()))
            })?;
        let pid = child.id();
        let child = std::sync::Arc::new(std::sync::Mutex::new(Some(child)));
        let held = std::sync::Arc::clone(&child);
        let guard = cleanup::register(format!("stop ubio policy (pid {pid})"), move || {
            if let Some(mut c) = held.lock().unwrap_or_else(|e| e.into_inner()).take() {
                // SIGTERM: it puts back what it changed (device limits).
                let _ = ubio::sys::kill(c.id(), libc::SIGTERM);
                let deadline = Instant::now() + Duration::from_secs(10);
                while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        });
        let d = PolicyDaemon {
            pid,
            ubio: ubio.to_path_buf(),
            socket,
            log,
            child,
            _guard: guard,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while d.status().is_none() {
            let exited = d
                .child
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "ubio policy run did not start: {}",
                    std::fs::read_to_string(&d.log).unwrap_or_default().trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// Its status (`ubio policy status --json`), None while it does not answer.
    fn status(&self) -> Option<serde_json::Value> {
        let o = Command::new(&self.ubio)
            .args(["policy", "status", "--json", "--socket"])
            .arg(&self.socket)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).ok())
            .flatten()
    }

    /// Its CPU time so far (every thread), None once it has exited.
    pub fn cpu_times(&self) -> Option<crate::cpu::CpuTimes> {
        crate::cpu::pid_times(self.pid)
    }

    /// Waits (up to `timeout`) until it manages no file: what the stream
    /// left is dropped. False if it still manages some.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(s) = self.status() {
                let managed = s["files"].as_array().map_or(0, Vec::len);
                if managed == 0 {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

/// The daemon's name of a cgroup: v1 "memory:/path", v2 "/path".
pub fn cgroup_pattern(cg: &MemCgroup) -> String {
    match cg.version() {
        ubio_testenv::cgroup::CgroupVersion::V1 => format!("memory:{}", cg.cgroup().path),
        ubio_testenv::cgroup::CgroupVersion::V2 => cg.cgroup().path.clone(),
    }
}

/// The daemon's configuration: its socket in the scratch directory, one
/// scope.
pub fn policy_config(socket: &Path, pattern: &str) -> String {
    format!(
        "# ubio-bench neighbours: the stream's cgroup is the only scope.\n\
         [daemon]\nsocket = \"{}\"\n\n[[scope]]\nname = \"stream\"\ncgroups = [\"{pattern}\"]\n",
        socket.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_adds_up() {
        let sizes = tree_sizes(1 << 30, 7);
        assert_eq!(sizes.iter().sum::<u64>(), 1 << 30);
        assert!(sizes.iter().all(|&s| s <= 16 << 20));
        // Log-uniform over 64 KiB..16 MiB: a few hundred files per GiB.
        assert!((100..1000).contains(&sizes.len()), "{}", sizes.len());
        assert_eq!(sizes, tree_sizes(1 << 30, 7));
        assert_eq!(tree_sizes(1000, 1), [1000]);
    }

    #[test]
    fn commands_per_mode() {
        let data = Data {
            tree: PathBuf::from("/s/data/tree"),
            tree_files: Vec::new(),
            image: PathBuf::from("/s/data/image.raw"),
            bytes: 1,
        };
        let argv = |s, m| {
            let c = command(s, m, &data, Path::new("/s/out"), Path::new("/u/ubio"));
            std::iter::once(c.get_program().to_string_lossy().into_owned())
                .chain(c.get_args().map(|a| a.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            argv(Stream::Tar, Mode::Plain),
            "tar -cf /s/out/backup.tar -C /s/data tree"
        );
        assert_eq!(
            argv(Stream::Tar, Mode::Policy),
            argv(Stream::Tar, Mode::Plain)
        );
        assert_eq!(
            argv(Stream::Restic, Mode::UbioRun),
            "/u/ubio run -- restic backup --quiet --repo /s/out/repo /s/data/tree"
        );
        assert_eq!(
            argv(Stream::Image, Mode::Own),
            "dd if=/s/data/image.raw of=/s/out/image.raw bs=1M iflag=nocache oflag=nocache status=none"
        );
        assert_eq!(
            argv(Stream::Image, Mode::Plain),
            "cp /s/data/image.raw /s/out/image.raw"
        );
        assert!(argv(Stream::Rsync, Mode::Own).contains("--drop-cache"));
        let c = command(
            Stream::Restic,
            Mode::Plain,
            &data,
            Path::new("/s/out"),
            Path::new("u"),
        );
        let env: Vec<_> = c.get_envs().collect();
        assert!(env.iter().any(|(k, v)| *k == "RESTIC_CACHE_DIR"
            && *v == Some(Path::new("/s/out/restic-cache").as_os_str())));
    }

    #[test]
    fn own_options_where_they_exist() {
        assert!(own_option(Stream::Image, "").is_ok());
        assert!(own_option(Stream::Rsync, "--drop-D").is_err());
        assert!(own_option(Stream::Rsync, " --drop-cache  do not cache").is_ok());
        assert!(own_option(Stream::Tar, "").is_err());
        assert!(own_option(Stream::Restic, "")
            .unwrap_err()
            .contains("--no-cache"));
    }

    #[test]
    fn the_policy_names_the_cgroup() {
        let c = policy_config(Path::new("/s/p.sock"), "memory:/a/b");
        assert!(c.contains("cgroups = [\"memory:/a/b\"]") && c.contains("socket = \"/s/p.sock\""));
    }
}
