//! The benchmark's results, as written to JSON: one [`Report`] per
//! `ubio bench run`, rewritten after every run so an interrupted benchmark
//! keeps what it measured.
//!
//! Units are in the field names (`_bytes`, `_secs`, `_mb_per_s`, `_pages`);
//! MB is 10^6 bytes, as fio and dd print it. Values the machine cannot give
//! (cgroup v1 has no per-cgroup reclaim counters, a read has no time to
//! durability) are `null`, never 0. Every exporter and `ubio bench compare`
//! reads only this file, so a report can be re-rendered or compared on
//! another machine.
//!
//! [`SCHEMA_VERSION`] goes up when a field changes meaning or goes away;
//! adding an optional field does not change it.

use super::mode::{BenchMode, WorkloadKind};
use super::schedule::Schedule;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `schema` field of every report.
pub const SCHEMA_NAME: &str = "ubio-bench";
/// The version of the layout below.
pub const SCHEMA_VERSION: u32 = 1;

/// One benchmark: where and how it ran, every run with its per-second
/// samples, and the summaries per mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA_NAME`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    pub environment: Environment,
    pub config: Config,
    /// The victim alone, before any run (null without a victim).
    pub victim_solo: Option<VictimSolo>,
    /// The balloon of a global-pressure run (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<PressureRecord>,
    /// The order seed and every round's order of the modes (null in
    /// reports from before the order was randomized).
    #[serde(default)]
    pub schedule: Option<Schedule>,
    /// Every measured run, in the order it ran (round 1 of every mode, in
    /// `schedule`'s order, then round 2, ...).
    pub runs: Vec<Run>,
    /// One entry per mode, in the order of `config.modes`.
    pub modes: Vec<ModeSummary>,
    /// fio's figures for the jobs it can run the same way.
    #[serde(default)]
    pub fio: Vec<FioCheck>,
    /// Things the reader should know (a dataset that fits in memory, a
    /// mode that could not run here, a fio disagreement, ...), each saying
    /// what to do about it.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The modes asked for that could not run here, and why (each is also
    /// a warning). A comparison leaves them out instead of calling their
    /// missing runs a regression.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// Seconds since the epoch when the benchmark started.
    pub started_unix_secs: u64,
    /// Wall time so far (the whole benchmark once it is complete).
    pub wall_secs: f64,
    /// False while runs are still to come (the file is rewritten after each).
    pub complete: bool,
}

/// A mode asked for that could not run here (O_DIRECT refused, a kernel
/// without RWF_DONTCACHE, no ubio binary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    pub mode: BenchMode,
    pub why: String,
}

impl LeftOut {
    /// The warning that says it: "odirect left out: O_DIRECT is refused here".
    pub fn warning(&self) -> String {
        format!("{} left out: {}", self.mode, self.why)
    }
}

/// The machine, the software and the storage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// "ubio 0.1.0".
    pub tool_version: String,
    /// `git describe --always --dirty` of the source tree, if known.
    pub git_commit: Option<String>,
    /// uname -r.
    pub kernel: String,
    pub hostname: String,
    /// "model name" of /proc/cpuinfo.
    pub cpu_model: String,
    pub cpus: u32,
    pub mem_total_bytes: u64,
    /// "v1" or "v2".
    pub cgroup_version: String,
    /// The filesystem of the dataset ("ext4", "xfs", "btrfs", "tmpfs", ...).
    pub filesystem: String,
    /// What is under it: "loop on /dev/shm", "loop (direct I/O) on /dev/vda1",
    /// "/dev/vda1", ...
    pub device: String,
    /// `ubio probe --json` of the dataset directory.
    pub probe: serde_json::Value,
    /// Versions of the external tools used (fio, cp, rsync, nocache, dd).
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, String>,
    /// What the machine runs on (VM, container), as far as it can tell.
    #[serde(default)]
    pub virtualization: Virtualization,
    /// The parameters of free page reporting (/sys/module/page_reporting),
    /// null where the kernel has none: then buffered I/O takes its pages
    /// as bare metal does.
    #[serde(default)]
    pub free_page_reporting: Option<std::collections::BTreeMap<String, String>>,
    /// The data-path settings the ubio modes ran with, those set
    /// (UBIO_DIRECT_READS, ...: `harness::data_path`); empty: the
    /// library's defaults.
    #[serde(default)]
    pub ubio_settings: std::collections::BTreeMap<String, String>,
}

