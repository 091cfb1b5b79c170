//! `ubio bench suite seeds`: one experiment per seed, at this machine's
//! scale, each judged against what its seed claims.
//!
//! The seeds (../shared/seeds/ in the project's workspace) make claims on
//! machines we do not have: a phone with f2fs (000), a 32-drive box (001),
//! LWN's summary of the same (002), 1 TiB of RAM and pmem (003), a 2019
//! laptop (004). The experiments keep each claim's *shape* (block size,
//! threads, files per thread, dataset against memory, device speed) and
//! scale the sizes to a memory cgroup of `Scale::memory_limit`, so "a
//! dataset 10x RAM" becomes "10x the cgroup's limit". A verdict compares
//! ratios (uncached against buffered, direct against buffered), never
//! absolute figures, and says so where a claim cannot show here.
//!
//! One consequence of the scaling is named in every verdict that involves
//! kswapd: reclaim forced by a memory cgroup's limit runs in the allocating
//! task (direct reclaim), not in kswapd, so on this machine the seeds'
//! kswapd CPU shows up as `pgscan_direct`/`pgsteal_direct` and the
//! workload's system time. With global pressure (`Scale::global_pressure`,
//! `--pressure global`) there is no cgroup: a balloon leaves the scale's
//! memory to the whole machine, and kswapd reclaims as on the seeds'
//! machines.
//!
//! The figures and their rules are [`super::judge`]'s, shared with `ubio
//! demo`: none passes vacuously (a baseline without the seed's effect makes
//! the figure "not reproduced here", with the reason).

use super::export::write_atomically;
use super::gz;
use super::judge::{self, median_over_runs, missing, modes, num, ratio, Figure, Metric};
pub use super::judge::{Outcome, Verdict};
use super::mode::{BenchMode, Tool, WorkloadKind};
use super::schema::SCHEMA_VERSION;
use super::schema::{Backing, Config, GlobalPressure, ModeSummary, Report, Target, Workload};
use crate::path_context;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use ubio::size::human as human_bytes;
use ubio::BackendKind;

const MIB: u64 = 1 << 20;

/// The sizes the experiments are scaled to (written to suite.json with
/// units in the names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    /// Limit of the memory cgroup ("RAM" of the seeds).
    #[serde(rename = "memory_limit_bytes")]
    pub memory_limit: u64,
    /// Measured rounds per experiment (each in a new random order).
    pub rounds: u32,
    /// Seconds a random-read run lasts.
    pub random_secs: f64,
    /// Speed of the "slow device" (seed 000's phone, seed 004's disk).
    pub slow_device_mb_per_s: f64,
    /// CPUs to use as "threads = nproc" (seed 003).
    pub cpus: u32,
    /// Global memory pressure (a balloon leaves `memory_limit` of the
    /// machine's memory, no cgroup) instead of memory cgroups, for the
    /// experiments that can run so ([`pressed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_pressure: Option<GlobalPressure>,
}

impl Scale {
    /// The scale of a full run on this kind of machine (2 cores, 24 GiB):
    /// about 10 minutes for the five seeds at a 1 GiB limit (measured).
    pub fn standard(cpus: u32) -> Scale {
        Scale {
            memory_limit: 512 * MIB,
            rounds: 2,
            random_secs: 15.0,
            slow_device_mb_per_s: 150.0,
            cpus: cpus.max(1),
            global_pressure: None,
        }
    }

    /// A tiny scale that exercises every experiment in seconds (for tests):
    /// the figures mean little.
    pub fn smoke() -> Scale {
        Scale {
            memory_limit: 64 * MIB,
            rounds: 1,
            random_secs: 2.0,
            slow_device_mb_per_s: 200.0,
            cpus: 2,
            global_pressure: None,
        }
    }

    /// Rounds `bytes` down to whole MiB (O_DIRECT modes need whole blocks),
    /// at least 1 MiB.
    fn mib(bytes: u64) -> u64 {
        (bytes / MIB).max(1) * MIB
    }
}

/// One seed's experiment: what runs, and how its report is judged.
pub struct Experiment {
    /// "000" .. "004".
    pub seed: &'static str,
    pub title: &'static str,
    /// The seed's claim, in short, with its figures.
    pub claim: &'static str,
    pub config: Config,
    /// Whether the harness should also run fio's version of the jobs.
    pub fio: bool,
    judge: fn(&Report, &Scale) -> Verdict,
}

impl Experiment {
    /// Judges a finished report of this experiment's config.
    pub fn judge(&self, report: &Report, scale: &Scale) -> Verdict {
        let mut v = (self.judge)(report, scale);
        if let (Some(_), None) = (scale.global_pressure, report.config.global_pressure) {
            v.notes.push(format!(
                "not run under global pressure: {}; it kept the configuration it has without it",
                unpressed_reason(scale, &report.config)
            ));
        }
        v
    }
}

/// The experiment's config under the scale's global pressure, where it can
/// run so: not with a dataset too small to press (less than
/// `balloon::MIN_DATASET_RATIO` times what is left). A loop device in
/// /dev/shm can: its backing file is then allocated whole before the
/// balloon is sized.
fn pressed(s: &Scale, mut c: Config) -> Config {
    if let Some(p) = s.global_pressure {
        if unpressed_reason(s, &c).is_empty() {
            c.memory_limit_bytes = None;
            c.global_pressure = Some(p);
            // Room for the filler that holds free memory small.
            if let Target::Loop { size_bytes, .. } = &mut c.target {
                *size_bytes += super::runner::target::filler_room(p.leave_bytes);
            }
        }
    }
    c
}

