//! points.csv: one row per point and mode, every figure of the mode's
//! summary in its own column (units in the column names).

use crate::harness::matrix::record::{MatrixRecord, PointState};
use crate::stats::Summary;
use std::fmt::Write;

/// The columns, in order.
pub const COLUMNS: &[&str] = &[
    "point",
    "target",
    "workload",
    "seed_job",
    "block_bytes",
    "threads",
    "files_per_thread",
    "dataset_fraction",
    "dataset_bytes",
    "mode",
    "backend",
    "runs_ok",
    "runs_failed",
    "mb_per_s_median",
    "mb_per_s_min",
    "mb_per_s_max",
    "mb_per_s_stddev",
    "cpu_secs_per_gb_median",
    "cpu_sys_secs_per_gb_median",
    "reclaimed_pages_per_gb_median",
    "kswapd_cpu_secs_median",
    "reported_to_host_bytes_median",
    "peak_dataset_cached_bytes",
    "final_dataset_cached_bytes",
    "peak_dataset_dirty_writeback_bytes",
    "time_to_durable_secs_median",
    "memcpy_mb_per_s",
];

/// The CSV text.
pub fn render(record: &MatrixRecord) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    let opt =
        |s: Option<Summary>, f: fn(Summary) -> f64| s.map_or(String::new(), |s| f(s).to_string());
    for p in record.points.iter().filter(|p| p.state == PointState::Done) {
        let pt = &p.point;
        let w = &pt.workload;
        let memcpy = record
            .ceiling
            .as_ref()
            .and_then(|c| c.at(w.threads))
            .map_or(String::new(), |v| v.to_string());
        for m in &p.modes {
            let cells = [
                pt.id.clone(),
                pt.target.to_string(),
                w.kind.to_string(),
                pt.seed_job.to_string(),
                w.block_bytes.to_string(),
                w.threads.to_string(),
                w.files_per_thread.to_string(),
                pt.dataset_fraction.to_string(),
                w.dataset_bytes.to_string(),
                m.mode.to_string(),
                m.backend.clone(),
                m.runs_ok.to_string(),
                m.runs_failed.to_string(),
                opt(m.mb_per_s, |s| s.median),
                opt(m.mb_per_s, |s| s.min),
                opt(m.mb_per_s, |s| s.max),
                opt(m.mb_per_s, |s| s.stddev),
                opt(m.cpu_secs_per_gb, |s| s.median),
                opt(m.cpu_sys_secs_per_gb, |s| s.median),
                opt(m.reclaimed_pages_per_gb, |s| s.median),
                opt(m.kswapd_cpu_secs, |s| s.median),
                opt(m.reported_to_host_bytes, |s| s.median),
                m.peak_dataset_cached_bytes.to_string(),
                m.final_dataset_cached_bytes.to_string(),
                m.peak_dataset_dirty_writeback_bytes
                    .map_or(String::new(), |b| b.to_string()),
                opt(m.time_to_durable_secs, |s| s.median),
                memcpy.clone(),
            ];
            let quoted: Vec<String> = cells.iter().map(|c| quote(c)).collect();
            let _ = writeln!(out, "{}", quoted.join(","));
        }
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
pub(crate) fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}
