//! The services, Debian's programs started in the scenario's scratch
//! directory (nothing of the system's own PostgreSQL or nginx is touched:
//! their own data directory, configuration, port on 127.0.0.1 and logs),
//! and the loads that drive them.
//!
//! - PostgreSQL: `initdb` (as the user postgres, which the server needs),
//!   the postmaster in the service's memory cgroup (its backends follow),
//!   TCP on 127.0.0.1 only, no Unix socket; `pgbench -i` makes the
//!   database. Stopped with a fast shutdown (SIGINT) when dropped and on
//!   Ctrl-C (through [`ubio_testenv::cleanup`]).
//! - nginx: its own prefix, configuration, error log and pid file; the
//!   master and its worker in the service's cgroup; stopped with `nginx -s
//!   stop` (then SIGKILL).
//! - The loads run outside both cgroups: `pgbench` with its
//!   per-transaction log, wrk in back-to-back one-second runs (wrk prints
//!   its latency histogram only at its end, and per-second figures are
//!   what the plots need; a run costs a few milliseconds of setup).

use super::latency::{self, PgbenchLog, Second, WindowFigures, WrkSlice, WRK_SCRIPT};
use super::plan::Load;
use crate::path_context;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use ubio_testenv::cgroup::{spawn_in, MemCgroup};
use ubio_testenv::cleanup::{self, CleanupGuard};
use ubio_testenv::rng::SplitMix64;

/// How long a service may take to answer after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stop may take before the process is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The unix time now, in microseconds.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A free TCP port on 127.0.0.1 (free when asked).
pub fn free_port() -> io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ubio_testenv::context(e, "bind a port on 127.0.0.1"))?;
    Ok(l.local_addr()?.port())
}

/// PostgreSQL's programs: the newest /usr/lib/postgresql/N/bin that has
/// initdb, postgres and pgbench.
pub fn postgres_bin() -> Result<PathBuf, String> {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(|e| format!("{}: {e} (install postgresql)", root.display()))?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| {
            ["initdb", "postgres", "pgbench", "pg_isready"]
                .iter()
                .all(|p| bin.join(p).is_file())
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b).ok_or_else(|| {
        format!(
            "no PostgreSQL server in {} (install postgresql)",
            root.display()
        )
    })
}

/// Runs `cmd` to completion; its stderr (and stdout) in the error.
fn run(cmd: &mut Command, what: &str) -> io::Result<String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        ubio_testenv::context(
            e,
            format_args!("{what}: cannot run {:?}", cmd.get_program()),
        )
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        )))
    }
}

/// The last lines of a log, for an error.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// A child process, stopped by `stop` (then killed) when the guard drops
/// or on a termination signal.
struct Supervised {
    child: Arc<Mutex<Option<Child>>>,
    _guard: CleanupGuard,
}

impl Supervised {
    fn new(what: String, child: Child, stop: impl Fn(u32) + Send + 'static) -> Supervised {
        let child = Arc::new(Mutex::new(Some(child)));
        let held = Arc::clone(&child);
        let guard = cleanup::register(what, move || {
            let Some(mut c) = held.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return;
            };
            if matches!(c.try_wait(), Ok(None)) {
                stop(c.id());
                let deadline = Instant::now() + STOP_TIMEOUT;
                while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = c.kill();
            }
            let _ = c.wait();
        });
        Supervised {
            child,
            _guard: guard,
        }
    }

    /// None while it runs; its status once it exited.
    fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

/// A PostgreSQL cluster of our own.
pub struct Postgres {
    pub port: u16,
    pub data: PathBuf,
    bin: PathBuf,
    log: PathBuf,
    server: Supervised,
}