/// Why `c` cannot run under the scale's global pressure ("" when it can).
fn unpressed_reason(s: &Scale, c: &Config) -> String {
    let Some(p) = s.global_pressure else {
        return "no global pressure asked for".into();
    };
    let copies = c.workload.kind.copies();
    let ratio = ubio_testenv::balloon::MIN_DATASET_RATIO;
    if copies * c.workload.dataset_bytes < ratio * p.leave_bytes {
        format!(
            "its dataset ({}) is less than {ratio}x the {} the balloon would leave",
            human_bytes(copies * c.workload.dataset_bytes),
            human_bytes(p.leave_bytes)
        )
    } else {
        String::new()
    }
}

/// The experiments, in seed order; `only` keeps those whose seed is listed.
pub fn experiments(scale: &Scale, only: &[String]) -> Vec<Experiment> {
    let all = vec![
        seed_000_reads(scale),
        seed_000_writes(scale),
        seed_001(scale),
        seed_002(scale),
        seed_003(scale),
        seed_004(scale),
    ];
    all.into_iter()
        .filter(|e| only.is_empty() || only.iter().any(|s| s == e.seed))
        .collect()
}

fn workload(kind: WorkloadKind, block: u64, threads: u32, files: u32, bytes: u64) -> Workload {
    Workload {
        kind,
        block_bytes: block,
        threads,
        files_per_thread: files,
        dataset_bytes: Scale::mib(bytes),
        duration_secs: None,
        queue_depth: 1,
        seed: 1,
        processes: 1,
        shared_file: false,
    }
}

fn loop_target(fs: &str, backing: Backing, size: u64, throttle: Option<f64>) -> Target {
    Target::Loop {
        filesystem: fs.to_owned(),
        backing,
        size_bytes: Scale::mib(size),
        throttle_mb_per_s: throttle,
    }
}

const UBIO: BenchMode = BenchMode::Ubio(BackendKind::Auto);
/// The modes most seeds' claims compare: the baseline and both uncached ways.
const BUFFERED_DONTCACHE_UBIO: [BenchMode; 3] = [BenchMode::Buffered, BenchMode::Dontcache, UBIO];

fn seed_000_reads(s: &Scale) -> Experiment {
    // Under global pressure 14x what is left: runs long enough for the
    // per-second figures (at least MIN_SWING_SAMPLES seconds each, at the
    // 2.3 GB/s ubio reads here with 2 GiB left).
    let dataset = if s.global_pressure.is_some() { 14 } else { 8 } * s.memory_limit;
    Experiment {
        seed: "000",
        title: "two-thread 32 KiB reads of a file larger than memory (vivo, f2fs on a phone)",
        claim: "buffered reads keep kswapd at 50-85% of a core (pgscan ~470k pages/s) and the \
                read speed swings by ~150 MB/s; uncached reads bring kswapd to 0 and the swing \
                to ~50 MB/s",
        config: pressed(
            s,
            Config {
                workload: workload(WorkloadKind::SeqRead, 32 << 10, 2, 1, dataset),
                modes: vec![BenchMode::Buffered, BenchMode::Dontcache, UBIO],
                rounds: s.rounds,
                target: loop_target(
                    "ext4",
                    Backing::Disk,
                    dataset + dataset / 4 + 256 * MIB,
                    None,
                ),
                memory_limit_bytes: Some(s.memory_limit),
                victim_hot_bytes: None,
                global_pressure: None,
            },
        ),
        fio: false,
        judge: |r, _| {
            let Some([buf, dc, ub]) = modes(r, BUFFERED_DONTCACHE_UBIO) else {
                return missing(r, &BUFFERED_DONTCACHE_UBIO);
            };
            let figures = vec![
                judge::reclaim(buf, dc, "470k pages/s scanned buffered, 0 uncached"),
                judge::reclaim(buf, ub, "470k pages/s scanned buffered, 0 uncached"),
                judge::kswapd(r, buf, dc, "50-85% of a core vs 0"),
                judge::kswapd(r, buf, ub, "50-85% of a core vs 0"),
            ];
            with_swing(r, (buf, ub), "150 MB/s buffered, 50 MB/s uncached", figures)
        },
    }
}

fn seed_000_writes(s: &Scale) -> Experiment {
    let dataset = 2 * s.memory_limit;
    Experiment {
        seed: "000",
        title: "64 KiB writes on a slow device, with and without uncached (vivo: is there a better way?)",
        claim: "uncached writes keep the page cache empty and kswapd at 0, but start writeback \
                inline, so on a device slower than memory they write slower than buffered \
                (the seed asks for a better way)",
        config: pressed(s, Config {
            workload: workload(WorkloadKind::SeqWrite, 64 << 10, 1, 1, dataset),
            modes: vec![BenchMode::Buffered, BenchMode::Dontcache, UBIO],
            rounds: s.rounds,
            target: loop_target(
                "ext4",
                Backing::Disk,
                dataset + dataset / 4 + 256 * MIB,
                Some(s.slow_device_mb_per_s),
            ),
            memory_limit_bytes: None,
            victim_hot_bytes: None,
            global_pressure: None,
        }),
        fio: false,
        judge: |r, _| {
            let Some([buf, dc, ub]) = modes(r, BUFFERED_DONTCACHE_UBIO) else {
                return missing(r, &BUFFERED_DONTCACHE_UBIO);
            };
            let mut figures = Vec::new();
            // The claim: RWF_DONTCACHE's writes are slower than buffered as
            // the application sees them (before fsync).
            let (b_app, d_app) = (app_speed(r, buf.mode), app_speed(r, dc.mode));
            figures.push(Figure::plain(
                "dontcache write speed the program sees, vs buffered".into(),
                "slower than buffered on a phone's flash",
                format!("{} vs {} MB/s", num(d_app), num(b_app)),
                d_app < b_app,
            ));
            // The better way: ubio as fast to durability as buffered, with
            // the cache of dontcache.
            figures.push(judge::durability(buf, ub, "(the better way asked for)"));
            figures.push(judge::cache(buf, ub, "page cache filled buffered, empty uncached"));
            figures.push(judge::kswapd(r, buf, dc, "26-59% of a core vs 0"));
            figures.push(judge::kswapd(r, buf, ub, "26-59% of a core vs 0"));
            Verdict::from_figures(
                figures,
                vec![
                    format!(
                        "slow device: ext4 on a loop device over a disk file, blkio-throttled to {} MB/s",
                        num(r_throttle(r))
                    ),
                    pressure_note(r),
                ],
            )
        },
    }
}

