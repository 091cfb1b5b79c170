//! What a neighbours run records (`neighbours.json`, the source of every
//! export) and the medians over its rounds.

use super::latency::{LatencyFigures, Second, WindowFigures};
use super::plan::{Beside, Block, Cell, Load, Mode, Pressure, Service, Stream};
use crate::harness::schema::{Environment, PressureRecord};
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// The schema's name and version (2: the stream's, the daemon's and
/// kswapd's CPU; a version 1 record reads with them absent).
pub const SCHEMA: &str = "ubio-neighbours";
pub const SCHEMA_VERSION: u32 = 2;

/// The sizes and settings of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The memory left to the service and the stream together: under
    /// global pressure what the balloon leaves to the whole machine, in
    /// cgroups half of it is each one's limit.
    pub memory_bytes: u64,
    /// The tree tar and restic read, and the image file rsync and cp copy.
    pub data_bytes: u64,
    /// PostgreSQL's pgbench scale (about 15 MiB of database per unit).
    pub pgbench_scale: u32,
    /// The files nginx serves, in all.
    pub web_set_bytes: u64,
    pub web_file_bytes: u64,
    /// Seconds each load runs before the stream starts and after it ends.
    pub lead_secs: f64,
    /// Seconds a load is measured alone.
    pub alone_secs: f64,
    pub rounds: u32,
    pub seed: u64,
    /// pgbench's and wrk's clients (connections).
    pub clients: u32,
    /// Why a stream has no own option, or which one it has.
    pub own_options: Vec<(Stream, String)>,
}

/// A block's setup, as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockSetup {
    pub pressure: Pressure,
    pub service: Service,
    /// The database's or the served files' size on disk.
    pub set_bytes: u64,
    /// Memory cgroup limits (cgroup pressure).
    pub service_limit_bytes: Option<u64>,
    pub stream_limit_bytes: Option<u64>,
    /// The balloon (global pressure).
    pub balloon: Option<PressureRecord>,
}

/// The stream's side of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    /// What it read (the tree or the image).
    pub bytes: u64,
    /// From its start to its output durable (the command, then `sync -f`).
    pub secs: f64,
    pub mb_per_s: f64,
    /// Pages reclaimed during it: kswapd, direct and the memory cgroups'
    /// limits (a tracepoint); per GB it read.
    pub reclaimed_pages: u64,
    pub reclaimed_pages_per_gb: f64,
    /// The most of the page cache the stream's cgroup held (memory.stat).
    pub cgroup_cache_peak_bytes: Option<u64>,
    /// Memory the VM handed back to its host during it.
    pub reported_to_host_bytes: Option<u64>,
    /// CPU seconds (user + system) of the stream's command and every
    /// process it waited for, `ubio run` and its engine included.
    #[serde(default)]
    pub cpu_secs: Option<f64>,
    /// The policy daemon's CPU seconds from the stream's start until it
    /// managed nothing (policy mode only).
    #[serde(default)]
    pub daemon_cpu_secs: Option<f64>,
    /// kswapd's CPU seconds during it (every kswapd thread).
    #[serde(default)]
    pub kswapd_cpu_secs: Option<f64>,
}

impl StreamFigures {
    fn per_gb(&self, secs: f64) -> f64 {
        secs / (self.bytes as f64 / 1e9)
    }

    /// What the stream cost in CPU per GB it read: its own processes and,
    /// under the policy daemon, the daemon's.
    pub fn cpu_secs_per_gb(&self) -> Option<f64> {
        let own = self.cpu_secs?;
        Some(self.per_gb(own + self.daemon_cpu_secs.unwrap_or(0.0)))
    }

    pub fn kswapd_cpu_secs_per_gb(&self) -> Option<f64> {
        Some(self.per_gb(self.kswapd_cpu_secs?))
    }
}

/// One second of the machine during a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineSecond {
    /// Its end, in seconds from the stream's start.
    pub t_secs: f64,
    /// The service's set in the page cache (cachestat).
    pub set_cached_bytes: u64,
    pub reclaimed_pages: u64,
    pub free_bytes: Option<u64>,
    pub dirty_writeback_bytes: u64,
}

/// One run of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRun {
    pub pressure: Pressure,
    pub round: u32,
    pub cell: Cell,
    pub error: Option<String>,
    /// Over the stream's run (or the time alone).
    pub service: Option<WindowFigures>,
    pub stream: Option<StreamFigures>,
    /// The service's set in the page cache at the stream's start, its
    /// lowest during the run and at its end.
    pub set_cached_start_bytes: u64,
    pub set_cached_min_bytes: u64,
    pub set_cached_end_bytes: u64,
    /// The load, second by second, from the lead-in to the tail.
    pub seconds: Vec<Second>,
    pub machine: Vec<MachineSecond>,
}

