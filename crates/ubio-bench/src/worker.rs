//! Worker processes: the victim and the benchmark's workers run as children
//! (inside a memory cgroup), and talk to the parent in JSON lines.
//!
//! A binary exposes the worker as a hidden subcommand (`ubio __worker ...`)
//! that hands its arguments to [`main`]. The parent builds those arguments
//! with [`Job::to_args`], spawns the binary with piped stdin and stdout, and
//! reads the child's stdout with [`VictimClient`] or [`BenchClient`].
//!
//! The protocol, one JSON object per line on stdout, tagged by `event`:
//!
//! ```text
//! {"event":"ready","bytes":134217728,"seconds":0.41}             victim: hot file read through
//! {"event":"tick","t0":812.20,"t1":812.30,"reads":14210}          victim: reads in [t0, t1)
//! {"event":"error","message":"read /x/hot: Input/output error"}   either: why it failed
//! {"event":"bench_ready"}                                          bench: waiting for go (a group)
//! {"event":"bench_started","start_mono_secs":812.2}               bench: the clock starts
//! {"event":"bench_progress","t_mono_secs":812.3,"bytes":..,...}   bench: every 100 ms
//! {"event":"bench_done","bytes":..,"end_mono_secs":..,...}        bench: an EngineResult
//! ```
//!
//! On stdin the victim takes lines: `warm` (read the hot file through again,
//! then `ready`) and end of file (stop). So a victim whose parent dies stops
//! by itself. A bench worker of a group (the streams of one run spread over
//! several processes, [`EngineJob::wait_go`]) says `bench_ready` and waits
//! for a line on stdin before it starts; [`BenchClient::group`] sends it
//! once every worker of the group is ready ([`combine`]).
//!
//! Arguments: `victim [--tick-ms N] FILE`, `bench JOB` (an
//! [`EngineJob`] as JSON, for `ubio bench` and `ubio demo`) and `balloon
//! BYTES FLOOR` (the holder of a global-pressure balloon,
//! [`ubio_testenv::balloon::holder_main`], which speaks its own lines).

use crate::harness::engine::{self, EngineJob, EngineProgress, EngineResult, EngineStart};
use crate::victim::{self, Command, Ready, Tick};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub mod combine;

/// One line of a worker's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Ready(Ready),
    Tick(Tick),
    Error { message: String },
    BenchReady,
    BenchStarted(EngineStart),
    BenchProgress(EngineProgress),
    BenchDone(EngineResult),
}

impl Event {
    /// The event as one line of JSON, with the newline.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("worker events always serialize");
        s.push('\n');
        s
    }
}

/// Parses one line of worker output. The error quotes (the start of) the line.
pub fn parse_line(line: &str) -> Result<Event, String> {
    serde_json::from_str(line.trim_end()).map_err(|e| {
        let shown: String = line.chars().take(120).collect();
        format!("bad worker output line {shown:?}: {e}")
    })
}

/// What a worker process does.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    Victim {
        path: PathBuf,
        tick: Duration,
    },
    /// One run of `ubio bench` (see [`crate::harness::engine`]).
    Bench(Box<EngineJob>),
}

impl Job {
    /// The arguments after the worker subcommand.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        match self {
            Job::Victim { path, tick } => {
                a.push("victim".into());
                a.push("--tick-ms".into());
                a.push(tick.as_millis().max(1).to_string().into());
                a.push(path.into());
            }
            Job::Bench(job) => {
                a.push("bench".into());
                a.push(
                    serde_json::to_string(job)
                        .expect("jobs always serialize")
                        .into(),
                );
            }
        }
        a
    }

    /// Parses what [`Job::to_args`] makes.
    pub fn from_args(args: &[OsString]) -> Result<Job, String> {
        let (kind, rest) = args
            .split_first()
            .ok_or("missing worker kind (victim or bench)")?;
        if kind == "bench" {
            let [job] = rest else {
                return Err("bench takes one argument: the job as JSON".into());
            };
            let job = serde_json::from_str(&job.to_string_lossy())
                .map_err(|e| format!("bench: bad job: {e}"))?;
            return Ok(Job::Bench(Box::new(job)));
        }
        let mut opts: Vec<(String, String)> = Vec::new();
        let mut path: Option<PathBuf> = None;
        let mut it = rest.iter();
        while let Some(arg) = it.next() {
            let s = arg.to_string_lossy();
            if let Some(name) = s.strip_prefix("--") {
                let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
                opts.push((name.to_owned(), v.to_string_lossy().into_owned()));
            } else if path.replace(PathBuf::from(arg)).is_some() {
                return Err(format!("unexpected argument {s:?}"));
            }
        }
        let path = path.ok_or("missing FILE")?;
        let num = |v: &str, name: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("--{name}: not a number: {v:?}"))
        };
        match kind.to_str() {
            Some("victim") => {
                let mut tick = victim::DEFAULT_TICK;
                for (k, v) in &opts {
                    match k.as_str() {
                        "tick-ms" => tick = Duration::from_millis(num(v, k)?.max(1)),
                        _ => return Err(format!("victim: unknown option --{k}")),
                    }
                }
                Ok(Job::Victim { path, tick })
            }
            _ => Err(format!(
                "unknown worker kind {kind:?} (expected victim or bench)"
            )),
        }
    }
}

