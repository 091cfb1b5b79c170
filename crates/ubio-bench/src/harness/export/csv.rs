//! samples.csv (one row per sample of every run, with its mode and round)
//! and runs.csv (one row per run with its summary). RFC 4180: a header row,
//! commas, fields quoted when they hold a comma, quote or line break;
//! missing values (JSON null) are empty.

use crate::harness::schema::{Report, Run};
use serde::Serialize;
use serde_json::{Map, Value};

/// The order of the columns of samples.csv after `mode,round`. Every
/// [`Sample`](crate::harness::schema::Sample) field gets a column: one not
/// listed here (added later) comes after these, so no field is ever left out.
pub const SAMPLE_COLUMNS: &[&str] = &[
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
    "memcg_limit_reclaimed_pages",
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

/// The order of the columns of runs.csv: the run's own fields, then its
/// summary flattened (`per_second_mb_per_s.median` becomes
/// `per_second_mb_per_s_median`); fields not listed come last.
pub const RUN_COLUMNS: &[&str] = &[
    "order",
    "mode",
    "round",
    "backend",
    "error",
    "bytes",
    "secs",
    "samples",
    "mb_per_s",
    "per_second_mb_per_s_median",
    "per_second_mb_per_s_min",
    "per_second_mb_per_s_max",
    "per_second_mb_per_s_stddev",
    "per_second_mb_per_s_n",
    "cpu_user_secs",
    "cpu_sys_secs",
    "cpu_secs_per_gb",
    "cpu_sys_secs_per_gb",
    "reported_to_host_bytes",
    "prefaulted_bytes",
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
    "ubio_stats",
];

/// samples.csv.
pub fn samples(report: &Report) -> String {
    let rows: Vec<Map<String, Value>> = report
        .runs
        .iter()
        .flat_map(|run| {
            run.samples.iter().map(move |s| {
                let mut row = Map::new();
                row.insert("mode".into(), run.mode.to_string().into());
                row.insert("round".into(), run.round.into());
                flatten(&to_value(s), &mut row);
                row
            })
        })
        .collect();
    let preferred: Vec<&str> = ["mode", "round"]
        .iter()
        .chain(SAMPLE_COLUMNS)
        .copied()
        .collect();
    table(&rows, &preferred)
}

/// runs.csv.
pub fn runs(report: &Report) -> String {
    let rows: Vec<Map<String, Value>> = report
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| run_row(i + 1, run))
        .collect();
    table(&rows, RUN_COLUMNS)
}

fn run_row(order: usize, run: &Run) -> Map<String, Value> {
    let mut row = Map::new();
    row.insert("order".into(), order.into());
    row.insert("mode".into(), run.mode.to_string().into());
    row.insert("round".into(), run.round.into());
    row.insert("backend".into(), run.backend.clone().into());
    row.insert("reason".into(), run.reason.clone().into());
    row.insert("error".into(), run.error.clone().into());
    row.insert("bytes".into(), run.bytes.into());
    row.insert("secs".into(), run.secs.into());
    row.insert("samples".into(), run.samples.len().into());
    row.insert("prefaulted_bytes".into(), run.prefaulted_bytes.into());
    // ubio's per-file stats stay one JSON cell.
    let stats = run.ubio_stats.as_ref().map(Value::to_string);
    row.insert("ubio_stats".into(), stats.into());
    flatten(&to_value(&run.summary), &mut row);
    row
}

fn to_value(x: &impl Serialize) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

/// Adds `value`'s leaves to `row`, nested objects as `outer_inner` keys; a
/// null object (a summary that is absent) leaves its columns to the other
/// rows.
fn flatten(value: &Value, row: &mut Map<String, Value>) {
    row.extend(
        super::json::leaves(value, "_")
            .into_iter()
            .map(|(k, v)| (k, v.clone())),
    );
}

/// The header (preferred columns first, then any other key, sorted) and
/// one line per row; a key a row lacks is an empty cell.
fn table(rows: &[Map<String, Value>], preferred: &[&str]) -> String {
    let mut columns: Vec<String> = preferred.iter().map(|c| c.to_string()).collect();
    let mut extra: Vec<&String> = rows
        .iter()
        .flat_map(|r| r.keys())
        .filter(|k| !preferred.contains(&k.as_str()))
        .collect();
    extra.sort();
    extra.dedup();
    columns.extend(extra.into_iter().cloned());
    // Columns no row has (a field this version of the report lacks) go.
    columns.retain(|c| rows.iter().any(|r| r.contains_key(c)) || rows.is_empty());
    let mut out = line(columns.iter().map(String::as_str));
    for row in rows {
        let cells: Vec<String> = columns.iter().map(|c| cell(row.get(c))).collect();
        out += &line(cells.iter().map(String::as_str));
    }
    out
}

