//! `ubio bench matrix`: seed 003's questions (what are the limits of
//! buffered I/O, how does it scale, how far is it from direct I/O, where is
//! the wall) as a product of axes, each point a benchmark of the runner.
//!
//! The axes: target (a filesystem on a loop device over the disk or over
//! /dev/shm, the seed's pmem) x workload x block size x threads x files per
//! thread x dataset as a fraction of the memory the run may use (a memory
//! cgroup's limit, or what the balloon of global pressure leaves) x mode.
//! Modes are the one axis measured side by side: the modes of a point run
//! in one benchmark, each round in a new random order (the runner's
//! schedule), so that every ratio between modes comes from one run. The
//! points themselves run in a random order drawn from the spec's seed, so
//! that a drift of the machine over the hours does not line up with an
//! axis; the seed's own job (seq-write, 2 MiB blocks, one job per CPU, ten
//! files each) can be added as a point per target and dataset, with fio's
//! cross-check of the buffered and O_DIRECT runs.
//!
//! Everything a matrix run learns goes into its directory: `matrix.json`
//! (the spec, every point's state and mode summaries, the memcpy ceiling),
//! rewritten after every point, and `points/<id>/report.json`, rewritten by
//! the runner after every run. Run the same command again and it goes on
//! with the points not done (a point interrupted half-way runs again from
//! its start); `--max-points` and `--max-minutes` end a session early, so a
//! long matrix can be run as several short ones.
//!
//! The points run through the runner's executor seam: [`run`] takes a
//! maker of executors (the process executor for real runs, the fake in the
//! tests), and never measures anything itself but the memcpy ceiling.

pub mod ab;
pub mod ceiling;
pub mod history;
pub mod record;
mod run;

pub use run::{run, Outcome};

use super::mode::{BenchMode, WorkloadKind};
use super::runner::executor::Executor;
use super::runner::{self, RunOptions};
use super::schedule;
use super::schema::{Backing, Config, GlobalPressure, Target, Workload};
use crate::rng::SplitMix64;
use record::{MatrixRecord, PointState};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use ubio::size::human as human_bytes;
use ubio::BackendKind;
use ubio_testenv::scratchfs::FsKind;

const MIB: u64 = 1 << 20;

/// A target of the matrix: a filesystem made on a loop device for each
/// point, its backing file on the disk (loop direct I/O) or in /dev/shm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSpec {
    /// "ext4", "xfs", "btrfs" (f2fs in the guests).
    pub filesystem: String,
    pub backing: Backing,
}

impl TargetSpec {
    /// The point's target, sized for `need` bytes of files (plus a quarter).
    fn target(&self, need: u64) -> io::Result<Target> {
        let kind: FsKind = self.filesystem.parse()?;
        Ok(Target::Loop {
            filesystem: self.filesystem.clone(),
            backing: self.backing,
            size_bytes: (need + need / 4).max(kind.min_size_bytes()),
            throttle_mb_per_s: None,
        })
    }
}

impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backing = match self.backing {
            Backing::Shm => "shm",
            Backing::Disk => "disk",
        };
        write!(f, "{}/{backing}", self.filesystem)
    }
}

impl FromStr for TargetSpec {
    type Err = String;
    /// "ext4/shm", "xfs/disk".
    fn from_str(s: &str) -> Result<TargetSpec, String> {
        let bad = || format!("target '{s}': expected FS/BACKING, such as ext4/shm or xfs/disk");
        let (fs, backing) = s.split_once('/').ok_or_else(bad)?;
        let kind: FsKind = fs
            .parse()
            .map_err(|e: io::Error| format!("target '{s}': {e}"))?;
        let backing = match backing {
            "shm" => Backing::Shm,
            "disk" => Backing::Disk,
            _ => return Err(bad()),
        };
        Ok(TargetSpec {
            filesystem: kind.name().to_owned(),
            backing,
        })
    }
}

/// Where the memory pressure of every point comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Pressure {
    /// A memory cgroup of the spec's memory: the reading task reclaims.
    Cgroup,
    /// No cgroup: a balloon of locked memory leaves the spec's memory to
    /// the whole machine (kswapd reclaims), never taking MemAvailable below
    /// the floor.
    Global { floor_bytes: u64 },
}

/// How a point's streams (its threads) run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Streams {
    /// Threads of one worker process.
    Threads,
    /// A worker process each.
    Processes,
}