/// The worker side: parses `args`, runs the job with events on stdout
/// (and, for the victim, commands from stdin), and returns the exit code:
/// 0 when done, 1 after an `error` event, 2 for bad arguments.
pub fn main(args: &[OsString]) -> i32 {
    // The global-pressure balloon speaks its own lines (ubio_testenv::balloon).
    if args.first().is_some_and(|k| k == "balloon") {
        return ubio_testenv::balloon::holder_main(&args[1..]);
    }
    let job = match Job::from_args(args) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("worker: {e}");
            return 2;
        }
    };
    let stdout = io::stdout();
    let emit = |ev: &Event| -> io::Result<()> {
        let mut out = stdout.lock();
        out.write_all(ev.to_line().as_bytes())?;
        out.flush()
    };
    let result = match job {
        Job::Bench(job) if job.wait_go => emit(&Event::BenchReady)
            .and_then(|()| {
                let mut line = String::new();
                match io::stdin().lock().read_line(&mut line)? {
                    0 => Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the parent went away before go",
                    )),
                    _ => Ok(()),
                }
            })
            .and_then(|()| {
                engine::run(&job, |r| match r {
                    engine::Report::Started(s) => emit(&Event::BenchStarted(s)),
                    engine::Report::Progress(p) => emit(&Event::BenchProgress(p)),
                })
            })
            .and_then(|r| emit(&Event::BenchDone(r))),
        Job::Bench(job) => engine::run(&job, |r| match r {
            engine::Report::Started(s) => emit(&Event::BenchStarted(s)),
            engine::Report::Progress(p) => emit(&Event::BenchProgress(p)),
        })
        .and_then(|r| emit(&Event::BenchDone(r))),
        Job::Victim { path, tick } => {
            let (tx, rx) = mpsc::channel();
            // Detached: it blocks in read(stdin) until the parent writes or
            // closes its end; process exit ends it.
            std::thread::spawn(move || {
                for line in io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    if line.trim() == "warm" && tx.send(Command::Warm).is_err() {
                        return;
                    }
                }
                let _ = tx.send(Command::Stop);
            });
            victim::run(
                &path,
                tick,
                &rx,
                |r| emit(&Event::Ready(r)),
                |t| emit(&Event::Tick(t)),
            )
        }
    };
    match result {
        Ok(()) => 0,
        // The parent went away: nobody to tell.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 1,
        Err(e) => {
            let _ = emit(&Event::Error {
                message: e.to_string(),
            });
            1
        }
    }
}

/// The parent's side of a running victim (spawned with piped stdin and
/// stdout). A thread collects its ticks as they come.
pub struct VictimClient {
    child: Child,
    stdin: Option<ChildStdin>,
    ticks: Arc<Mutex<Vec<Tick>>>,
    /// `ready` events, an `error` event or the end of its output (as Err).
    events: Receiver<Result<Ready, String>>,
    reader: Option<JoinHandle<()>>,
}