fn seed_001(s: &Scale) -> Experiment {
    let dataset = 10 * s.memory_limit;
    Experiment {
        seed: "001",
        title: "64 KiB reads of a dataset 10x memory, several threads (Axboe, RWF_UNCACHED)",
        claim: "buffered reads slow down and turn erratic once the page cache is full \
                (158 -> ~95 GB/s) with 28 cores of kswapd; uncached reads stay flat, 65% faster, \
                with half the CPU and no kswapd",
        config: pressed(
            s,
            Config {
                workload: workload(WorkloadKind::SeqRead, 64 << 10, s.cpus, 1, dataset),
                modes: vec![
                    BenchMode::Buffered,
                    BenchMode::Dontcache,
                    BenchMode::DontcacheUring,
                    UBIO,
                ],
                rounds: s.rounds,
                target: loop_target(
                    "xfs",
                    Backing::Disk,
                    dataset + dataset / 4 + 256 * MIB,
                    None,
                ),
                memory_limit_bytes: Some(s.memory_limit),
                victim_hot_bytes: None,
                global_pressure: None,
            },
        ),
        fio: false,
        judge: |r, _| {
            let Some([buf, dc, ub]) = modes(r, BUFFERED_DONTCACHE_UBIO) else {
                return missing(r, &BUFFERED_DONTCACHE_UBIO);
            };
            let figures = vec![
                judge::speed(buf, dc, "+65% (uncached vs buffered)", 1.0),
                judge::speed(buf, ub, "+65% (uncached vs buffered)", 1.0),
                judge::cpu(buf, dc, "about half the CPU"),
                judge::cpu(buf, ub, "about half the CPU"),
                judge::reclaim(buf, ub, "28 cores of kswapd buffered, none uncached"),
                judge::kswapd(r, buf, dc, "28 cores of kswapd vs none"),
                judge::kswapd(r, buf, ub, "28 cores of kswapd vs none"),
            ];
            with_swing(r, (buf, ub), "erratic buffered, flat uncached", figures)
        },
    }
}

fn seed_002(s: &Scale) -> Experiment {
    let dataset = 10 * s.memory_limit;
    let mut w = workload(WorkloadKind::RandRead, 4 << 10, s.cpus, 10, dataset);
    w.duration_secs = Some(s.random_secs);
    Experiment {
        seed: "002",
        title: "random 4 KiB reads over a dataset 10x memory, 10 files (LWN on RWF_UNCACHED)",
        claim: "buffered random reads hit a throughput cliff once the cache fills, kswapd at \
                100% of a core, and everyone else doing I/O suffers; uncached reads leave \
                others hardly disturbed",
        config: pressed(
            s,
            Config {
                workload: w,
                modes: vec![
                    BenchMode::Buffered,
                    BenchMode::Dontcache,
                    BenchMode::Odirect,
                    UBIO,
                ],
                rounds: s.rounds,
                target: loop_target("xfs", Backing::Shm, dataset + dataset / 4 + 256 * MIB, None),
                memory_limit_bytes: Some(s.memory_limit),
                victim_hot_bytes: Some(s.memory_limit / 4),
                global_pressure: None,
            },
        ),
        fio: false,
        judge: |r, _| {
            let Some([buf, dc, ub]) = modes(r, BUFFERED_DONTCACHE_UBIO) else {
                return missing(r, &BUFFERED_DONTCACHE_UBIO);
            };
            let figures = vec![
                judge::reclaim(buf, dc, "kswapd at 100% buffered"),
                judge::reclaim(buf, ub, "kswapd at 100% buffered"),
                judge::victim(buf, dc, "others hardly disturbed uncached"),
                judge::victim(buf, ub, "others hardly disturbed uncached"),
                judge::kswapd(r, buf, ub, "kswapd at 100% of a core buffered"),
            ];
            Verdict::from_figures(figures, vec![pressure_note(r)])
        },
    }
}