/// Where the machine runs, from every source there is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Virtualization {
    /// In a sentence: "Firecracker (kvm) VM, in a docker container",
    /// "none found (bare metal?)".
    pub summary: String,
    /// `systemd-detect-virt --vm` ("kvm"; null when absent or "none").
    pub vm: Option<String>,
    /// `systemd-detect-virt --container`.
    pub container: Option<String>,
    /// /sys/class/dmi/id/sys_vendor and product_name (Firecracker has no DMI).
    pub dmi: Option<String>,
    /// The `hypervisor` flag of /proc/cpuinfo: running under one.
    pub cpuinfo_hypervisor: bool,
    /// A hypervisor named by the DMI or the kernel command line
    /// ("Firecracker"), where one is.
    pub hypervisor: Option<String>,
}

/// What was asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub workload: Workload,
    /// In the order they run within a round.
    pub modes: Vec<BenchMode>,
    /// Measured rounds (each runs every mode once).
    pub rounds: u32,
    pub target: Target,
    /// Limit of the memory cgroup the workload (and victim) run in; null
    /// when not confined.
    pub memory_limit_bytes: Option<u64>,
    /// Size of the victim's hot file; null for no victim.
    pub victim_hot_bytes: Option<u64>,
    /// Global memory pressure instead of a memory cgroup: a balloon of
    /// locked memory leaves the run only so much of the machine's memory,
    /// and kswapd reclaims as on a machine whose RAM is full (absent: none;
    /// then `memory_limit_bytes` is the cgroup's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_pressure: Option<GlobalPressure>,
}

/// How much memory a global-pressure run leaves (see
/// `ubio_testenv::balloon`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalPressure {
    /// MemAvailable the balloon leaves for the run (and everyone else).
    pub leave_bytes: u64,
    /// MemAvailable the balloon never takes the machine below: it gives
    /// memory back when others need it.
    pub floor_bytes: u64,
}

/// What the balloon of a global-pressure run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PressureRecord {
    /// Locked by the balloon once inflated.
    pub balloon_bytes: u64,
    pub leave_bytes: u64,
    pub floor_bytes: u64,
    /// /proc/meminfo MemAvailable before and right after inflating.
    pub available_before_bytes: u64,
    pub available_after_bytes: u64,
    /// How long inflating took (fresh memory is slow to fault in on a VM).
    pub inflate_secs: f64,
    /// What it still held at the end: less than `balloon_bytes` when it
    /// gave memory back to keep the floor (`shrinks` says when).
    pub held_at_end_bytes: u64,
    /// The balloon's own lines about memory it gave back
    /// ("shrunk HELD AVAILABLE FLOOR").
    #[serde(default)]
    pub shrinks: Vec<String>,
}

/// The I/O pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub kind: WorkloadKind,
    /// Request size.
    pub block_bytes: u64,
    pub threads: u32,
    pub files_per_thread: u32,
    /// Total over all files.
    pub dataset_bytes: u64,
    /// Stop a run after this long even if the dataset is not done (random
    /// workloads need it); null: until the dataset is done.
    pub duration_secs: Option<f64>,
    /// Requests in flight per thread for the io_uring modes (others: 1).
    pub queue_depth: u32,
    /// Seed of the random offsets.
    pub seed: u64,
    /// The `threads` streams run in this many worker processes, `threads /
    /// processes` threads each (1: every stream a thread of one process).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub processes: u32,
    /// Every stream works on its own region of one shared file instead of
    /// files of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_file: bool,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Workload {
    /// How the streams are laid out, when not as they always were (threads
    /// of one process, a file each): "4 processes", "shared file", "4
    /// processes, shared file"; empty otherwise.
    pub fn streams_note(&self) -> String {
        let mut parts = Vec::new();
        if self.processes > 1 {
            parts.push(format!("{} processes", self.processes));
        }
        if self.shared_file {
            parts.push("shared file".to_owned());
        }
        parts.join(", ")
    }

    /// Which threads (streams) worker process `i` of `self.processes` runs.
    pub fn process_lanes(&self, i: u32) -> std::ops::Range<u32> {
        let per = self.threads / self.processes.max(1);
        i * per..(i + 1) * per
    }
}

