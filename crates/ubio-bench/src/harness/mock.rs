//! A made-up but realistic [`Report`] for testing the results side (summaries,
//! exporters, compare, the CLI) without a disk: a 64 KiB sequential write of
//! 4 GB under a 256 MiB cgroup, five modes (buffered's backed twin among
//! them), three rounds in the order of a [`Schedule`] (the runner's seam:
//! the same walk over the rounds, without processes), a victim, one failed
//! run, a fio check and a warning, with per-second samples from a seeded
//! generator (the same seed gives the same report and order).

use super::mode::{Backable, BenchMode, WorkloadKind};
use super::schedule::Schedule;
use super::schema::{
    Backing, Config, Environment, FioCheck, Report, Run, Sample, Target, VictimSolo,
    Virtualization, Workload,
};
use super::summary::{summarize_modes, summarize_run, RunInput};
use crate::rng::SplitMix64;
use crate::stats::Summary;
use ubio::BackendKind;

/// How each mock mode behaves: throughput, page-cache footprint, CPU per
/// second, and how much of its solo rate the victim keeps.
struct Profile {
    mode: BenchMode,
    backend: &'static str,
    mb_per_s: f64,
    cache_fraction: f64,
    cpu_per_s: f64,
    victim_fraction: f64,
}

const PROFILES: [Profile; 5] = [
    Profile {
        mode: BenchMode::Buffered,
        backend: "std",
        mb_per_s: 400.0,
        cache_fraction: 0.9,
        cpu_per_s: 0.6,
        victim_fraction: 0.4,
    },
    Profile {
        mode: BenchMode::Dontcache,
        backend: "RWF_DONTCACHE",
        mb_per_s: 350.0,
        cache_fraction: 0.05,
        cpu_per_s: 0.5,
        victim_fraction: 0.95,
    },
    Profile {
        mode: BenchMode::Odirect,
        backend: "O_DIRECT",
        mb_per_s: 300.0,
        cache_fraction: 0.0,
        cpu_per_s: 0.2,
        victim_fraction: 0.97,
    },
    Profile {
        mode: BenchMode::Ubio(BackendKind::Auto),
        backend: "kernel",
        mb_per_s: 380.0,
        cache_fraction: 0.05,
        cpu_per_s: 0.5,
        victim_fraction: 0.93,
    },
    Profile {
        mode: BenchMode::Backed(Backable::Buffered),
        backend: "std",
        mb_per_s: 520.0,
        cache_fraction: 0.9,
        cpu_per_s: 0.4,
        victim_fraction: 0.4,
    },
];

const DATASET: u64 = 4_000_000_000;
const LIMIT: u64 = 256 << 20;
const ROUNDS: u32 = 3;
const VICTIM_SOLO: f64 = 2000.0;

/// The harness's generator, for jitter.
struct Rng(SplitMix64);

impl Rng {
    /// A factor in 1 ± `spread`.
    fn jitter(&mut self, spread: f64) -> f64 {
        1.0 + spread * (2.0 * self.0.unit() - 1.0)
    }
}

/// The mock report for `seed`, complete, with its mode summaries.
pub fn report(seed: u64) -> Report {
    let mut rng = Rng(SplitMix64(seed));
    let environment = environment();
    let config = Config {
        workload: Workload {
            kind: WorkloadKind::SeqWrite,
            block_bytes: 64 << 10,
            threads: 2,
            files_per_thread: 1,
            dataset_bytes: DATASET,
            duration_secs: None,
            queue_depth: 1,
            seed: 42,
            processes: 1,
            shared_file: false,
        },
        modes: PROFILES.iter().map(|p| p.mode).collect(),
        rounds: ROUNDS,
        target: Target::Loop {
            filesystem: "ext4".into(),
            backing: Backing::Shm,
            size_bytes: 4 << 30,
            throttle_mb_per_s: None,
        },
        memory_limit_bytes: Some(LIMIT),
        victim_hot_bytes: Some(64 << 20),
        global_pressure: None,
    };
    let mut report = Report::new(environment, config, 1_700_000_000);
    let solo: Vec<f64> = (0..5).map(|_| VICTIM_SOLO * rng.jitter(0.02)).collect();
    let solo = Summary::of(&solo).expect("samples");
    report.victim_solo = Some(VictimSolo { ops_per_s: solo });

    let schedule = Schedule::new(seed, &report.config.modes, ROUNDS);
    for (round, mode) in schedule.runs() {
        let profile = PROFILES.iter().find(|p| p.mode == mode).expect("a profile");
        let mut run = mock_run(&mut rng, profile, round, solo.median);
        // One failure, to show that failed runs stay out of the summaries.
        if profile.mode == BenchMode::Odirect && round == 2 {
            run.error = Some("pwrite: Input/output error (mock)".into());
        }
        report.runs.push(run);
    }
    report.schedule = Some(schedule);
    report.modes = summarize_modes(&report);
    let buffered = report.modes[0].mb_per_s.expect("buffered ran").median;
    report.fio.push(FioCheck {
        mode: BenchMode::Buffered,
        command: "fio --name=seq-write --rw=write --bs=64k --size=500M --numjobs=2".into(),
        fio_version: "fio-3.33".into(),
        fio_mb_per_s: buffered * 1.04,
        fio_runs_mb_per_s: vec![buffered * 1.02, buffered * 1.04, buffered * 1.07],
        harness_mb_per_s: buffered,
        difference_pct: (1.0 / 1.04 - 1.0) * 100.0,
        agrees: true,
    });
    report
        .warnings
        .push("fio ran a 500 MB job (<the dataset) & may read higher: compare with care".into());
    report.wall_secs = report.runs.iter().map(|r| r.secs + 2.0).sum();
    report.complete = true;
    report
}