/// A cell's figures over its rounds (medians; [min, max] where kept).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub pressure: Pressure,
    pub cell: Cell,
    pub runs_ok: u32,
    pub runs_failed: u32,
    pub p50_ms: Option<Summary>,
    pub p99_ms: Option<Summary>,
    pub p999_ms: Option<Summary>,
    pub rate: Option<Summary>,
    pub worst_second_rate: Option<Summary>,
    pub worst_second_p99_ms: Option<Summary>,
    /// The median rate as a share of the same load alone (%), and the
    /// median p99 as a multiple of it.
    pub rate_pct_of_alone: Option<f64>,
    pub p99_x_alone: Option<f64>,
    pub set_cached_min_bytes: Option<Summary>,
    pub stream_mb_per_s: Option<Summary>,
    pub reclaimed_pages_per_gb: Option<Summary>,
    /// [`StreamFigures::cpu_secs_per_gb`] and kswapd's per GB.
    #[serde(default)]
    pub cpu_secs_per_gb: Option<Summary>,
    #[serde(default)]
    pub kswapd_cpu_secs_per_gb: Option<Summary>,
}

/// The whole record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighboursReport {
    pub schema: String,
    pub schema_version: u32,
    pub settings: Settings,
    pub environment: Environment,
    pub plan: Vec<Block>,
    pub setups: Vec<BlockSetup>,
    pub runs: Vec<CellRun>,
    pub summaries: Vec<CellSummary>,
    pub warnings: Vec<String>,
    pub complete: bool,
    pub wall_secs: f64,
}

impl NeighboursReport {
    pub fn from_json(text: &str) -> Result<NeighboursReport, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The summary of `cell` under `pressure`.
    pub fn summary(&self, pressure: Pressure, cell: Cell) -> Option<&CellSummary> {
        self.summaries
            .iter()
            .find(|s| s.pressure == pressure && s.cell == cell)
    }
}

/// Every cell's summary, in the plan's first-round order sorted (load,
/// alone first, then stream and mode).
pub fn summarize(runs: &[CellRun]) -> Vec<CellSummary> {
    let mut keys: Vec<(Pressure, Cell)> = runs.iter().map(|r| (r.pressure, r.cell)).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<CellSummary> = keys
        .iter()
        .map(|&(pressure, cell)| {
            let mine: Vec<&CellRun> = runs
                .iter()
                .filter(|r| r.pressure == pressure && r.cell == cell)
                .collect();
            let ok: Vec<&CellRun> = mine
                .iter()
                .copied()
                .filter(|r| r.error.is_none() && r.service.is_some())
                .collect();
            let lat = |f: fn(&LatencyFigures) -> f64| {
                of(ok.iter().filter_map(|r| r.service?.latency.as_ref().map(f)))
            };
            CellSummary {
                pressure,
                cell,
                runs_ok: ok.len() as u32,
                runs_failed: (mine.len() - ok.len()) as u32,
                p50_ms: lat(|l| l.p50_ms),
                p99_ms: lat(|l| l.p99_ms),
                p999_ms: lat(|l| l.p999_ms),
                rate: of(ok.iter().filter_map(|r| Some(r.service?.rate))),
                worst_second_rate: of(ok.iter().filter_map(|r| r.service?.worst_second_rate)),
                worst_second_p99_ms: of(ok.iter().filter_map(|r| r.service?.worst_second_p99_ms)),
                rate_pct_of_alone: None,
                p99_x_alone: None,
                set_cached_min_bytes: of(ok.iter().map(|r| r.set_cached_min_bytes as f64)),
                stream_mb_per_s: of(ok.iter().filter_map(|r| Some(r.stream?.mb_per_s))),
                reclaimed_pages_per_gb: of(ok
                    .iter()
                    .filter_map(|r| Some(r.stream?.reclaimed_pages_per_gb))),
                cpu_secs_per_gb: of(ok.iter().filter_map(|r| r.stream?.cpu_secs_per_gb())),
                kswapd_cpu_secs_per_gb: of(ok
                    .iter()
                    .filter_map(|r| r.stream?.kswapd_cpu_secs_per_gb())),
            }
        })
        .collect();
    let alone: Vec<(Pressure, Load, CellSummary)> = out
        .iter()
        .filter(|s| s.cell.beside.is_none())
        .map(|s| (s.pressure, s.cell.load, *s))
        .collect();
    for s in &mut out {
        let Some((_, _, a)) = alone
            .iter()
            .find(|(p, l, _)| *p == s.pressure && *l == s.cell.load)
        else {
            continue;
        };
        s.rate_pct_of_alone = s
            .rate
            .zip(a.rate)
            .filter(|(_, a)| a.median > 0.0)
            .map(|(s, a)| 100.0 * s.median / a.median);
        s.p99_x_alone = s
            .p99_ms
            .zip(a.p99_ms)
            .filter(|(_, a)| a.median > 0.0)
            .map(|(s, a)| s.median / a.median);
    }
    out
}