impl Postgres {
    /// initdb in `root`/data (owned by postgres), then the server in `cg`
    /// with `shared_buffers`; waits until it answers.
    pub fn start(root: &Path, cg: &MemCgroup, shared_buffers: u64) -> io::Result<Postgres> {
        let bin = postgres_bin().map_err(io::Error::other)?;
        let data = root.join("data");
        std::fs::create_dir_all(&data).map_err(|e| path_context(e, "mkdir", &data))?;
        let (uid, gid) = postgres_ids()?;
        std::os::unix::fs::chown(&data, Some(uid), Some(gid))
            .map_err(|e| path_context(e, "chown to postgres", &data))?;
        run(
            as_postgres(&bin.join("initdb"))
                .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"])
                .args(["--no-sync", "--no-instructions", "-D"])
                .arg(&data),
            "initdb",
        )?;
        let port = free_port()?;
        let log = root.join("postgres.log");
        let out = std::fs::File::create(&log).map_err(|e| path_context(e, "create", &log))?;
        let mut cmd = as_postgres(&bin.join("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            // No socket in /var/run/postgresql (the system's) nor in a
            // scratch path that may pass the 107 bytes a socket path has.
            .args(["-c", "unix_socket_directories="])
            .args(["-c", &format!("shared_buffers={}kB", shared_buffers >> 10)])
            .args(["-c", "max_connections=32", "-c", "logging_collector=off"])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let child = cg.spawn(&mut cmd)?;
        let server = Supervised::new(
            format!("stop PostgreSQL on port {port}"),
            child,
            // SIGINT: a fast shutdown (clients cut, a checkpoint).
            |pid| {
                let _ = ubio::sys::kill(pid, libc::SIGINT);
            },
        );
        let pg = Postgres {
            port,
            data,
            bin,
            log,
            server,
        };
        pg.wait_ready()?;
        Ok(pg)
    }

    fn wait_ready(&self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.server.exited() {
                return Err(io::Error::other(format!(
                    "PostgreSQL exited at start ({status}); {}:\n{}",
                    self.log.display(),
                    tail(&self.log)
                )));
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "PostgreSQL did not answer within {START_TIMEOUT:?}; {}:\n{}",
                    self.log.display(),
                    tail(&self.log)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The connection arguments of a client.
    pub fn conn_args(&self) -> Vec<String> {
        [
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "postgres",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    pub fn pgbench(&self) -> PathBuf {
        self.bin.join("pgbench")
    }

    /// `pgbench -i -s scale`, then a checkpoint (so that no run starts
    /// with the load's dirty pages).
    pub fn make_database(&self, scale: u32) -> io::Result<()> {
        let conn = self.conn_args();
        run(
            Command::new(self.pgbench())
                .args(["-i", "-q", "-s", &scale.to_string()])
                .args(&conn),
            "pgbench -i",
        )?;
        self.checkpoint()
    }

    pub fn checkpoint(&self) -> io::Result<()> {
        run(
            Command::new(self.bin.join("psql"))
                .args(["-q", "-X", "-c", "CHECKPOINT"])
                .args(self.conn_args()),
            "psql CHECKPOINT",
        )
        .or_else(|_| {
            // psql lives in /usr/bin only on some installs.
            run(
                Command::new("psql")
                    .args(["-q", "-X", "-c", "CHECKPOINT"])
                    .args(self.conn_args()),
                "psql CHECKPOINT",
            )
        })
        .map(drop)
    }

    /// The database's files (its relations: data/base).
    pub fn set_files(&self) -> io::Result<Vec<PathBuf>> {
        files_under(&self.data.join("base"))
    }
}

/// A command run as the user postgres (the server refuses root):
/// util-linux's setpriv, which execs (the child is the program itself).
fn as_postgres(program: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=postgres",
        "--regid=postgres",
        "--init-groups",
        "--",
    ])
    .arg(program);
    cmd
}

fn postgres_ids() -> io::Result<(u32, u32)> {
    let id = |flag: &str| -> io::Result<u32> {
        run(Command::new("id").args([flag, "postgres"]), "id postgres")?
            .trim()
            .parse()
            .map_err(|_| io::Error::other("id postgres: not a number"))
    };
    Ok((id("-u")?, id("-g")?))
}

/// Every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| path_context(e, "read directory", &d))? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// nginx serving a directory of files on 127.0.0.1.
pub struct Nginx {
    pub port: u16,
    pub www: PathBuf,
    /// The request paths, one per line (wrk's list).
    pub paths_file: PathBuf,
    _server: Supervised,
}

impl Nginx {
    /// `count` files of `file_bytes` (random bytes) in `root`/www, and
    /// nginx serving them from `cg`.
    pub fn start(root: &Path, cg: &MemCgroup, count: u64, file_bytes: u64) -> io::Result<Nginx> {
        let www = root.join("www");
        let mut paths = String::new();
        let mut rng = SplitMix64(0x006e_6769_6e78);
        let mut buf = vec![0u8; file_bytes as usize];
        for i in 0..count {
            let rel = format!("d{:03}/f{i:05}", i / 256);
            let path = www.join(&rel);
            if let Some(d) = path.parent() {
                std::fs::create_dir_all(d).map_err(|e| path_context(e, "mkdir", d))?;
            }
            rng.fill(&mut buf);
            std::fs::write(&path, &buf).map_err(|e| path_context(e, "write", &path))?;
            paths.push('/');
            paths.push_str(&rel);
            paths.push('\n');
        }
        let paths_file = root.join("paths");
        std::fs::write(&paths_file, paths).map_err(|e| path_context(e, "write", &paths_file))?;
        let port = free_port()?;
        let conf = root.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(root, &www, port))
            .map_err(|e| path_context(e, "write", &conf))?;
        let args = nginx_args(root, &conf);
        let log = root.join("nginx.out");
        let out = std::fs::File::create(&log).map_err(|e| path_context(e, "create", &log))?;
        let mut cmd = Command::new("nginx");
        cmd.args(&args)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let child = cg.spawn(&mut cmd)?;
        let server = Supervised::new(format!("stop nginx on port {port}"), child, move |_| {
            // The master tells its worker; a SIGKILL of the master would
            // leave the worker behind.
            let _ = Command::new("nginx")
                .args(&args)
                .args(["-s", "stop"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        });
        let deadline = Instant::now() + START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.exited() {
                return Err(io::Error::other(format!(
                    "nginx exited at start ({status}): {}",
                    tail(&root.join("error.log"))
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "nginx did not listen on 127.0.0.1:{port} within {START_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Nginx {
            port,
            www,
            paths_file,
            _server: server,
        })
    }

    pub fn set_files(&self) -> io::Result<Vec<PathBuf>> {
        files_under(&self.www)
    }
}

/// nginx's arguments: its prefix, its error log before the configuration
/// is read (-e, nginx 1.19.5+: else /var/log/nginx), its configuration.
fn nginx_args(root: &Path, conf: &Path) -> Vec<std::ffi::OsString> {
    vec![
        "-p".into(),
        root.into(),
        "-e".into(),
        root.join("error.log").into(),
        "-c".into(),
        conf.into(),
    ]
}

/// Everything nginx writes stays in `root`; it serves `www` on
/// 127.0.0.1:`port`, one worker (two cores: the other for wrk and the
/// stream), sendfile as Debian's configuration has it, no access log.
pub fn nginx_conf(root: &Path, www: &Path, port: u16) -> String {
    let r = root.display();
    format!(
        "# ubio-bench neighbours: nginx of the scenario, removed with it.\n\
         worker_processes 1;\n\
         pid {r}/nginx.pid;\n\
         error_log {r}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   sendfile on;\n\
         \x20   keepalive_requests 100000;\n\
         \x20   client_body_temp_path {r}/tmp/body;\n\
         \x20   proxy_temp_path {r}/tmp/proxy;\n\
         \x20   fastcgi_temp_path {r}/tmp/fastcgi;\n\
         \x20   uwsgi_temp_path {r}/tmp/uwsgi;\n\
         \x20   scgi_temp_path {r}/tmp/scgi;\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       root {};\n\
         \x20   }}\n\
         }}\n",
        www.display()
    )
}

/// A load running against its service.
pub enum Running {
    Pgbench {
        child: Child,
        dir: PathBuf,
    },
    Wrk {
        stop: Arc<AtomicBool>,
        thread: JoinHandle<io::Result<Vec<WrkSlice>>>,
    },
}

/// What a load measured.
pub enum Measured {
    Pgbench(PgbenchLog),
    Wrk(Vec<WrkSlice>),
}

impl Measured {
    /// Its figures over [from_us, to_us).
    pub fn window(&self, from_us: u64, to_us: u64) -> WindowFigures {
        match self {
            Measured::Pgbench(log) => latency::pgbench_window(log, from_us, to_us),
            Measured::Wrk(slices) => latency::wrk_window(slices, from_us, to_us),
        }
    }

    /// Its seconds, from `origin_us`.
    pub fn seconds(&self, origin_us: u64) -> Vec<Second> {
        match self {
            Measured::Pgbench(log) => latency::pgbench_seconds(&log.txs, origin_us),
            Measured::Wrk(slices) => latency::wrk_seconds(slices, origin_us),
        }
    }
}

/// pgbench's log prefix in its directory.
const PGBENCH_LOG: &str = "tx";

/// Starts `load` with `clients` connections; its files go to `dir`.
pub fn start_load(
    load: Load,
    pg: Option<&Postgres>,
    web: Option<&Nginx>,
    clients: u32,
    dir: &Path,
) -> io::Result<Running> {
    std::fs::create_dir_all(dir).map_err(|e| path_context(e, "mkdir", dir))?;
    match load {
        Load::PgbenchRo | Load::PgbenchRw => {
            let pg = pg.ok_or_else(|| io::Error::other("pgbench without PostgreSQL"))?;
            let mut cmd = Command::new(pg.pgbench());
            cmd.current_dir(dir)
                .args(["-n", "-c", &clients.to_string()]);
            if load == Load::PgbenchRo {
                cmd.arg("-S");
            }
            // Stopped when the run ends: a day is "until then".
            cmd.args(["-j", "1", "-T", "86400", "-l", "--log-prefix", PGBENCH_LOG])
                .args(pg.conn_args())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let child = spawn_in(None, &mut cmd)?;
            Ok(Running::Pgbench {
                child,
                dir: dir.to_path_buf(),
            })
        }
        Load::Wrk => {
            let web = web.ok_or_else(|| io::Error::other("wrk without nginx"))?;
            let script = dir.join("random.lua");
            std::fs::write(&script, WRK_SCRIPT).map_err(|e| path_context(e, "write", &script))?;
            let url = format!("http://127.0.0.1:{}/", web.port);
            let paths = web.paths_file.clone();
            let stop = Arc::new(AtomicBool::new(false));
            let stopped = Arc::clone(&stop);
            let thread = std::thread::Builder::new()
                .name("neighbours-wrk".into())
                .spawn(move || wrk_slices(&script, &url, &paths, clients, &stopped))?;
            Ok(Running::Wrk { stop, thread })
        }
    }
}

/// One-second wrk runs back to back until `stop`.
fn wrk_slices(
    script: &Path,
    url: &str,
    paths: &Path,
    clients: u32,
    stop: &AtomicBool,
) -> io::Result<Vec<WrkSlice>> {
    let mut slices = Vec::new();
    let mut seed = 1u64;
    while !stop.load(Ordering::SeqCst) {
        let start = now_us();
        let mut cmd = Command::new("wrk");
        cmd.args([
            "-t",
            "1",
            "-c",
            &clients.to_string(),
            "-d",
            "1s",
            "--timeout",
            "10s",
            "-s",
        ])
        .arg(script)
        .arg(url)
        .arg("--")
        .arg(paths)
        .arg(seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let child = spawn_in(None, &mut cmd)?;
        let out = child.wait_with_output()?;
        let end = now_us();
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "wrk failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        slices.push(latency::parse_wrk(&text, start, end).map_err(io::Error::other)?);
        seed += 1;
    }
    Ok(slices)
}

impl Running {
    /// Stops the load and reads what it measured.
    pub fn finish(self) -> io::Result<Measured> {
        match self {
            Running::Pgbench { mut child, dir } => {
                if let Ok(Some(status)) = child.try_wait() {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = e.read_to_string(&mut err);
                    }
                    return Err(io::Error::other(format!(
                        "pgbench exited during the run ({status}): {}",
                        err.trim()
                    )));
                }
                // Its log is written through stdio: what a kill loses is
                // the last few milliseconds, after the window.
                let _ = child.kill();
                let _ = child.wait();
                let mut log = PgbenchLog::default();
                for f in files_under(&dir)? {
                    let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if !name.starts_with(&format!("{PGBENCH_LOG}.")) {
                        continue;
                    }
                    let text =
                        std::fs::read_to_string(&f).map_err(|e| path_context(e, "read", &f))?;
                    let part = latency::parse_pgbench_log(&text);
                    log.txs.extend(part.txs);
                    log.failed += part.failed;
                    std::fs::remove_file(&f).map_err(|e| path_context(e, "remove", &f))?;
                }
                if log.txs.is_empty() {
                    return Err(io::Error::other(format!(
                        "pgbench logged no transaction in {}",
                        dir.display()
                    )));
                }
                log.txs.sort_by_key(|t| t.end_us);
                Ok(Measured::Pgbench(log))
            }
            Running::Wrk { stop, thread } => {
                stop.store(true, Ordering::SeqCst);
                let slices = thread
                    .join()
                    .map_err(|_| io::Error::other("the wrk thread panicked"))??;
                Ok(Measured::Wrk(slices))
            }
        }
    }
}

/// Reads the files of a service's set from inside its cgroup (`find` and
/// `cat`), so that its page cache is charged there and the run starts with
/// the set cached.
pub fn warm(cg: &MemCgroup, dir: &Path) -> io::Result<()> {
    let mut cmd = Command::new("find");
    cmd.arg(dir)
        .args(["-type", "f", "-exec", "cat", "{}", "+"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = cg.spawn(&mut cmd)?.wait_with_output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "reading {} through ({}): {}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_writes_only_in_its_root() {
        let conf = nginx_conf(Path::new("/s/web"), Path::new("/s/web/www"), 8123);
        assert!(conf.contains("listen 127.0.0.1:8123;"));
        for line in conf.lines().filter(|l| l.contains('/')) {
            assert!(line.contains("/s/web"), "{line}");
        }
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
        let args = nginx_args(Path::new("/s/web"), Path::new("/s/web/nginx.conf"));
        assert!(args.iter().any(|a| a == "-e"), "{args:?}");
    }

    #[test]
    fn finds_files_recursively() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/b/x"), "1").unwrap();
        std::fs::write(d.path().join("y"), "2").unwrap();
        assert_eq!(files_under(d.path()).unwrap().len(), 2);
    }
}
