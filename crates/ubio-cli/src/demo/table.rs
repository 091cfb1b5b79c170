//! Pieces of the human tables that `ubio demo` and `ubio demo --copy` share:
//! the optional hot-file reader columns, the "reader alone" cells and the
//! wrapped findings below the table.

use super::{kilo, percent, wrap, ReaderOutcome, ReaderSummary};
use std::fmt::Write as _;
use ubio_bench::stats::Summary;

/// Writes one table line: `cells`, then `reader_cells` when the reader ran,
/// without trailing blanks.
pub(super) fn push_line(o: &mut String, cells: String, reader_cells: Option<String>) {
    let mut line = cells;
    if let Some(reader_cells) = reader_cells {
        line.push_str(&reader_cells);
    }
    let _ = writeln!(o, "{}", line.trim_end());
}

/// " 37%" (or nothing): a share of the reader's speed alone after a rate.
fn pct_suffix(p: Option<f64>) -> String {
    p.map(|p| format!(" {:>4}", percent(p))).unwrap_or_default()
}

/// The median MB/s and "(min-max)" cells.
pub(super) fn speed_cells(mb_per_s: &Summary) -> [String; 2] {
    [
        format!("{:.0}", mb_per_s.median),
        format!("({:.0}-{:.0})", mb_per_s.min, mb_per_s.max),
    ]
}

/// A mode's hot-file reader columns: the least of the hot file seen cached
/// (as a share of it), then the reader's "reads/s" and "worst sec" (rate
/// and % of its speed alone, or "-" when it reported nothing).
pub(super) fn reader_columns(r: &ReaderOutcome, hot_bytes: u64) -> [String; 3] {
    let cell = |rate: f64, pct: Option<f64>| format!("{}{}", kilo(rate), pct_suffix(pct));
    let (med, worst) = match r.reader {
        Some(rd) => (
            cell(rd.median_reads_per_s, r.reader_median_pct_of_solo),
            cell(rd.worst_reads_per_s, r.reader_worst_pct_of_solo),
        ),
        None => ("-".into(), "-".into()),
    };
    [
        hot_cached_cell(r.hot_cached_min_bytes, hot_bytes),
        med,
        worst,
    ]
}

/// The "reader alone" row's "reads/s" and "worst sec" cells.
pub(super) fn solo_cells(solo: &ReaderSummary) -> (String, String) {
    (
        format!("{} 100%", kilo(solo.median_reads_per_s)),
        format!(
            "{}{}",
            kilo(solo.worst_reads_per_s),
            pct_suffix(Some(
                100.0 * solo.worst_reads_per_s / solo.median_reads_per_s
            ))
        ),
    )
}

/// The "hot ... cached" cell: the least of the hot file seen cached, as a
/// share of it.
fn hot_cached_cell(hot_cached_min_bytes: Option<u64>, hot_bytes: u64) -> String {
    hot_cached_min_bytes
        .map(|b| format!("{:.0}%", 100.0 * b as f64 / hot_bytes.max(1) as f64))
        .unwrap_or_else(|| "-".into())
}

/// A blank line, then the conclusion and the warnings, wrapped at 100.
pub(super) fn push_findings(o: &mut String, conclusion: &[String], warnings: &[String]) {
    let _ = writeln!(o);
    for line in conclusion {
        let _ = writeln!(o, "{}", wrap(line, 100, "  "));
    }
    for warning in warnings {
        let _ = writeln!(o, "{}", wrap(&format!("warning: {warning}"), 100, "  "));
    }
}
