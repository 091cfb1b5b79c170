//! A synthetic neighbours report, for the tests of the summaries and the
//! exporters (no process, no root): one global-pressure block for
//! pgbench-ro beside tar plain and under `ubio run`, walked through the
//! real plan. The plain stream halves the rate and triples the p99; ubio
//! leaves the load near its rate alone.

use super::latency::{LatencyFigures, Second, WindowFigures};
use super::plan::{self, Beside, Cell, Load, Mode, Pressure, Stream, Want};
use super::report::*;

pub fn cell(stream: Stream, mode: Mode) -> Cell {
    Cell {
        load: Load::PgbenchRo,
        beside: Some(Beside { stream, mode }),
    }
}

/// The mock report for `seed`: three rounds.
pub fn report(seed: u64) -> NeighboursReport {
    let want = Want {
        pressures: &[Pressure::Global],
        loads: &[Load::PgbenchRo],
        streams: &[Stream::Tar],
        modes: &[Mode::Plain, Mode::UbioRun],
        rounds: 3,
        has_own: &|_| false,
    };
    let blocks = plan::plan(seed, &want);
    let mut runs = Vec::new();
    for (i, round, cell) in plan::runs(&blocks) {
        let jitter = 1.0 + 0.01 * f64::from(round);
        let (rate, p99, reclaimed) = match cell.beside.map(|b| b.mode) {
            None => (10_000.0, 2.0, 0),
            Some(Mode::Plain) => (5_000.0, 6.0, 250_000),
            Some(_) => (9_500.0, 2.2, 0),
        };
        let (rate, p99) = (rate * jitter, p99 * jitter);
        let latency = LatencyFigures {
            count: (rate * 10.0) as u64,
            mean_ms: p99 / 4.0,
            p50_ms: p99 / 5.0,
            p99_ms: p99,
            p999_ms: p99 * 2.0,
            max_ms: p99 * 5.0,
        };
        let seconds = (-2..12)
            .map(|t| Second {
                t_secs: f64::from(t),
                rate: if (0..10).contains(&t) { rate } else { 10_000.0 },
                p50_ms: Some(p99 / 5.0),
                p99_ms: Some(if (0..10).contains(&t) { p99 } else { 2.0 }),
            })
            .collect();
        let machine = (1..=10)
            .map(|t| MachineSecond {
                t_secs: f64::from(t),
                set_cached_bytes: if reclaimed > 0 { 100 << 20 } else { 256 << 20 },
                reclaimed_pages: reclaimed / 10,
                free_bytes: Some(128 << 20),
                dirty_writeback_bytes: 16 << 20,
            })
            .collect();
        runs.push(CellRun {
            pressure: blocks[i].pressure,
            round,
            cell,
            error: None,
            service: Some(WindowFigures {
                latency: Some(latency),
                rate,
                errors: 0,
                worst_second_rate: Some(rate * 0.8),
                worst_second_p99_ms: Some(p99 * 1.5),
            }),
            stream: cell.beside.map(|_| StreamFigures {
                bytes: 4 << 30,
                secs: 10.0,
                mb_per_s: 429.5 * jitter,
                reclaimed_pages: reclaimed,
                reclaimed_pages_per_gb: reclaimed as f64 / 4.294967296,
                cgroup_cache_peak_bytes: None,
                reported_to_host_bytes: Some(0),
                cpu_secs: Some(4.0 * jitter),
                daemon_cpu_secs: (cell.beside.map(|b| b.mode) == Some(Mode::Policy)).then_some(1.0),
                kswapd_cpu_secs: Some(reclaimed as f64 / 1e6),
            }),
            set_cached_start_bytes: 256 << 20,
            set_cached_min_bytes: if reclaimed > 0 { 100 << 20 } else { 256 << 20 },
            set_cached_end_bytes: 256 << 20,
            seconds,
            machine,
        });
    }
    NeighboursReport {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        settings: Settings {
            memory_bytes: 1 << 30,
            data_bytes: 4 << 30,
            pgbench_scale: 16,
            web_set_bytes: 256 << 20,
            web_file_bytes: 64 << 10,
            lead_secs: 2.0,
            alone_secs: 10.0,
            rounds: 3,
            seed,
            clients: 4,
            own_options: vec![(
                Stream::Tar,
                "none (GNU tar has no page-cache option)".into(),
            )],
        },
        environment: crate::harness::mock::environment(),
        setups: Vec::new(),
        summaries: summarize(&runs),
        plan: blocks,
        runs,
        warnings: vec!["a warning <with> & signs".into()],
        complete: true,
        wall_secs: 100.0,
    }
}