impl FromStr for Streams {
    type Err = String;
    fn from_str(s: &str) -> Result<Streams, String> {
        match s {
            "threads" => Ok(Streams::Threads),
            "processes" => Ok(Streams::Processes),
            _ => Err(format!("'{s}': expected threads or processes")),
        }
    }
}

/// Which files a point's streams work on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Files {
    /// Files of their own.
    Own,
    /// Each its own region of one shared file.
    Shared,
}

impl FromStr for Files {
    type Err = String;
    fn from_str(s: &str) -> Result<Files, String> {
        match s {
            "own" => Ok(Files::Own),
            "shared" => Ok(Files::Shared),
            _ => Err(format!("'{s}': expected own or shared")),
        }
    }
}

fn threads_only() -> Vec<Streams> {
    vec![Streams::Threads]
}

fn own_files() -> Vec<Files> {
    vec![Files::Own]
}

/// What a matrix measures: its axes and how each point runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub targets: Vec<TargetSpec>,
    pub workloads: Vec<WorkloadKind>,
    pub blocks_bytes: Vec<u64>,
    pub threads: Vec<u32>,
    /// How the streams run: threads of one process, or processes.
    #[serde(default = "threads_only")]
    pub streams: Vec<Streams>,
    /// Which files the streams work on: their own, or a shared one.
    #[serde(default = "own_files")]
    pub files: Vec<Files>,
    pub files_per_thread: Vec<u32>,
    /// Datasets as fractions of `memory_bytes` (0.5, 1, 2, ...).
    pub dataset_fractions: Vec<f64>,
    /// Measured side by side at every point (a mode that cannot run a
    /// point's workload, or cannot run there, is left out of that point).
    pub modes: Vec<BenchMode>,
    /// The memory the run may use: the cgroup's limit, or what the balloon
    /// leaves.
    pub memory_bytes: u64,
    pub pressure: Pressure,
    pub rounds: u32,
    /// Requests in flight per thread of the io_uring modes.
    pub queue_depth: u32,
    /// How long a random workload's run lasts.
    pub random_secs: f64,
    /// Jobs of the seed's own point (its `--numjobs=$(nproc)`); None: no
    /// seed point.
    pub seed_jobs: Option<u32>,
    /// Seed of the points' order and of every point's rounds.
    pub order_seed: u64,
}

/// The seed's job (seed 003): 2 MiB blocks, ten files per job.
pub const SEED_BLOCK: u64 = 2 * MIB;
pub const SEED_FILES: u32 = 10;

impl Spec {
    /// The matrix on `cpus` CPUs: seq-write and seq-read x 1 MiB x
    /// threads 1, 2, 4 (up to 2 x the CPUs) x one file x 0.5, 1 and 2 times
    /// the memory x buffered, dontcache, odirect, ubio, on ext4 over the
    /// disk and over /dev/shm, 3 rounds.
    pub fn standard(cpus: u32, memory_bytes: u64, pressure: Pressure, order_seed: u64) -> Spec {
        let threads = std::iter::successors(Some(1u32), |t| Some(t * 2))
            .take_while(|t| *t <= 2 * cpus.max(1))
            .collect();
        Spec {
            targets: vec![
                TargetSpec {
                    filesystem: "ext4".into(),
                    backing: Backing::Disk,
                },
                TargetSpec {
                    filesystem: "ext4".into(),
                    backing: Backing::Shm,
                },
            ],
            workloads: vec![WorkloadKind::SeqWrite, WorkloadKind::SeqRead],
            blocks_bytes: vec![MIB],
            threads,
            streams: threads_only(),
            files: own_files(),
            files_per_thread: vec![1],
            dataset_fractions: vec![0.5, 1.0, 2.0],
            modes: vec![
                BenchMode::Buffered,
                BenchMode::Dontcache,
                BenchMode::Odirect,
                BenchMode::Ubio(BackendKind::Auto),
            ],
            memory_bytes,
            pressure,
            rounds: 3,
            queue_depth: 16,
            random_secs: 10.0,
            seed_jobs: None,
            order_seed,
        }
    }

    /// The release matrix: small and fixed, so that its figures can be
    /// tracked from release to release (docs/results.md's history table,
    /// "Release tracking").
    pub fn release(order_seed: u64) -> Spec {
        Spec {
            targets: vec![TargetSpec {
                filesystem: "ext4".into(),
                backing: Backing::Shm,
            }],
            threads: vec![1, 2],
            dataset_fractions: vec![2.0],
            ..Spec::standard(1, 512 * MIB, Pressure::Cgroup, order_seed)
        }
    }