fn of(values: impl Iterator<Item = f64>) -> Option<Summary> {
    Summary::of(&values.collect::<Vec<f64>>())
}

/// The summaries of one load under one pressure, alone first, then by
/// stream and mode (the tables' rows).
pub fn rows(report: &NeighboursReport, pressure: Pressure, load: Load) -> Vec<&CellSummary> {
    let mut v: Vec<&CellSummary> = report
        .summaries
        .iter()
        .filter(|s| s.pressure == pressure && s.cell.load == load)
        .collect();
    v.sort_by_key(|s| s.cell.beside.map(|b| (b.stream, b.mode)));
    v
}

/// The run of `pressure`/`load`/`beside` whose p99 is the median of its
/// rounds (the one a plot shows).
pub fn median_run(
    report: &NeighboursReport,
    pressure: Pressure,
    load: Load,
    beside: Option<Beside>,
) -> Option<&CellRun> {
    let mut ok: Vec<&CellRun> = report
        .runs
        .iter()
        .filter(|r| {
            r.pressure == pressure
                && r.cell.load == load
                && r.cell.beside == beside
                && r.error.is_none()
        })
        .filter(|r| r.service.and_then(|s| s.latency).is_some())
        .collect();
    ok.sort_by(|a, b| {
        let p = |r: &CellRun| r.service.and_then(|s| s.latency).map_or(0.0, |l| l.p99_ms);
        p(a).total_cmp(&p(b))
    });
    ok.get(ok.len().saturating_sub(1) / 2).copied()
}

/// The modes a stream ran in, in their order.
pub fn modes_of(report: &NeighboursReport, stream: Stream) -> Vec<Mode> {
    let mut m: Vec<Mode> = report
        .runs
        .iter()
        .filter_map(|r| r.cell.beside)
        .filter(|b| b.stream == stream)
        .map(|b| b.mode)
        .collect();
    m.sort();
    m.dedup();
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::neighbours::mock;

    #[test]
    fn medians_over_rounds_and_ratios_to_alone() {
        let r = mock::report(3);
        let alone = r
            .summary(
                Pressure::Global,
                Cell {
                    load: Load::PgbenchRo,
                    beside: None,
                },
            )
            .unwrap();
        assert_eq!((alone.runs_ok, alone.runs_failed), (3, 0));
        assert_eq!(alone.rate_pct_of_alone, Some(100.0));
        assert_eq!(alone.p99_x_alone, Some(1.0));
        assert_eq!(alone.stream_mb_per_s, None);
        let plain = r
            .summary(Pressure::Global, mock::cell(Stream::Tar, Mode::Plain))
            .unwrap();
        let ubio = r
            .summary(Pressure::Global, mock::cell(Stream::Tar, Mode::UbioRun))
            .unwrap();
        // The mock's plain stream halves the rate and triples p99.
        assert!((plain.rate_pct_of_alone.unwrap() - 50.0).abs() < 1e-6);
        assert!((plain.p99_x_alone.unwrap() - 3.0).abs() < 1e-6);
        assert!(ubio.rate_pct_of_alone.unwrap() > 90.0);
        assert_eq!(plain.stream_mb_per_s.unwrap().n, 3);
        assert!(plain.reclaimed_pages_per_gb.unwrap().median > 0.0);
        assert_eq!(ubio.reclaimed_pages_per_gb.unwrap().median, 0.0);
    }

    #[test]
    fn a_failed_run_counts_but_has_no_figures() {
        let mut r = mock::report(4);
        let i = r
            .runs
            .iter()
            .position(|x| x.cell == mock::cell(Stream::Tar, Mode::Plain))
            .unwrap();
        r.runs[i].error = Some("tar: exit status 2".into());
        let s = summarize(&r.runs);
        let plain = s
            .iter()
            .find(|s| s.pressure == r.runs[i].pressure && s.cell == r.runs[i].cell)
            .unwrap();
        assert_eq!((plain.runs_ok, plain.runs_failed), (2, 1));
        assert_eq!(plain.rate.unwrap().n, 2);
    }

    #[test]
    fn rows_put_alone_first_and_the_median_run_is_found() {
        let r = mock::report(5);
        let rows = rows(&r, Pressure::Global, Load::PgbenchRo);
        assert_eq!(rows[0].cell.beside, None);
        assert!(rows.len() > 2);
        let m = median_run(&r, Pressure::Global, Load::PgbenchRo, None).unwrap();
        assert_eq!(m.cell.beside, None);
        assert_eq!(modes_of(&r, Stream::Tar), [Mode::Plain, Mode::UbioRun]);
        let back = NeighboursReport::from_json(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