impl VictimClient {
    /// Takes over `child`'s stdin and stdout.
    pub fn new(mut child: Child) -> io::Result<VictimClient> {
        let stdout = child.stdout.take().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "victim spawned without piped stdout",
            )
        })?;
        let stdin = child.stdin.take();
        let ticks = Arc::new(Mutex::new(Vec::new()));
        let (tx, events) = mpsc::channel();
        let sink = Arc::clone(&ticks);
        let reader = std::thread::Builder::new()
            .name("victim-reader".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let line = match line {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = tx.send(Err(format!("reading victim output: {e}")));
                            return;
                        }
                    };
                    match parse_line(&line) {
                        Ok(Event::Tick(t)) => {
                            sink.lock().unwrap_or_else(|e| e.into_inner()).push(t)
                        }
                        Ok(Event::Ready(r)) => {
                            let _ = tx.send(Ok(r));
                        }
                        Ok(Event::Error { message }) => {
                            let _ = tx.send(Err(format!("victim failed: {message}")));
                        }
                        Ok(_) => {}
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                }
                let _ = tx.send(Err("victim exited".into()));
            })?;
        Ok(VictimClient {
            child,
            stdin,
            ticks,
            events,
            reader: Some(reader),
        })
    }

    /// The victim's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the next `ready` (after start or [`VictimClient::warm`]).
    pub fn wait_ready(&mut self, timeout: Duration) -> io::Result<Ready> {
        match self.events.recv_timeout(timeout) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(msg)) => Err(io::Error::other(self.with_status(msg))),
            Err(RecvTimeoutError::Timeout) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("victim not ready after {timeout:?}"),
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err(io::Error::other(self.with_status("victim exited".into())))
            }
        }
    }

    /// Asks the victim to read its file through again and waits until it has.
    pub fn warm(&mut self, timeout: Duration) -> io::Result<Ready> {
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "victim spawned without piped stdin",
            )
        })?;
        stdin.write_all(b"warm\n").and_then(|()| stdin.flush())?;
        self.wait_ready(timeout)
    }

    /// The ticks received so far.
    pub fn ticks(&self) -> Vec<Tick> {
        self.ticks.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Closes its stdin (which stops it) and waits up to `timeout` for it to
    /// exit; kills it after that.
    pub fn stop(mut self, timeout: Duration) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break self.child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Ok(status)
    }

    fn with_status(&mut self, msg: String) -> String {
        match self.child.try_wait() {
            Ok(Some(s)) => format!("{msg} ({s})"),
            _ => msg,
        }
    }
}

/// The parent's side of a running bench worker (spawned with piped
/// stdout), or of a group of them that together run one run's streams
/// (spawned with piped stdin too, their jobs with `wait_go`): a thread per
/// worker forwards its events, and [`Combine`](combine::Combine) makes of a
/// group's events those one worker would have sent; the last one is `Err`
/// (an `error` event, a bad line, or the end of a worker's output).
pub struct BenchClient {
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
    events: Receiver<(usize, Result<Event, String>)>,
    combine: Mutex<combine::Combine>,
    readers: Vec<JoinHandle<()>>,
}

impl BenchClient {
    /// Takes over `child`'s stdout.
    pub fn new(child: Child) -> io::Result<BenchClient> {
        BenchClient::group(vec![child])
    }