fn seed_003(s: &Scale) -> Experiment {
    let dataset = 2 * s.memory_limit;
    let mut w = workload(WorkloadKind::SeqWrite, 2 * MIB, s.cpus, 10, dataset);
    w.queue_depth = 8;
    Experiment {
        seed: "003",
        title: "filling writes, 10 files per thread, 2 MiB blocks, buffered against direct (LSFMM, pmem)",
        claim: "on a RAM-fast device, direct writes (~86 GiB/s) leave buffered (~7 GiB/s) far \
                behind, and buffered hits a wall once the data written exceeds memory",
        config: pressed(s, Config {
            workload: w,
            modes: vec![
                BenchMode::Buffered,
                BenchMode::Odirect,
                BenchMode::OdirectUring,
                BenchMode::Dontcache,
                UBIO,
            ],
            rounds: s.rounds,
            target: loop_target("xfs", Backing::Shm, dataset + dataset / 2 + 256 * MIB, None),
            memory_limit_bytes: Some(s.memory_limit),
            victim_hot_bytes: None,
            global_pressure: None,
        }),
        fio: true,
        judge: |r, _| {
            let Some([buf, od]) = modes(r, [BenchMode::Buffered, BenchMode::Odirect]) else {
                return missing(r, &[BenchMode::Buffered, BenchMode::Odirect]);
            };
            let speed = |m: &ModeSummary| Metric::Throughput.of(m);
            let direct_figure = |other: &ModeSummary, what: String, claim: &str| {
                Figure::plain(
                    what,
                    claim,
                    format!("{} vs {} MB/s ({}x)", num(speed(other)), num(speed(buf)), ratio(speed(other), speed(buf))),
                    speed(other) > speed(buf) * 1.2,
                )
            };
            let mut figures = vec![direct_figure(
                od,
                "direct vs buffered write throughput (to durability)".into(),
                "86 GiB/s vs 7 GiB/s (12x)",
            )];
            if let Some([uring]) = modes(r, [BenchMode::OdirectUring]) {
                figures.push(direct_figure(
                    uring,
                    format!("direct io_uring QD{} vs buffered", r.config.workload.queue_depth),
                    "(fio io_uring in the seed)",
                ));
            }
            let mut notes = vec![
                "pmem is stood in for by a loop device over a file in /dev/shm; the dataset is 2x the \
                 cgroup's limit, as the seed's writes were about 1x-2x RAM"
                    .to_owned(),
            ];
            for f in &r.fio {
                notes.push(format!(
                    "fio {}: {} MB/s against the harness's {} MB/s ({:+.1}%{})",
                    f.mode,
                    num(f.fio_mb_per_s),
                    num(f.harness_mb_per_s),
                    f.difference_pct,
                    if f.agrees { "" } else { ", beyond 10%" }
                ));
            }
            Verdict::from_figures(figures, notes)
        },
    }
}

fn seed_004(s: &Scale) -> Experiment {
    // The seed copies 3.2 GB to a disk that writes about 100 MB/s: the copy
    // is about 30 s of device time. Keep that shape, scaled to the device.
    let dataset =
        ((s.slow_device_mb_per_s * 1e6 * 8.0) as u64).min(4 * s.memory_limit.max(256 * MIB));
    Experiment {
        seed: "004",
        title: "a large copy with and without write-behind (Khlebnikov's write-behind patch)",
        claim: "plain cp returns in 3.6 s leaving 3.2 GB dirty and sync then takes 32 s; with \
                write-behind the copy takes 32.7 s with ~16 MiB dirty and sync 0.4 s: the same \
                time to durability, without the dirty memory",
        config: pressed(
            s,
            Config {
                workload: workload(WorkloadKind::Copy, MIB, 1, 1, dataset),
                modes: vec![
                    BenchMode::Tool(Tool::Cp),
                    BenchMode::Tool(Tool::UbioCp),
                    BenchMode::Buffered,
                    UBIO,
                ],
                rounds: s.rounds,
                target: loop_target(
                    "ext4",
                    Backing::Disk,
                    2 * dataset + dataset / 2 + 256 * MIB,
                    Some(s.slow_device_mb_per_s),
                ),
                memory_limit_bytes: None,
                victim_hot_bytes: None,
                global_pressure: None,
            },
        ),
        fio: false,
        judge: |r, _| {
            let cp = BenchMode::Tool(Tool::Cp);
            let ubio_cp = BenchMode::Tool(Tool::UbioCp);
            let Some([plain, wb]) = modes(r, [cp, ubio_cp]) else {
                return missing(r, &[cp, ubio_cp]);
            };
            let figures = vec![
                judge::dirty(plain, wb, "3.2 GB vs ~16 MiB"),
                judge::durability(plain, wb, "32.7 s vs 3.6 + 32 s (about equal)"),
            ];
            Verdict::from_figures(
                figures,
                vec![format!(
                    "disk: ext4 on a loop device over a disk file, blkio-throttled to {} MB/s; \
                     no memory cgroup (the seed's dirty memory is bounded only by the dirty ratio)",
                    num(r_throttle(r))
                )],
            )
        },
    }
}

// ---- judging helpers (the figures themselves are in judge.rs) ----

/// The verdict of `figures` and the pressure note, with the speed swing's
/// figure where the runs were long enough to show one (else a note why).
fn with_swing(
    r: &Report,
    (buf, other): (&ModeSummary, &ModeSummary),
    claim: &str,
    mut figures: Vec<Figure>,
) -> Verdict {
    let mut notes = vec![pressure_note(r)];
    match judge::swing(r, buf, other, claim) {
        Ok(f) => figures.push(f),
        Err(why) => notes.push(why),
    }
    Verdict::from_figures(figures, notes)
}

/// Median over a mode's runs of the speed the program sees while it writes:
/// the bytes over the time until the last of them was handed to the kernel
/// (before the fsync that the run's own throughput includes), from the
/// per-second samples, interpolated within the second the writes ended.
fn app_speed(r: &Report, mode: BenchMode) -> f64 {
    median_over_runs(r, mode, write_phase_mb_per_s)
}