/// Where the dataset lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Target {
    /// An existing directory (the harness makes a subdirectory and removes it).
    Dir { path: PathBuf },
    /// A filesystem the harness makes on a loop device and removes.
    Loop {
        /// "ext4", "xfs" or "btrfs".
        filesystem: String,
        /// Where the backing file is.
        backing: Backing,
        size_bytes: u64,
        /// blkio throttle of reads and writes, if any.
        throttle_mb_per_s: Option<f64>,
    },
}

/// The backing file of a loop device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backing {
    /// A file in /dev/shm: a RAM-fast device (like seed 003's pmem).
    Shm,
    /// A file on the disk, with loop direct I/O (no double caching).
    Disk,
}

/// The victim alone: a process re-reading a hot file that fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VictimSolo {
    /// Per-second reads.
    pub ops_per_s: Summary,
}

/// One measured run of one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub mode: BenchMode,
    /// 1-based.
    pub round: u32,
    /// What moved the data ("std", the backend ubio chose, "RWF_DONTCACHE",
    /// "O_DIRECT", the tool's command line) and why.
    pub backend: String,
    pub reason: String,
    /// Set when the run failed; its samples are kept, its summary is not
    /// used in the mode summaries.
    pub error: Option<String>,
    /// Bytes moved (read, written, or copied: counted once).
    pub bytes: u64,
    /// From the first request to the last (to durability for writes).
    pub secs: f64,
    /// One sample per second of the run (the last may be shorter).
    pub samples: Vec<Sample>,
    pub summary: RunSummary,
    /// `ubio::Stats` per file at close, for ubio modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubio_stats: Option<serde_json::Value>,
    /// Backed modes: the anonymous memory faulted in and released right
    /// before the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefaulted_bytes: Option<u64>,
}

/// One interval (normally one second) of a run. Counters are the
/// difference over the interval; levels are the value at its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// End of the interval, seconds since the run started.
    pub t_secs: f64,
    /// Length of the interval.
    pub interval_secs: f64,
    /// Bytes the workload moved in the interval, and as a rate.
    pub bytes: u64,
    pub mb_per_s: f64,
    /// CPU of the workload process(es) in the interval.
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
    /// Reclaim in the interval, whole machine (/proc/vmstat).
    pub pgscan_kswapd: u64,
    pub pgscan_direct: u64,
    pub pgsteal_kswapd: u64,
    pub pgsteal_direct: u64,
    /// Reclaim in the interval inside the memory cgroup (cgroup v2's
    /// memory.stat pgscan/pgsteal; null on v1, which has no such counters).
    pub cgroup_pgscan: Option<u64>,
    pub cgroup_pgsteal: Option<u64>,
    /// Pages reclaimed in the interval by memory cgroup limit reclaim (any
    /// cgroup), which /proc/vmstat leaves out: counted from the
    /// vmscan:mm_vmscan_memcg_reclaim_end tracepoint; null where tracefs is
    /// unavailable.
    #[serde(default)]
    pub memcg_limit_reclaimed_pages: Option<u64>,
    /// CPU seconds all kswapd threads used in the interval.
    pub kswapd_cpu_secs: f64,
    /// Levels, whole machine (/proc/meminfo Cached, Dirty, Writeback).
    pub cached_bytes: u64,
    pub dirty_bytes: u64,
    pub writeback_bytes: u64,
    /// /proc/meminfo MemFree at the interval's end (null in reports from
    /// before it was sampled).
    #[serde(default)]
    pub free_bytes: Option<u64>,
    /// Page cache charged to the memory cgroup (memory.stat), if confined.
    pub cgroup_cached_bytes: Option<u64>,
    /// Levels, the dataset files only (cachestat, summed over the files;
    /// dirty and writeback null where the kernel cannot tell them: no
    /// cachestat before Linux 6.5, where mincore counts the cached pages).
    pub dataset_cached_bytes: u64,
    pub dataset_dirty_bytes: Option<u64>,
    pub dataset_writeback_bytes: Option<u64>,
    /// The victim's reads per second in the interval (null without one).
    pub victim_ops_per_s: Option<f64>,
}