/// A value as CSV text: numbers as JSON writes them (shortest text that
/// reads back as the same number), strings as they are, null or missing
/// as empty.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;

    /// Splits CSV text into records of fields (quotes undone): the inverse
    /// of the writer above.
    fn parse(text: &str) -> Vec<Vec<String>> {
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

    fn column(rows: &[Vec<String>], name: &str) -> usize {
        rows[0]
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }

    #[test]
    fn samples_have_a_header_and_one_row_per_sample() {
        let report = mock::report(5);
        let rows = parse(&samples(&report));
        let total: usize = report.runs.iter().map(|r| r.samples.len()).sum();
        assert_eq!(rows.len(), 1 + total);
        assert_eq!(rows[0][..3], ["mode", "round", "t_secs"]);
        assert!(rows.iter().all(|r| r.len() == rows[0].len()));
    }

    #[test]
    fn sample_rows_parse_back_to_the_samples() {
        let report = mock::report(5);
        let rows = parse(&samples(&report));
        let run = &report.runs[1];
        let row = &rows[1 + report.runs[0].samples.len()];
        assert_eq!(row[0], run.mode.to_string());
        assert_eq!(row[1], "1");
        let s = &run.samples[0];
        let get = |name: &str| row[column(&rows, name)].as_str();
        assert_eq!(get("t_secs").parse::<f64>().unwrap(), s.t_secs);
        assert_eq!(get("bytes").parse::<u64>().unwrap(), s.bytes);
        assert_eq!(get("mb_per_s").parse::<f64>().unwrap(), s.mb_per_s);
        assert_eq!(get("cgroup_pgscan"), "", "null on cgroup v1");
        assert_eq!(
            get("victim_ops_per_s").parse::<f64>().ok(),
            s.victim_ops_per_s
        );
    }

    /// Every Sample field has a column, also one added after this exporter.
    #[test]
    fn every_sample_field_has_a_column() {
        let report = mock::report(5);
        let header = &parse(&samples(&report))[0];
        let value = serde_json::to_value(&report.runs[0].samples[0]).unwrap();
        for field in value.as_object().unwrap().keys() {
            assert!(header.contains(field), "{field} has no column");
        }
        assert_eq!(header.len(), 2 + value.as_object().unwrap().len());
    }

    #[test]
    fn runs_have_one_row_each_and_quote_what_needs_it() {
        let mut report = mock::report(6);
        report.runs[0].error = Some("failed, \"badly\"\nreally".into());
        let rows = parse(&runs(&report));
        assert_eq!(rows.len(), 1 + report.runs.len());
        assert!(rows.iter().all(|r| r.len() == rows[0].len()));
        assert_eq!(rows[1][column(&rows, "error")], "failed, \"badly\"\nreally");
        let reported: u64 = rows[2][column(&rows, "reported_to_host_bytes")]
            .parse()
            .unwrap();
        assert_eq!(
            Some(reported),
            report.runs[1].summary.reported_to_host_bytes
        );
        let sys: f64 = rows[2][column(&rows, "cpu_sys_secs_per_gb")]
            .parse()
            .unwrap();
        assert_eq!(sys, report.runs[1].summary.cpu_sys_secs_per_gb);
        let mb: f64 = rows[2][column(&rows, "mb_per_s")].parse().unwrap();
        assert_eq!(mb, report.runs[1].summary.mb_per_s);
        let worst: f64 = rows[2][column(&rows, "victim_worst_pct_of_solo")]
            .parse()
            .unwrap();
        assert_eq!(
            Some(worst),
            report.runs[1].summary.victim.unwrap().worst_pct_of_solo
        );
    }

    #[test]
    fn every_summary_field_has_a_column() {
        let report = mock::report(6);
        let header = &parse(&runs(&report))[0];
        let mut flat = Map::new();
        flatten(&to_value(&report.runs[0].summary), &mut flat);
        for field in flat.keys() {
            assert!(header.contains(field), "{field} has no column");
        }
    }
}