fn write_phase_mb_per_s(run: &super::schema::Run) -> Option<f64> {
    let mut done = 0;
    for s in &run.samples {
        if done + s.bytes >= run.bytes && s.bytes > 0 {
            let within = (run.bytes - done) as f64 / s.bytes as f64 * s.interval_secs;
            let secs = s.t_secs - s.interval_secs + within;
            return (secs > 0.0).then(|| run.bytes as f64 / 1e6 / secs);
        }
        done += s.bytes;
    }
    None
}

fn r_throttle(r: &Report) -> f64 {
    match &r.config.target {
        Target::Loop {
            throttle_mb_per_s: Some(t),
            ..
        } => *t,
        _ => f64::NAN,
    }
}

/// Where the memory pressure came from, and what that means for kswapd.
fn pressure_note(r: &Report) -> String {
    match (&r.config.global_pressure, &r.pressure) {
        (Some(p), rec) => {
            let mut s = format!(
                "global pressure: no memory cgroup; a balloon of locked memory left {} of the machine's \
                 memory available (floor {})",
                human_bytes(p.leave_bytes),
                human_bytes(p.floor_bytes)
            );
            if let Some(rec) = rec {
                s += &format!(
                    ", locking {} ({} held at the end)",
                    human_bytes(rec.balloon_bytes),
                    human_bytes(rec.held_at_end_bytes)
                );
            }
            s + ": kswapd reclaims for the whole machine, as on the seed's"
        }
        (None, _) => "in a memory cgroup the limit's reclaim runs in the reading task (direct reclaim), not in \
             kswapd: the seed's kswapd load shows here as pages reclaimed and the reader's system time"
            .to_owned(),
    }
}

// ---- the suite's own results ----

/// One experiment's outcome, as written to suite.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    pub seed: String,
    pub title: String,
    pub claim: String,
    /// The experiment's report, relative to suite.json.
    pub report: String,
    pub verdict: Verdict,
}

/// suite.json.
#[derive(Serialize)]
struct SuiteReport<'a> {
    schema: &'static str,
    schema_version: u32,
    scale: Scale,
    experiments: &'a [ExperimentResult],
    complete: bool,
}

/// Writes suite.json and suite.md into `out` (made if missing), each
/// atomically: after every experiment, so an interrupted suite keeps what
/// it measured (`complete` false until the last one).
pub fn write_report(
    out: &Path,
    scale: &Scale,
    results: &[ExperimentResult],
    complete: bool,
) -> io::Result<()> {
    std::fs::create_dir_all(out).map_err(|e| path_context(e, "mkdir", out))?;
    let report = SuiteReport {
        schema: "ubio-bench-suite",
        schema_version: SCHEMA_VERSION,
        scale: *scale,
        experiments: results,
        complete,
    };
    let json = serde_json::to_vec_pretty(&report)?;
    write_atomically(&out.join("suite.json"), &json)?;
    write_atomically(&out.join("suite.md"), render_markdown(results).as_bytes()).map(drop)
}

/// Judges the reports of an earlier suite run in `out` (its suite.json)
/// again, with this version's rules, and rewrites suite.json and suite.md:
/// a change of the verdict rules applies to runs already made. Returns the
/// results.
pub fn rejudge(out: &Path) -> io::Result<Vec<ExperimentResult>> {
    let path = out.join("suite.json");
    let text = gz::read_to_string(&path)?;
    let bad = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    let suite: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let scale: Scale =
        serde_json::from_value(suite["scale"].clone()).map_err(|e| bad(format!("scale: {e}")))?;
    let earlier: Vec<ExperimentResult> = serde_json::from_value(suite["experiments"].clone())
        .map_err(|e| bad(format!("experiments: {e}")))?;
    let all = experiments(&scale, &[]);
    let mut results = Vec::new();
    for e in earlier {
        let exp = all
            .iter()
            .find(|x| x.seed == e.seed && x.title == e.title)
            .ok_or_else(|| {
                bad(format!(
                    "no experiment of seed {} titled {:?} any more",
                    e.seed, e.title
                ))
            })?;
        let report_path = out.join(&e.report);
        let report_text = gz::read_to_string(&report_path)?;
        let report = Report::from_json(&report_text)
            .map_err(|err| bad(format!("{}: {err}", report_path.display())))?;
        results.push(ExperimentResult {
            verdict: exp.judge(&report, &scale),
            ..e
        });
    }
    let complete = suite["complete"].as_bool().unwrap_or(false);
    write_report(out, &scale, &results, complete)?;
    Ok(results)
}