impl Sample {
    /// A sample in which the workload moved `bytes` and nothing else
    /// happened: zero counters and levels (the tests' and the fake
    /// executor's runs start from it).
    pub fn moved(t_secs: f64, interval_secs: f64, bytes: u64) -> Sample {
        Sample {
            t_secs,
            interval_secs,
            bytes,
            mb_per_s: bytes as f64 / 1e6 / interval_secs,
            cpu_user_secs: 0.0,
            cpu_sys_secs: 0.0,
            pgscan_kswapd: 0,
            pgscan_direct: 0,
            pgsteal_kswapd: 0,
            pgsteal_direct: 0,
            cgroup_pgscan: None,
            cgroup_pgsteal: None,
            memcg_limit_reclaimed_pages: None,
            kswapd_cpu_secs: 0.0,
            cached_bytes: 0,
            dirty_bytes: 0,
            writeback_bytes: 0,
            free_bytes: None,
            cgroup_cached_bytes: None,
            dataset_cached_bytes: 0,
            dataset_dirty_bytes: Some(0),
            dataset_writeback_bytes: Some(0),
            victim_ops_per_s: None,
        }
    }

    /// kswapd's CPU in the interval, in percent of one CPU (all kswapd
    /// threads together: 100 per busy thread).
    pub fn kswapd_pct(&self) -> f64 {
        self.kswapd_cpu_secs / self.interval_secs * 100.0
    }
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Bytes over seconds of the whole run (to durability for writes).
    pub mb_per_s: f64,
    /// Over the per-second samples (the steady-state view; the short last
    /// interval is left out when there are others).
    pub per_second_mb_per_s: Option<Summary>,
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
    /// (user + system) per GB moved.
    pub cpu_secs_per_gb: f64,
    /// System time per GB moved: where host faults show.
    #[serde(default)]
    pub cpu_sys_secs_per_gb: f64,
    /// Memory the guest handed back to its host during the run (free page
    /// reporting's reported_kib, after - before: for a backed mode, what
    /// of its backing went back before its pages were taken); null
    /// without it.
    #[serde(default)]
    pub reported_to_host_bytes: Option<u64>,
    /// Pages reclaimed per GB moved: pgsteal (kswapd + direct, whole
    /// machine) plus memory cgroup limit reclaim (`memcg_limit_reclaimed_pages`).
    pub reclaimed_pages_per_gb: f64,
    /// pgscan (kswapd + direct) per GB; the cgroup limit's scanning is not
    /// counted (its tracepoint gives only pages reclaimed).
    pub scanned_pages_per_gb: f64,
    /// Of the reclaimed, what the allocating tasks reclaimed themselves
    /// (direct reclaim and cgroup limit reclaim): the kind that stalls them.
    pub direct_reclaimed_pages_per_gb: f64,
    pub kswapd_cpu_secs: f64,
    /// The dataset's page-cache footprint: the highest seen (per-second
    /// samples, the 10 ms peak sampler, the figure after the run), and
    /// after the run (writes: after fsync and close).
    pub peak_dataset_cached_bytes: u64,
    pub final_dataset_cached_bytes: u64,
    /// Null where the kernel cannot tell dirty pages (no cachestat).
    pub peak_dataset_dirty_writeback_bytes: Option<u64>,
    /// Writes: from the first write to fsync returning. Reads: null.
    pub time_to_durable_secs: Option<f64>,
    /// The victim during the run (null without one).
    pub victim: Option<VictimEffect>,
}

/// What the victim felt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VictimEffect {
    pub median_ops_per_s: f64,
    /// The worst one-second interval.
    pub worst_ops_per_s: f64,
    /// Against its solo median (100 = unaffected).
    pub median_pct_of_solo: Option<f64>,
    pub worst_pct_of_solo: Option<f64>,
}

