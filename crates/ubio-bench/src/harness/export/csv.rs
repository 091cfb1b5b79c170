//! samples.csv (one row per sample of every run, with its mode and round)
//! and runs.csv (one row per run with its summary). RFC 4180: a header row,
//! commas, fields quoted when they hold a comma, quote or line break;
//! missing values (JSON null) are empty.

use crate::harness::schema::{Report, Run, Sample};

/// The columns of samples.csv after `mode,round`: every [`Sample`] field.
pub const SAMPLE_COLUMNS: [&str; 21] = [
    "t_secs",
    "interval_secs",
    "bytes",
    "mb_per_s",
    "cpu_user_secs",
    "cpu_sys_secs",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "cgroup_pgscan",
    "cgroup_pgsteal",
    "kswapd_cpu_secs",
    "cached_bytes",
    "dirty_bytes",
    "writeback_bytes",
    "cgroup_cached_bytes",
    "dataset_cached_bytes",
    "dataset_dirty_bytes",
    "dataset_writeback_bytes",
    "victim_ops_per_s",
];

fn sample_cells(s: &Sample) -> [String; 21] {
    [
        num(s.t_secs),
        num(s.interval_secs),
        s.bytes.to_string(),
        num(s.mb_per_s),
        num(s.cpu_user_secs),
        num(s.cpu_sys_secs),
        s.pgscan_kswapd.to_string(),
        s.pgscan_direct.to_string(),
        s.pgsteal_kswapd.to_string(),
        s.pgsteal_direct.to_string(),
        opt(s.cgroup_pgscan),
        opt(s.cgroup_pgsteal),
        num(s.kswapd_cpu_secs),
        s.cached_bytes.to_string(),
        s.dirty_bytes.to_string(),
        s.writeback_bytes.to_string(),
        opt(s.cgroup_cached_bytes),
        s.dataset_cached_bytes.to_string(),
        s.dataset_dirty_bytes.to_string(),
        s.dataset_writeback_bytes.to_string(),
        s.victim_ops_per_s.map(num).unwrap_or_default(),
    ]
}

/// samples.csv.
pub fn samples(report: &Report) -> String {
    let mut out = line(["mode", "round"].into_iter().chain(SAMPLE_COLUMNS));
    for run in &report.runs {
        for s in &run.samples {
            let lead = [run.mode.to_string(), run.round.to_string()];
            out += &line(
                lead.iter()
                    .map(String::as_str)
                    .chain(sample_cells(s).iter().map(String::as_str)),
            );
        }
    }
    out
}

/// The columns of runs.csv.
pub const RUN_COLUMNS: [&str; 31] = [
    "mode",
    "round",
    "backend",
    "error",
    "bytes",
    "secs",
    "mb_per_s",
    "per_second_mb_per_s_median",
    "per_second_mb_per_s_min",
    "per_second_mb_per_s_max",
    "per_second_mb_per_s_stddev",
    "per_second_samples",
    "cpu_user_secs",
    "cpu_sys_secs",
    "cpu_secs_per_gb",
    "reclaimed_pages_per_gb",
    "scanned_pages_per_gb",
    "direct_reclaimed_pages_per_gb",
    "kswapd_cpu_secs",
    "peak_dataset_cached_bytes",
    "final_dataset_cached_bytes",
    "peak_dataset_dirty_writeback_bytes",
    "time_to_durable_secs",
    "victim_median_ops_per_s",
    "victim_worst_ops_per_s",
    "victim_median_pct_of_solo",
    "victim_worst_pct_of_solo",
    "reason",
    "samples",
    "order",
    "ubio_stats",
];