/// The mock machine: a 2-core Firecracker VM with free page reporting.
pub fn environment() -> Environment {
    Environment {
        tool_version: "ubio 0.1.0".into(),
        git_commit: Some("mock".into()),
        kernel: "6.18.0-mock".into(),
        hostname: "mockhost".into(),
        cpu_model: "Mock CPU <2 cores> & co".into(),
        cpus: 2,
        mem_total_bytes: 24 << 30,
        cgroup_version: "v1".into(),
        filesystem: "ext4".into(),
        device: "loop on /dev/shm".into(),
        probe: serde_json::json!({ "backend": "kernel" }),
        tools: [("fio".to_owned(), "fio-3.33".to_owned())].into(),
        virtualization: Virtualization {
            summary: "Firecracker (kvm) VM, in a docker container".into(),
            vm: Some("kvm".into()),
            container: Some("docker".into()),
            dmi: None,
            cpuinfo_hypervisor: true,
            hypervisor: Some("Firecracker".into()),
        },
        free_page_reporting: Some(
            [("page_reporting_order", "9"), ("reported_kib", "3605112")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
        ),
        ubio_settings: Default::default(),
    }
}

/// Scales `mode`'s throughput (its runs' and their samples') by `factor` and
/// summarises the modes again, keeping everything else: the same benchmark,
/// slower or faster in one mode.
pub fn scale_throughput(report: &mut Report, mode: BenchMode, factor: f64) {
    for run in report.runs.iter_mut().filter(|r| r.mode == mode) {
        run.summary.mb_per_s *= factor;
        for s in &mut run.samples {
            s.mb_per_s *= factor;
        }
    }
    report.modes = summarize_modes(report);
}

/// One run of `profile`: whole seconds at a jittered rate, then a short tail.
fn mock_run(rng: &mut Rng, profile: &Profile, round: u32, solo: f64) -> Run {
    let rate = profile.mb_per_s * 1e6 * rng.jitter(0.03);
    let mut samples = Vec::new();
    let (mut moved, mut t, mut cached) = (0u64, 0.0f64, 0u64);
    while moved < DATASET {
        let full = (rate * rng.jitter(0.08)) as u64;
        let bytes = full.min(DATASET - moved);
        let interval = if bytes < full {
            bytes as f64 / full as f64
        } else {
            1.0
        };
        moved += bytes;
        t += interval;
        let cap = (LIMIT as f64 * profile.cache_fraction) as u64;
        // The cache fills over a few seconds up to the mode's share of the limit.
        cached = (cached + (bytes as f64 * profile.cache_fraction / 5.0) as u64).min(cap);
        let dirty = (cached / 4).min(16 << 20);
        let cpu = profile.cpu_per_s * interval * rng.jitter(0.1);
        let reclaim = (bytes as f64 / 4096.0 * profile.cache_fraction * rng.jitter(0.2)) as u64;
        samples.push(Sample {
            t_secs: t,
            interval_secs: interval,
            bytes,
            mb_per_s: bytes as f64 / 1e6 / interval,
            cpu_user_secs: cpu * 0.1,
            cpu_sys_secs: cpu * 0.9,
            pgscan_kswapd: reclaim + reclaim / 5,
            pgscan_direct: reclaim / 20,
            pgsteal_kswapd: reclaim,
            pgsteal_direct: reclaim / 25,
            cgroup_pgscan: None,
            cgroup_pgsteal: None,
            memcg_limit_reclaimed_pages: None,
            kswapd_cpu_secs: 0.3 * profile.cache_fraction * interval,
            cached_bytes: (4 << 30) + cached,
            dirty_bytes: dirty + (1 << 20),
            writeback_bytes: dirty / 2,
            free_bytes: Some((1 << 30) - cached.min(1 << 29)),
            cgroup_cached_bytes: Some(cached + (64 << 20)),
            dataset_cached_bytes: cached,
            dataset_dirty_bytes: Some(dirty),
            dataset_writeback_bytes: Some(dirty / 2),
            victim_ops_per_s: Some(victim(profile, cached, cap) * rng.jitter(0.1)),
        });
    }
    let durable = t + 0.2 * profile.cache_fraction;
    let summary = summarize_run(&RunInput {
        samples: &samples,
        bytes: moved,
        secs: durable,
        time_to_durable_secs: Some(durable),
        final_dataset_cached_bytes: Some(cached / 2),
        victim_solo_ops_per_s: Some(solo),
        fast_peaks: None,
        reported_to_host_bytes: Some(
            (moved as f64 * profile.cache_fraction * rng.jitter(0.5) / 16.0) as u64,
        ),
    });
    Run {
        mode: profile.mode,
        round,
        backend: profile.backend.into(),
        reason: "mock".into(),
        error: None,
        bytes: moved,
        secs: durable,
        samples,
        summary,
        ubio_stats: None,
        prefaulted_bytes: profile.mode.caps().prefault.then_some(moved),
    }
}

/// The victim's rate: it loses its share as the streamer's cache grows.
fn victim(profile: &Profile, cached: u64, cap: u64) -> f64 {
    let filled = if cap > 0 {
        cached as f64 / cap as f64
    } else {
        1.0
    };
    VICTIM_SOLO * (1.0 - (1.0 - profile.victim_fraction) * filled)
}