/// One mode over all its rounds: distributions over the runs that did not
/// fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeSummary {
    pub mode: BenchMode,
    /// As in its runs (the most common one, if they differ).
    pub backend: String,
    pub runs_ok: u32,
    pub runs_failed: u32,
    /// Of each run's whole-run throughput.
    pub mb_per_s: Option<Summary>,
    /// Median throughput over the baseline's (buffered, or cp for copies)
    /// median; null without a baseline in the run.
    pub speed_vs_baseline: Option<f64>,
    /// The same over the baseline's backed twin ("cp+backed"): against a
    /// baseline whose pages need no host fault, as on bare metal; null
    /// without the twin in the run.
    #[serde(default)]
    pub speed_vs_backed_baseline: Option<f64>,
    pub cpu_secs_per_gb: Option<Summary>,
    #[serde(default)]
    pub cpu_sys_secs_per_gb: Option<Summary>,
    /// Memory handed back to the host per run.
    #[serde(default)]
    pub reported_to_host_bytes: Option<Summary>,
    pub reclaimed_pages_per_gb: Option<Summary>,
    pub kswapd_cpu_secs: Option<Summary>,
    /// Highest over the runs.
    pub peak_dataset_cached_bytes: u64,
    pub final_dataset_cached_bytes: u64,
    /// Null where the kernel cannot tell dirty pages (no cachestat).
    pub peak_dataset_dirty_writeback_bytes: Option<u64>,
    pub time_to_durable_secs: Option<Summary>,
    /// Over all the runs' per-second victim samples together.
    pub victim: Option<VictimEffect>,
}

/// fio running the same job as one of the harness's modes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FioCheck {
    /// The harness mode it mirrors (buffered or odirect / odirect-uring).
    pub mode: BenchMode,
    /// The fio command line.
    pub command: String,
    /// fio's version string.
    pub fio_version: String,
    /// fio's median over its runs (one per round), and the runs.
    pub fio_mb_per_s: f64,
    #[serde(default)]
    pub fio_runs_mb_per_s: Vec<f64>,
    /// The harness's median for the same mode.
    pub harness_mb_per_s: f64,
    /// (harness - fio) / fio, in percent.
    pub difference_pct: f64,
    /// |difference| <= 10 %.
    pub agrees: bool,
}

impl Report {
    /// An empty report for `config`, before any run.
    pub fn new(environment: Environment, config: Config, started_unix_secs: u64) -> Report {
        Report {
            schema: SCHEMA_NAME.to_owned(),
            schema_version: SCHEMA_VERSION,
            environment,
            config,
            victim_solo: None,
            pressure: None,
            schedule: None,
            runs: Vec::new(),
            modes: Vec::new(),
            fio: Vec::new(),
            warnings: Vec::new(),
            left_out: Vec::new(),
            started_unix_secs,
            wall_secs: 0.0,
            complete: false,
        }
    }

    /// Why `mode` was left out of this report, if it was. Reports written
    /// before `left_out` existed said it only as a warning of the same form.
    pub fn why_left_out(&self, mode: BenchMode) -> Option<String> {
        if let Some(l) = self.left_out.iter().find(|l| l.mode == mode) {
            return Some(l.why.clone());
        }
        let prefix = format!("{mode} left out: ");
        self.warnings
            .iter()
            .find_map(|w| w.strip_prefix(&prefix).map(str::to_owned))
    }

    /// Parses a report, refusing other schemas and newer versions with a
    /// message that says which.
    pub fn from_json(text: &str) -> Result<Report, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let schema = value.get("schema").and_then(|v| v.as_str());
        if schema != Some(SCHEMA_NAME) {
            return Err(format!(
                "not a ubio bench report (schema {schema:?}, expected \"{SCHEMA_NAME}\")"
            ));
        }
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(SCHEMA_VERSION as u64) {
            return Err(format!(
                "schema_version {version:?}: this ubio reads version {SCHEMA_VERSION}"
            ));
        }
        serde_json::from_value(value).map_err(|e| format!("malformed report: {e}"))
    }
}