fn run_cells(run: &Run, order: usize) -> Vec<String> {
    let s = &run.summary;
    let ps = s.per_second_mb_per_s;
    let v = s.victim;
    vec![
        run.mode.to_string(),
        run.round.to_string(),
        run.backend.clone(),
        run.error.clone().unwrap_or_default(),
        run.bytes.to_string(),
        num(run.secs),
        num(s.mb_per_s),
        opt_num(ps.map(|p| p.median)),
        opt_num(ps.map(|p| p.min)),
        opt_num(ps.map(|p| p.max)),
        opt_num(ps.map(|p| p.stddev)),
        opt(ps.map(|p| p.n)),
        num(s.cpu_user_secs),
        num(s.cpu_sys_secs),
        num(s.cpu_secs_per_gb),
        num(s.reclaimed_pages_per_gb),
        num(s.scanned_pages_per_gb),
        num(s.direct_reclaimed_pages_per_gb),
        num(s.kswapd_cpu_secs),
        s.peak_dataset_cached_bytes.to_string(),
        s.final_dataset_cached_bytes.to_string(),
        s.peak_dataset_dirty_writeback_bytes.to_string(),
        opt_num(s.time_to_durable_secs),
        opt_num(v.map(|v| v.median_ops_per_s)),
        opt_num(v.map(|v| v.worst_ops_per_s)),
        opt_num(v.and_then(|v| v.median_pct_of_solo)),
        opt_num(v.and_then(|v| v.worst_pct_of_solo)),
        run.reason.clone(),
        run.samples.len().to_string(),
        order.to_string(),
        run.ubio_stats
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default(),
    ]
}

/// runs.csv.
pub fn runs(report: &Report) -> String {
    let mut out = line(RUN_COLUMNS);
    for (i, run) in report.runs.iter().enumerate() {
        out += &line(run_cells(run, i + 1).iter().map(String::as_str));
    }
    out
}

/// Shortest text that reads back as the same f64.
fn num(x: f64) -> String {
    if x.is_finite() {
        x.to_string()
    } else {
        String::new()
    }
}

fn opt_num(x: Option<f64>) -> String {
    x.map(num).unwrap_or_default()
}

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// One CSV record and its line break.
fn line<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if cell.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&cell.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(cell);
        }
    }
    out.push('\n');
    out
}

/// Splits CSV text into records of fields (quotes undone): the inverse of
/// the writer above, for tests and for tools that read these files back.
pub fn parse(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let (mut record, mut field) = (Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;

    #[test]
    fn samples_have_a_header_and_one_row_per_sample() {
        let report = mock::report(5);
        let rows = parse(&samples(&report));
        let total: usize = report.runs.iter().map(|r| r.samples.len()).sum();
        assert_eq!(rows.len(), 1 + total);
        assert_eq!(rows[0][..3], ["mode", "round", "t_secs"]);
        assert!(rows.iter().all(|r| r.len() == 2 + SAMPLE_COLUMNS.len()));
    }

    #[test]
    fn sample_rows_parse_back_to_the_samples() {
        let report = mock::report(5);
        let rows = parse(&samples(&report));
        let run = &report.runs[1];
        let row = &rows[1 + report.runs[0].samples.len()];
        assert_eq!(
            (row[0].as_str(), row[1].as_str()),
            (run.mode.to_string().as_str(), "1")
        );
        let s = &run.samples[0];
        assert_eq!(row[2].parse::<f64>().unwrap(), s.t_secs);
        assert_eq!(row[4].parse::<u64>().unwrap(), s.bytes);
        assert_eq!(row[5].parse::<f64>().unwrap(), s.mb_per_s);
        assert_eq!(row[12], "", "cgroup_pgscan is null on v1");
        assert_eq!(row[22].parse::<f64>().ok(), s.victim_ops_per_s);
    }

    /// A field added to Sample must get a column.
    #[test]
    fn every_sample_field_has_a_column() {
        let report = mock::report(5);
        let value = serde_json::to_value(&report.runs[0].samples[0]).unwrap();
        let fields: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(fields.len(), SAMPLE_COLUMNS.len());
        for f in fields {
            assert!(SAMPLE_COLUMNS.contains(&f.as_str()), "{f} has no column");
        }
    }

    #[test]
    fn runs_have_one_row_each_and_quote_what_needs_it() {
        let mut report = mock::report(6);
        report.runs[0].error = Some("failed, \"badly\"\nreally".into());
        let rows = parse(&runs(&report));
        assert_eq!(rows.len(), 1 + report.runs.len());
        assert!(rows.iter().all(|r| r.len() == RUN_COLUMNS.len()));
        assert_eq!(rows[1][3], "failed, \"badly\"\nreally");
        let mb: f64 = rows[2][6].parse().unwrap();
        assert_eq!(mb, report.runs[1].summary.mb_per_s);
    }
}
