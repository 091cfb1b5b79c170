//! runs.csv (one row per run: the service's figures over the stream and
//! the stream's) and seconds.csv (one row per second of every run: the
//! load's rate and latency).

use crate::harness::export::matrix::csv::quote;
use crate::harness::neighbours::report::{CellRun, NeighboursReport};
use std::fmt::Write;

/// runs.csv's columns.
pub const RUN_COLUMNS: &[&str] = &[
    "pressure",
    "round",
    "load",
    "stream",
    "mode",
    "error",
    "rate_per_s",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
    "errors",
    "worst_second_rate",
    "worst_second_p99_ms",
    "set_cached_start_bytes",
    "set_cached_min_bytes",
    "set_cached_end_bytes",
    "stream_bytes",
    "stream_secs",
    "stream_mb_per_s",
    "reclaimed_pages",
    "reclaimed_pages_per_gb",
    "reported_to_host_bytes",
    "stream_cpu_secs",
    "daemon_cpu_secs",
    "kswapd_cpu_secs",
];

/// seconds.csv's columns.
pub const SECOND_COLUMNS: &[&str] = &[
    "pressure", "round", "load", "stream", "mode", "t_secs", "rate", "p50_ms", "p99_ms",
];

fn key(r: &CellRun) -> [String; 5] {
    let (stream, mode) = r.cell.beside.map_or((String::new(), String::new()), |b| {
        (b.stream.to_string(), b.mode.to_string())
    });
    [
        r.pressure.to_string(),
        r.round.to_string(),
        r.cell.load.to_string(),
        stream,
        mode,
    ]
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

pub fn runs(report: &NeighboursReport) -> String {
    let mut out = RUN_COLUMNS.join(",") + "\n";
    for r in &report.runs {
        let sv = r.service;
        let lat = sv.and_then(|s| s.latency);
        let st = r.stream;
        let mut cells: Vec<String> = key(r).to_vec();
        cells.extend([
            r.error.clone().unwrap_or_default(),
            opt(sv.map(|s| s.rate)),
            opt(lat.map(|l| l.p50_ms)),
            opt(lat.map(|l| l.p99_ms)),
            opt(lat.map(|l| l.p999_ms)),
            opt(lat.map(|l| l.max_ms)),
            opt(sv.map(|s| s.errors)),
            opt(sv.and_then(|s| s.worst_second_rate)),
            opt(sv.and_then(|s| s.worst_second_p99_ms)),
            r.set_cached_start_bytes.to_string(),
            r.set_cached_min_bytes.to_string(),
            r.set_cached_end_bytes.to_string(),
            opt(st.map(|s| s.bytes)),
            opt(st.map(|s| s.secs)),
            opt(st.map(|s| s.mb_per_s)),
            opt(st.map(|s| s.reclaimed_pages)),
            opt(st.map(|s| s.reclaimed_pages_per_gb)),
            opt(st.and_then(|s| s.reported_to_host_bytes)),
            opt(st.and_then(|s| s.cpu_secs)),
            opt(st.and_then(|s| s.daemon_cpu_secs)),
            opt(st.and_then(|s| s.kswapd_cpu_secs)),
        ]);
        let quoted: Vec<String> = cells.iter().map(|c| quote(c)).collect();
        let _ = writeln!(out, "{}", quoted.join(","));
    }
    out
}

pub fn seconds(report: &NeighboursReport) -> String {
    let mut out = SECOND_COLUMNS.join(",") + "\n";
    for r in &report.runs {
        let k = key(r).join(",");
        for s in &r.seconds {
            let _ = writeln!(
                out,
                "{k},{},{},{},{}",
                s.t_secs,
                s.rate,
                opt(s.p50_ms),
                opt(s.p99_ms)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::neighbours::mock;

    #[test]
    fn a_row_per_run_and_per_second() {
        let r = mock::report(2);
        let runs = runs(&r);
        assert_eq!(runs.lines().count(), 1 + r.runs.len());
        for line in runs.lines() {
            assert_eq!(line.split(',').count(), RUN_COLUMNS.len(), "{line}");
        }
        assert!(
            runs.contains("global,1,pgbench-ro,tar,ubio-run,,"),
            "{runs}"
        );
        let secs = seconds(&r);
        let n: usize = r.runs.iter().map(|x| x.seconds.len()).sum();
        assert_eq!(secs.lines().count(), 1 + n);
        assert!(secs
            .lines()
            .all(|l| l.split(',').count() == SECOND_COLUMNS.len()));
    }
}