/// Markdown: per experiment, the claim, the figures beside the seed's, and
/// the verdict.
pub fn render_markdown(results: &[ExperimentResult]) -> String {
    let mut s = String::from("# Seeds, reproduced at this machine's scale\n\n");
    s.push_str("| seed | experiment | outcome |\n|---|---|---|\n");
    for r in results {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            r.seed,
            r.title,
            r.verdict.outcome.word()
        );
    }
    for r in results {
        let _ = writeln!(s, "\n## {}: {}\n\nClaim: {}\n", r.seed, r.title, r.claim);
        s.push_str(&r.verdict.figures_markdown("seed"));
        let _ = writeln!(
            s,
            "\nOutcome: **{}**. Report: `{}`.",
            r.verdict.outcome.word(),
            r.report
        );
        for n in &r.verdict.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::schema::{Environment, Run, RunSummary, Sample, VictimEffect};
    use crate::stats::Summary;

    const GIB: u64 = 1 << 30;

    fn summary(v: f64) -> Option<Summary> {
        Summary::of(&[v])
    }

    fn mode(m: BenchMode, mb: f64, reclaim: f64) -> ModeSummary {
        ModeSummary {
            mode: m,
            backend: "x".into(),
            runs_ok: 1,
            runs_failed: 0,
            mb_per_s: summary(mb),
            speed_vs_baseline: None,
            speed_vs_backed_baseline: None,
            cpu_secs_per_gb: summary(1.0),
            cpu_sys_secs_per_gb: summary(0.5),
            reported_to_host_bytes: None,
            reclaimed_pages_per_gb: summary(reclaim),
            kswapd_cpu_secs: summary(0.0),
            peak_dataset_cached_bytes: 0,
            final_dataset_cached_bytes: 0,
            peak_dataset_dirty_writeback_bytes: Some(0),
            time_to_durable_secs: None,
            victim: None,
        }
    }

    fn run(m: BenchMode, swing: f64) -> Run {
        let per_second = Summary {
            median: 100.0,
            min: 50.0,
            max: 150.0,
            stddev: swing,
            n: 10,
        };
        Run {
            mode: m,
            round: 1,
            backend: "x".into(),
            reason: String::new(),
            error: None,
            bytes: 1,
            secs: 1.0,
            samples: Vec::new(),
            summary: RunSummary {
                mb_per_s: 100.0,
                per_second_mb_per_s: Some(per_second),
                cpu_user_secs: 0.0,
                cpu_sys_secs: 0.0,
                cpu_secs_per_gb: 0.0,
                cpu_sys_secs_per_gb: 0.0,
                reported_to_host_bytes: None,
                reclaimed_pages_per_gb: 0.0,
                scanned_pages_per_gb: 0.0,
                direct_reclaimed_pages_per_gb: 0.0,
                kswapd_cpu_secs: 0.0,
                peak_dataset_cached_bytes: 0,
                final_dataset_cached_bytes: 0,
                peak_dataset_dirty_writeback_bytes: Some(0),
                time_to_durable_secs: None,
                victim: None,
            },
            ubio_stats: None,
            prefaulted_bytes: None,
        }
    }

    /// A run of `m` with kswapd busy for `kswapd_pct` % of its second.
    fn run_with_kswapd(m: BenchMode, swing: f64, kswapd_pct: f64) -> Run {
        let mut r = run(m, swing);
        r.summary.kswapd_cpu_secs = kswapd_pct / 100.0 * r.secs;
        r
    }

    /// Buffered keeping kswapd at 60% of a CPU, the uncached modes at 0.
    fn runs_with_kswapd(swing: f64) -> Vec<Run> {
        vec![
            run_with_kswapd(BenchMode::Buffered, swing, 60.0),
            run_with_kswapd(BenchMode::Dontcache, 20.0, 0.0),
            run_with_kswapd(UBIO, 20.0, 0.5),
        ]
    }

    fn report(exp: &Experiment, modes: Vec<ModeSummary>, runs: Vec<Run>) -> Report {
        let env = Environment {
            tool_version: "test".into(),
            git_commit: None,
            kernel: "6.18".into(),
            hostname: "h".into(),
            cpu_model: "c".into(),
            cpus: 2,
            mem_total_bytes: 1 << 34,
            cgroup_version: "v1".into(),
            filesystem: "ext4".into(),
            device: "loop".into(),
            probe: serde_json::Value::Null,
            tools: Default::default(),
            virtualization: Default::default(),
            free_page_reporting: None,
            ubio_settings: Default::default(),
        };
        let mut r = Report::new(env, exp.config.clone(), 0);
        r.modes = modes;
        r.runs = runs;
        r
    }

    fn experiment(seed: &str, index: usize) -> (Experiment, Scale) {
        let scale = Scale::smoke();
        let mut e = experiments(&scale, &[seed.to_owned()]);
        (e.remove(index), scale)
    }

    #[test]
    fn every_seed_has_an_experiment_with_a_valid_config() {
        let scale = Scale::standard(2);
        let all = experiments(&scale, &[]);
        let seeds: Vec<&str> = all.iter().map(|e| e.seed).collect();
        assert_eq!(seeds, ["000", "000", "001", "002", "003", "004"]);
        for e in &all {
            let w = &e.config.workload;
            assert_eq!(
                w.dataset_bytes % MIB,
                0,
                "{}: whole MiB for O_DIRECT",
                e.title
            );
            assert!(
                e.config.modes.iter().all(|m| m.supports(w.kind)),
                "{}",
                e.title
            );
            if let Target::Loop { size_bytes, .. } = &e.config.target {
                let copies = w.kind.copies();
                assert!(
                    *size_bytes > copies * w.dataset_bytes,
                    "{}: the target holds the data",
                    e.title
                );
            }
        }
        assert_eq!(experiments(&scale, &["003".into()]).len(), 1);
    }

    /// Seed 001's verdict with buffered at 1000 MB/s (reclaiming a lot, at
    /// 2 CPU s/GB) and the uncached modes at the given speeds.
    fn seed_001_verdict(dontcache_mb_per_s: f64, ubio_mb_per_s: f64) -> Verdict {
        let (e, scale) = experiment("001", 0);
        let mut buf = mode(BenchMode::Buffered, 1000.0, 250_000.0);
        buf.cpu_secs_per_gb = summary(2.0);
        let r = report(
            &e,
            vec![
                buf,
                mode(BenchMode::Dontcache, dontcache_mb_per_s, 100.0),
                mode(UBIO, ubio_mb_per_s, 50.0),
            ],
            runs_with_kswapd(150.0),
        );
        e.judge(&r, &scale)
    }

    #[test]
    fn seed_001_reproduced_when_uncached_is_faster_leaner_and_steadier() {
        let v = seed_001_verdict(1400.0, 1500.0);
        assert_eq!(v.outcome, Outcome::Reproduced, "{v:#?}");
    }

    #[test]
    fn seed_001_partly_when_uncached_is_slower() {
        let v = seed_001_verdict(800.0, 900.0);
        assert_eq!(v.outcome, Outcome::Partly, "{v:#?}");
        assert!(v
            .figures
            .iter()
            .any(|f| !f.holds && f.what.contains("throughput")));
    }

    #[test]
    fn the_write_phase_ends_where_the_last_byte_was_written() {
        let template = crate::harness::mock::report(1).runs[0].samples[0].clone();
        let sample = |t: f64, bytes: u64| Sample {
            t_secs: t,
            interval_secs: 1.0,
            bytes,
            ..template.clone()
        };
        let mut r = run(BenchMode::Buffered, 0.0);
        r.bytes = 100_000_000;
        // 80 MB in the first second, the last 20 MB in the second one (half
        // of it), then an fsync second moving nothing: 2 s of writing.
        r.samples = vec![
            sample(1.0, 80_000_000),
            sample(2.0, 20_000_000),
            sample(3.0, 0),
        ];
        assert_eq!(write_phase_mb_per_s(&r), Some(50.0));
        r.samples.truncate(1);
        assert_eq!(write_phase_mb_per_s(&r), None, "never reached the end");
    }

    #[test]
    fn runs_too_short_for_a_swing_say_so_instead() {
        let (e, scale) = experiment("001", 0);
        let mut short = run(UBIO, 0.0);
        short.summary.per_second_mb_per_s.as_mut().unwrap().n = 2;
        let mut buf = mode(BenchMode::Buffered, 1000.0, 250_000.0);
        buf.cpu_secs_per_gb = summary(2.0);
        let r = report(
            &e,
            vec![
                buf,
                mode(BenchMode::Dontcache, 1400.0, 100.0),
                mode(UBIO, 1500.0, 50.0),
            ],
            vec![
                run_with_kswapd(BenchMode::Buffered, 150.0, 60.0),
                run_with_kswapd(BenchMode::Dontcache, 20.0, 0.0),
                short,
            ],
        );
        let v = e.judge(&r, &scale);
        assert!(
            !v.figures.iter().any(|f| f.what.contains("swing")),
            "{v:#?}"
        );
        assert!(
            v.notes
                .iter()
                .any(|n| n.contains("swing not judged") && n.contains("2 ")),
            "{v:#?}"
        );
        assert_eq!(
            v.outcome,
            Outcome::Reproduced,
            "the other figures still judge"
        );
    }

    /// Seed 000's reads judged on a report where buffered shows no kswapd
    /// work at all (as in a memory cgroup): the kswapd rows say "not
    /// reproduced here", with the reason, instead of "0.00 vs 0.00: holds".
    #[test]
    fn kswapd_missing_from_the_baseline_is_not_reproduced() {
        let (e, scale) = experiment("000", 0);
        let r = report(
            &e,
            vec![
                mode(BenchMode::Buffered, 1000.0, 250_000.0),
                mode(BenchMode::Dontcache, 1000.0, 100.0),
                mode(UBIO, 1000.0, 100.0),
            ],
            vec![
                run_with_kswapd(BenchMode::Buffered, 150.0, 0.0),
                run_with_kswapd(BenchMode::Dontcache, 20.0, 0.0),
                run_with_kswapd(UBIO, 20.0, 0.0),
            ],
        );
        let v = e.judge(&r, &scale);
        let kswapd: Vec<&Figure> = v
            .figures
            .iter()
            .filter(|f| f.what.contains("kswapd"))
            .collect();
        assert_eq!(kswapd.len(), 2, "{v:#?}");
        for f in kswapd {
            assert!(!f.holds, "{f:?}");
            let why = f.not_reproduced.as_deref().unwrap();
            assert!(
                why.contains("no kswapd load") && why.contains("memory cgroup"),
                "{why}"
            );
            assert!(f.status().starts_with("not reproduced here: "));
        }
        assert_ne!(v.outcome, Outcome::Reproduced, "{v:#?}");
        // With kswapd busy for buffered and idle for the others, they hold.
        let r = report(&e, r.modes.clone(), runs_with_kswapd(150.0));
        let v = e.judge(&r, &scale);
        assert!(
            v.figures
                .iter()
                .filter(|f| f.what.contains("kswapd"))
                .all(|f| f.holds),
            "{v:#?}"
        );
        assert_eq!(v.outcome, Outcome::Reproduced, "{v:#?}");
    }

    /// A baseline that shows none of the seed's effects (no reclaim, no
    /// kswapd, a steady speed) reproduces nothing, however the other modes
    /// compare.
    #[test]
    fn a_baseline_without_the_effect_reproduces_nothing() {
        let (e, scale) = experiment("000", 0);
        let r = report(
            &e,
            vec![
                mode(BenchMode::Buffered, 1000.0, 0.0),
                mode(BenchMode::Dontcache, 1000.0, 0.0),
                mode(UBIO, 1000.0, 0.0),
            ],
            vec![
                run_with_kswapd(BenchMode::Buffered, 1.0, 0.0),
                run_with_kswapd(BenchMode::Dontcache, 1.0, 0.0),
                run_with_kswapd(UBIO, 1.0, 0.0),
            ],
        );
        let v = e.judge(&r, &scale);
        assert_eq!(v.outcome, Outcome::Not, "{v:#?}");
        assert!(
            v.figures.iter().all(|f| f.not_reproduced.is_some()),
            "{v:#?}"
        );
    }

    #[test]
    fn global_pressure_replaces_the_cgroup_where_it_can() {
        let mut scale = Scale::standard(2);
        scale.global_pressure = Some(GlobalPressure {
            leave_bytes: scale.memory_limit,
            floor_bytes: scale.memory_limit / 2,
        });
        for e in experiments(&scale, &[]) {
            let c = &e.config;
            assert_eq!(
                c.global_pressure.is_some(),
                unpressed_reason(&scale, c).is_empty(),
                "{}",
                e.title
            );
            if c.global_pressure.is_some() {
                assert_eq!(c.memory_limit_bytes, None, "{}", e.title);
            }
        }
        // A loop device in /dev/shm too (its backing file allocated whole
        // before the balloon is sized): seed 003's pmem.
        let pmem = experiments(&scale, &["003".into()]).remove(0);
        assert!(matches!(
            pmem.config.target,
            Target::Loop {
                backing: Backing::Shm,
                ..
            }
        ));
        assert!(pmem.config.global_pressure.is_some());
        let reads = experiments(&scale, &["000".into()]).remove(0);
        assert!(reads.config.global_pressure.is_some());
        assert_eq!(reads.config.workload.dataset_bytes, 14 * scale.memory_limit);
    }

    #[test]
    fn rejudging_applies_the_rules_to_reports_already_made() {
        let (e, scale) = experiment("000", 0);
        let r = report(
            &e,
            vec![
                mode(BenchMode::Buffered, 1000.0, 250_000.0),
                mode(BenchMode::Dontcache, 1000.0, 100.0),
                mode(UBIO, 1000.0, 100.0),
            ],
            runs_with_kswapd(150.0),
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("000-1")).unwrap();
        std::fs::write(
            dir.path().join("000-1/report.json"),
            serde_json::to_vec(&r).unwrap(),
        )
        .unwrap();
        let stale = ExperimentResult {
            seed: e.seed.into(),
            title: e.title.into(),
            claim: e.claim.into(),
            report: "000-1/report.json".into(),
            verdict: Verdict::unmeasured(&[]),
        };
        write_report(dir.path(), &scale, &[stale], true).unwrap();
        let results = rejudge(dir.path()).unwrap();
        assert_eq!(results[0].verdict, e.judge(&r, &scale));
        assert_eq!(results[0].verdict.outcome, Outcome::Reproduced);
        let md = std::fs::read_to_string(dir.path().join("suite.md")).unwrap();
        assert!(md.contains("| reproduced |"), "{md}");
    }

    #[test]
    fn a_missing_mode_is_unmeasured_and_named() {
        let (e, scale) = experiment("001", 0);
        let r = report(&e, vec![mode(BenchMode::Buffered, 1000.0, 1.0)], Vec::new());
        let v = e.judge(&r, &scale);
        assert_eq!(v.outcome, Outcome::Unmeasured);
        assert!(
            v.notes[0].contains("dontcache") && v.notes[0].contains("ubio"),
            "{:?}",
            v.notes
        );
    }

    #[test]
    fn seed_004_judges_dirty_memory_and_durability() {
        let (e, scale) = experiment("004", 0);
        let mut cp = mode(BenchMode::Tool(Tool::Cp), 100.0, 0.0);
        cp.peak_dataset_dirty_writeback_bytes = Some(2 * GIB);
        cp.time_to_durable_secs = summary(30.0);
        let mut ucp = mode(BenchMode::Tool(Tool::UbioCp), 100.0, 0.0);
        ucp.peak_dataset_dirty_writeback_bytes = Some(20 * MIB);
        ucp.time_to_durable_secs = summary(31.0);
        let v = e.judge(
            &report(&e, vec![cp.clone(), ucp.clone()], Vec::new()),
            &scale,
        );
        assert_eq!(v.outcome, Outcome::Reproduced, "{v:#?}");
        ucp.time_to_durable_secs = summary(45.0);
        let v = e.judge(&report(&e, vec![cp, ucp], Vec::new()), &scale);
        assert_eq!(v.outcome, Outcome::Partly, "{v:#?}");
    }

    #[test]
    fn seed_002_uses_the_victim() {
        let (e, scale) = experiment("002", 0);
        let with_victim = |m, worst| {
            let mut s = mode(m, 100.0, 0.0);
            s.victim = Some(VictimEffect {
                median_ops_per_s: 1.0,
                worst_ops_per_s: 1.0,
                median_pct_of_solo: Some(worst),
                worst_pct_of_solo: Some(worst),
            });
            s
        };
        let mut buf = with_victim(BenchMode::Buffered, 20.0);
        buf.reclaimed_pages_per_gb = summary(200_000.0);
        let r = report(
            &e,
            vec![
                buf,
                with_victim(BenchMode::Dontcache, 90.0),
                with_victim(UBIO, 80.0),
            ],
            runs_with_kswapd(150.0),
        );
        assert_eq!(e.judge(&r, &scale).outcome, Outcome::Reproduced);
    }

    #[test]
    fn markdown_lists_every_experiment_and_figure() {
        let results = vec![ExperimentResult {
            seed: "003".into(),
            title: "t".into(),
            claim: "c".into(),
            report: "003/report.json".into(),
            verdict: Verdict::from_figures(
                vec![Figure {
                    what: "w".into(),
                    seed: "s".into(),
                    here: "h".into(),
                    holds: false,
                    not_reproduced: None,
                }],
                vec!["n".into()],
            ),
        }];
        let md = render_markdown(&results);
        assert!(md.contains("| 003 | t | not reproduced |"), "{md}");
        assert!(md.contains("| w | s | h | no |"), "{md}");
        assert!(md.contains("- n"), "{md}");
    }
}