    /// Refuses a spec that cannot make sense, saying which axis is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let empty = [
            ("targets", self.targets.is_empty()),
            ("workloads", self.workloads.is_empty()),
            ("block sizes", self.blocks_bytes.is_empty()),
            ("threads", self.threads.is_empty()),
            ("streams", self.streams.is_empty()),
            ("files", self.files.is_empty()),
            ("files per thread", self.files_per_thread.is_empty()),
            ("datasets", self.dataset_fractions.is_empty()),
            ("modes", self.modes.is_empty()),
        ];
        if let Some((axis, _)) = empty.iter().find(|(_, e)| *e) {
            return Err(format!("the matrix has no {axis}"));
        }
        if let Some(f) = self
            .dataset_fractions
            .iter()
            .find(|f| !(f.is_finite() && **f > 0.0 && **f <= 64.0))
        {
            return Err(format!(
                "dataset fraction {f}: expected a number above 0 and at most 64"
            ));
        }
        if self.memory_bytes < 64 * MIB {
            return Err(format!(
                "{} of memory is too little for a point: give at least 64 MiB",
                human_bytes(self.memory_bytes)
            ));
        }
        if self.threads.contains(&0) || self.files_per_thread.contains(&0) || self.rounds == 0 {
            return Err("threads, files per thread and rounds must be at least 1".into());
        }
        if self.seed_jobs == Some(0) {
            return Err("the seed point needs at least one job".into());
        }
        for (what, list) in [
            ("target", dupes(&self.targets)),
            ("workload", dupes(&self.workloads)),
            ("block size", dupes(&self.blocks_bytes)),
            ("thread count", dupes(&self.threads)),
            ("streams", dupes(&self.streams)),
            ("files", dupes(&self.files)),
            ("files per thread", dupes(&self.files_per_thread)),
            ("dataset fraction", dupes(&self.dataset_fractions)),
        ] {
            if let Some(d) = list {
                return Err(format!("{what} {d} is listed twice"));
            }
        }
        Ok(())
    }

    /// Every point, in the order they run (shuffled by `order_seed`).
    pub fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for target in &self.targets {
            for &kind in &self.workloads {
                for &block in &self.blocks_bytes {
                    for &threads in &self.threads {
                        for &files in &self.files_per_thread {
                            for &fraction in &self.dataset_fractions {
                                for &streams in &self.streams {
                                    for &sharing in &self.files {
                                        // One stream in a process of its own
                                        // is the threads' point.
                                        if threads == 1 && streams == Streams::Processes {
                                            continue;
                                        }
                                        let mut p = self.point(
                                            target, kind, block, threads, files, fraction, false,
                                        );
                                        p.streams(streams, sharing);
                                        points.push(p);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if let Some(jobs) = self.seed_jobs {
                for &fraction in &self.dataset_fractions {
                    points.push(self.point(
                        target,
                        WorkloadKind::SeqWrite,
                        SEED_BLOCK,
                        jobs,
                        SEED_FILES,
                        fraction,
                        true,
                    ));
                }
            }
        }
        let mut rng = SplitMix64(self.order_seed);
        schedule::shuffle(&mut rng, &mut points);
        points
    }

    #[allow(clippy::too_many_arguments)]
    fn point(
        &self,
        target: &TargetSpec,
        kind: WorkloadKind,
        block: u64,
        threads: u32,
        files: u32,
        fraction: f64,
        seed_job: bool,
    ) -> Point {
        let files_total = u64::from(threads) * u64::from(files);
        let bytes = ((self.memory_bytes as f64 * fraction) as u64 / MIB * MIB)
            .max(files_total * block.max(MIB));
        let workload = Workload {
            kind,
            block_bytes: block,
            threads,
            files_per_thread: files,
            dataset_bytes: bytes,
            duration_secs: matches!(kind, WorkloadKind::RandRead | WorkloadKind::RandWrite)
                .then_some(self.random_secs),
            queue_depth: self.queue_depth,
            seed: 1,
            processes: 1,
            shared_file: false,
        };
        let name = if seed_job { "seed003" } else { kind.name() };
        let id = format!(
            "{}-{}_{name}_bs{}_t{threads}_f{files}_x{fraction}",
            target.filesystem,
            match target.backing {
                Backing::Shm => "shm",
                Backing::Disk => "disk",
            },
            block_label(block)
        );
        Point {
            id,
            target: target.clone(),
            workload,
            dataset_fraction: fraction,
            seed_job,
        }
    }

    /// The benchmark of `point`.
    pub fn config(&self, point: &Point) -> io::Result<Config> {
        let w = &point.workload;
        let (memory_limit_bytes, global_pressure) = match self.pressure {
            Pressure::Cgroup => (Some(self.memory_bytes), None),
            Pressure::Global { floor_bytes } => (
                None,
                Some(GlobalPressure {
                    leave_bytes: self.memory_bytes,
                    floor_bytes,
                }),
            ),
        };
        Ok(Config {
            workload: w.clone(),
            modes: self
                .modes
                .iter()
                .copied()
                .filter(|m| m.supports(w.kind))
                .collect(),
            rounds: self.rounds,
            target: point
                .target
                .target(runner::target::space_needed(w, None, global_pressure))?,
            memory_limit_bytes,
            victim_hot_bytes: None,
            global_pressure,
        })
    }
}

/// The first item listed twice, as text.
fn dupes<T: PartialEq + fmt::Debug>(list: &[T]) -> Option<String> {
    list.iter()
        .enumerate()
        .find(|(i, x)| list[..*i].contains(x))
        .map(|(_, x)| format!("{x:?}"))
}

/// "1M", "64K", "2M", "4096".
pub fn block_label(bytes: u64) -> String {
    if bytes.is_multiple_of(MIB) {
        format!("{}M", bytes / MIB)
    } else if bytes.is_multiple_of(1024) {
        format!("{}K", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// One point of the matrix: one benchmark of every mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// "ext4-shm_seq-read_bs1M_t2_f1_x0.5": also its directory under points/.
    pub id: String,
    pub target: TargetSpec,
    pub workload: Workload,
    /// The dataset as a fraction of the spec's memory.
    pub dataset_fraction: f64,
    /// The seed's own job, cross-checked by fio.
    #[serde(default)]
    pub seed_job: bool,
}

impl Point {
    /// Makes the point's streams processes and its files shared, as asked
    /// (its id says so; the defaults keep the ids matrices always had).
    fn streams(&mut self, streams: Streams, files: Files) {
        if streams == Streams::Processes {
            self.workload.processes = self.workload.threads;
            self.id.push_str("_procs");
        }
        if files == Files::Shared {
            self.workload.shared_file = true;
            self.id.push_str("_shared");
        }
    }

    /// "ext4/shm seq-read, 1 MiB x 2 threads x 1 file, 0.5x = 512.0 MiB".
    pub fn describe(&self) -> String {
        let w = &self.workload;
        let plural =
            |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "{} {}{}, {} x {}{} x {}, {}x = {}",
            self.target,
            w.kind,
            if self.seed_job {
                " (seed 003's job)"
            } else {
                ""
            },
            human_bytes(w.block_bytes),
            plural(w.threads, "thread", "threads"),
            match w.streams_note() {
                n if n.is_empty() => n,
                n => format!(" ({n})"),
            },
            plural(w.files_per_thread, "file", "files"),
            self.dataset_fraction,
            human_bytes(w.dataset_bytes)
        )
    }

    /// The passes over the dataset a point makes: every mode's runs, fio's
    /// runs of the modes it mirrors (seed points), the warm-up, and the
    /// untimed write of the dataset that a reading workload needs first.
    pub fn passes(&self, config: &Config) -> u64 {
        let modes = config.modes.len() as u64;
        let fio = if self.seed_job {
            config
                .modes
                .iter()
                .filter(|m| m.caps().fio.is_some_and(|j| !j.uncached))
                .count() as u64
        } else {
            0
        };
        let write_first = u64::from(!matches!(self.workload.kind, WorkloadKind::SeqWrite));
        u64::from(config.rounds) * (modes + fio) + 1 + write_first
    }

    /// Bytes a point moves in all its passes.
    pub fn bytes_moved(&self, config: &Config) -> u64 {
        self.passes(config) * self.workload.kind.copies() * self.workload.dataset_bytes
    }

    fn gb_moved(&self, spec: &Spec) -> io::Result<f64> {
        Ok(self.bytes_moved(&spec.config(self)?) as f64 / 1e9)
    }
}

/// How a matrix session runs.
#[derive(Debug, Clone)]
pub struct MatrixOptions {
    /// The runner's options for every point (`out_dir`, `fio` and
    /// `order_seed` are set per point).
    pub run: RunOptions,
    /// The matrix's directory (matrix.json, points/, the exports).
    pub out_dir: PathBuf,
    /// Run at most this many points in this session.
    pub max_points: Option<usize>,
    /// Start no point that the estimate says would end after this many
    /// seconds of the session (the first point always runs).
    pub max_secs: Option<f64>,
    /// Measure the memcpy ceiling (once per matrix) with buffers of this
    /// size per thread; None: not measured.
    pub ceiling_bytes: Option<u64>,
}

/// Makes the executor of a point (the process executor; the tests' fake)
/// from the point's own runner options (`fio` is set at the seed's points:
/// the executor runs fio's jobs only if it is made with it).
pub type MakeExecutor<'a> = dyn FnMut(&Point, &RunOptions) -> io::Result<Box<dyn Executor>> + 'a;

/// Where an estimate's rate comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub points: usize,
    pub runs: u64,
    /// Over all passes (runs, fio, warm-up, dataset writes).
    pub bytes: u64,
    pub secs: f64,
    /// "at the rate of the 4 points done (2.1 s per GB moved)", or the
    /// assumption used before any point ran.
    pub basis: String,
}

/// Seconds per GB moved assumed before any point of a target ran: what a
/// point took here on ext4 over the disk, overheads included (2026-11-26).
pub const ASSUMED_SECS_PER_GB: f64 = 2.0;

/// Seconds per GB moved, learnt from the points done.
pub(super) struct Rates {
    /// Over every point done, and how many.
    overall: Option<(f64, usize)>,
    per_target: Vec<(TargetSpec, f64)>,
}

impl Rates {
    fn of(record: &MatrixRecord) -> io::Result<Rates> {
        let mut sums: Vec<(TargetSpec, f64, f64)> = Vec::new();
        for p in &record.points {
            if let (PointState::Done, Some(wall)) = (&p.state, p.wall_secs) {
                let gb = p.point.gb_moved(&record.spec)?;
                match sums.iter_mut().find(|(t, ..)| *t == p.point.target) {
                    Some((_, secs, moved)) => {
                        *secs += wall;
                        *moved += gb;
                    }
                    None => sums.push((p.point.target.clone(), wall, gb)),
                }
            }
        }
        let (secs, moved) = sums
            .iter()
            .fold((0.0, 0.0), |(s, m), (_, a, b)| (s + a, m + b));
        let done = record.done();
        Ok(Rates {
            overall: (moved > 0.0).then(|| (secs / moved, done)),
            per_target: sums
                .into_iter()
                .filter(|(.., moved)| *moved > 0.0)
                .map(|(t, secs, moved)| (t, secs / moved))
                .collect(),
        })
    }

    fn secs_per_gb(&self, target: &TargetSpec) -> f64 {
        self.per_target
            .iter()
            .find(|(t, _)| t == target)
            .map(|(_, r)| *r)
            .or(self.overall.map(|(r, _)| r))
            .unwrap_or(ASSUMED_SECS_PER_GB)
    }

    fn basis(&self) -> String {
        match self.overall {
            Some((rate, n)) => format!(
                "at the rate of the {n} point(s) done ({rate:.1} s per GB moved over all; per target where one ran)"
            ),
            None => format!("assuming {ASSUMED_SECS_PER_GB} s per GB moved (no point done yet)"),
        }
    }
}

/// The run time of the points of `record` that are not done, at the rate of
/// the points done (per target, else over all; before any, an assumed
/// [`ASSUMED_SECS_PER_GB`]).
pub fn estimate(record: &MatrixRecord) -> io::Result<Estimate> {
    let rates = Rates::of(record)?;
    let mut e = Estimate {
        points: 0,
        runs: 0,
        bytes: 0,
        secs: 0.0,
        basis: rates.basis(),
    };
    for p in record.points.iter().filter(|p| p.state != PointState::Done) {
        let config = record.spec.config(&p.point)?;
        e.points += 1;
        e.runs += u64::from(config.rounds) * config.modes.len() as u64;
        e.bytes += p.point.bytes_moved(&config);
        e.secs += rates.secs_per_gb(&p.point.target) * p.point.gb_moved(&record.spec)?;
    }
    Ok(e)
}

/// "1 h 05 min", "12 min", "40 s".
pub fn duration_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=89 => format!("{s} s"),
        90..=3599 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600 + 30) / 60),
    }
}

impl Spec {
    /// The thread counts of the points, the seed point's jobs included
    /// (where the memcpy ceiling is measured).
    pub fn threads_with_seed(&self) -> Vec<u32> {
        let mut t = self.threads.clone();
        if let Some(j) = self.seed_jobs.filter(|j| !t.contains(j)) {
            t.push(j);
        }
        t.sort_unstable();
        t
    }
}

#[cfg(test)]
mod tests;