    /// Takes over the stdout (and stdin, where piped) of every child.
    pub fn group(mut children: Vec<Child>) -> io::Result<BenchClient> {
        let (tx, events) = mpsc::channel();
        let mut readers = Vec::new();
        let mut stdins = Vec::new();
        for (i, child) in children.iter_mut().enumerate() {
            let stdout = child.stdout.take().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "bench worker spawned without piped stdout",
                )
            })?;
            stdins.extend(child.stdin.take());
            let tx = tx.clone();
            readers.push(
                std::thread::Builder::new()
                    .name(format!("bench-reader-{i}"))
                    .spawn(move || {
                        for line in BufReader::new(stdout).lines() {
                            let ev = match line {
                                Ok(l) => parse_line(&l),
                                Err(e) => Err(format!("reading bench worker output: {e}")),
                            };
                            let last = ev.is_err() || matches!(ev, Ok(Event::Error { .. }));
                            if tx.send((i, ev)).is_err() || last {
                                return;
                            }
                        }
                        let _ = tx.send((i, Err("the bench worker exited".into())));
                    })?,
            );
        }
        let n = children.len();
        Ok(BenchClient {
            children,
            stdins,
            events,
            combine: Mutex::new(combine::Combine::new(n)),
            readers,
        })
    }

    /// The first worker's pid.
    pub fn id(&self) -> u32 {
        self.children.first().map_or(0, Child::id)
    }

    /// The next event of the worker (or of the group, combined), or `None`
    /// if none came within `timeout`.
    pub fn next(&self, timeout: Duration) -> Option<Result<Event, String>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (i, ev) = match self.events.recv_timeout(left) {
                Ok(x) => x,
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => {
                    return Some(Err("the bench worker exited".into()))
                }
            };
            let step = self
                .combine
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .on(i, ev);
            match step {
                combine::Step::Wait => {}
                combine::Step::Go => {
                    if let Err(e) = self.go() {
                        return Some(Err(format!("starting the bench workers: {e}")));
                    }
                }
                combine::Step::Pass(ev) => return Some(Ok(ev)),
                combine::Step::Fail(e) => return Some(Err(e)),
            }
        }
    }

    /// Every worker of the group is ready: start them all.
    fn go(&self) -> io::Result<()> {
        for mut stdin in &self.stdins {
            stdin.write_all(b"go\n")?;
            stdin.flush()?;
        }
        Ok(())
    }

    /// Waits for every worker to exit (kills them first if `kill`); the
    /// first status that is not success, else success.
    pub fn wait(mut self, kill: bool) -> io::Result<ExitStatus> {
        if kill {
            for c in &mut self.children {
                let _ = c.kill();
            }
        }
        drop(std::mem::take(&mut self.stdins));
        let mut status = None;
        for c in &mut self.children {
            let s = c.wait()?;
            if status.is_none() || (!s.success() && status.is_some_and(|x: ExitStatus| x.success()))
            {
                status = Some(s);
            }
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        status.ok_or_else(|| io::Error::other("a group of no bench workers"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_event() {
        assert_eq!(
            parse_line(r#"{"event":"tick","t0":1.5,"t1":1.6,"reads":42}"#).unwrap(),
            Event::Tick(Tick {
                t0: 1.5,
                t1: 1.6,
                reads: 42
            })
        );
        assert_eq!(
            parse_line("{\"event\":\"ready\",\"bytes\":8192,\"seconds\":0.25}\n").unwrap(),
            Event::Ready(Ready {
                bytes: 8192,
                seconds: 0.25
            })
        );
        assert_eq!(
            parse_line(r#"{"event":"error","message":"boom"}"#).unwrap(),
            Event::Error {
                message: "boom".into()
            }
        );
    }

    #[test]
    fn events_round_trip() {
        for ev in [
            Event::Tick(Tick {
                t0: 0.1,
                t1: 0.2,
                reads: 7,
            }),
            Event::Ready(Ready {
                bytes: 1,
                seconds: 0.5,
            }),
            Event::Error {
                message: "x \"quoted\"\nnewline".into(),
            },
        ] {
            let line = ev.to_line();
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line}"
            );
            assert_eq!(parse_line(&line).unwrap(), ev);
        }
    }

    #[test]
    fn bad_lines_are_errors_that_quote_them() {
        for bad in [
            "",
            "hello",
            r#"{"event":"nope"}"#,
            r#"{"event":"tick","t0":1}"#,
        ] {
            let e = parse_line(bad).unwrap_err();
            assert!(e.contains("bad worker output line"), "{e}");
        }
    }

    #[test]
    fn job_args_round_trip() {
        let jobs = [Job::Victim {
            path: "/tmp/a b/hot".into(),
            tick: Duration::from_millis(250),
        }];
        for job in jobs {
            assert_eq!(Job::from_args(&job.to_args()).unwrap(), job);
        }
    }

    #[test]
    fn job_args_errors() {
        let a = |s: &[&str]| s.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(Job::from_args(&a(&[])).is_err());
        assert!(Job::from_args(&a(&["victim"]))
            .unwrap_err()
            .contains("missing FILE"));
        assert!(Job::from_args(&a(&["victim", "--tick-ms", "x", "f"]))
            .unwrap_err()
            .contains("not a number"));
        assert!(Job::from_args(&a(&["bench", "{"]))
            .unwrap_err()
            .contains("bad job"));
        assert!(Job::from_args(&a(&["dance", "f"]))
            .unwrap_err()
            .contains("unknown worker kind"));
        assert!(Job::from_args(&a(&["victim", "f", "g"]))
            .unwrap_err()
            .contains("unexpected"));
    }
}
