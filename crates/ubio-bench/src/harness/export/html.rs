//! report.html: one self-contained page (inline CSS and SVG, no scripts,
//! fonts or anything else fetched) with plots over time, one line per mode
//! (throughput, the dataset's page cache, its dirty + writeback, the
//! victim's reads), and the tables of the Markdown report.

pub use super::markup::escape;
use super::svg::{self, Plot, Series};
use super::table::{self, Table};
use crate::harness::mode::BenchMode;
use crate::harness::schema::{Report, Run, Sample};
use crate::harness::summary::{modes_in_order, ok_runs};
use std::fmt::Write;

pub(crate) const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}\
th{background:#f4f4f4}td:first-child,td:nth-child(2),th{text-align:left}\
.warn{color:#a40}figure{margin:1em 0}figcaption{color:#555;font-size:.9em}";

/// The whole report as an HTML page.
pub fn render(report: &Report) -> String {
    let w = &report.config.workload;
    let title = format!(
        "ubio bench: {} on {}",
        w.kind, report.environment.filesystem
    );
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{0}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{0}</h1>\n",
        escape(&title)
    );
    out += &table_html(&table::headline(report));
    let _ = writeln!(out, "<p>{}</p>", table::HEADLINE_NOTE);
    let _ = writeln!(
        out,
        "<p>{}</p>",
        escape(&crate::harness::judge::page_reporting_note(report))
    );
    if !report.warnings.is_empty() {
        out += "<h2>Warnings</h2>\n<ul>\n";
        for w in &report.warnings {
            let _ = writeln!(out, "<li class=\"warn\">{}</li>", escape(w));
        }
        out += "</ul>\n";
    }
    out += "<h2>Over time</h2>\n";
    let runs = representative_runs(report);
    let rounds: Vec<String> = runs
        .iter()
        .filter_map(|(m, r)| r.map(|r| format!("{m}: round {}", r.round)))
        .collect();
    let _ = writeln!(
        out,
        "<p>One line per mode, side by side: its median run by throughput ({}). \
         Reclaim, kswapd, free memory and page cache are the whole machine's.</p>",
        escape(&rounds.join(", "))
    );
    const MIB: f64 = (1u64 << 20) as f64;
    let mut plots = vec![
        plot(&runs, "Throughput", "MB/s", |s| Some(s.mb_per_s)),
        plot(&runs, "Dataset in the page cache", "MiB", |s| {
            Some(s.dataset_cached_bytes as f64 / MIB)
        }),
        plot(&runs, "Dataset dirty + writeback", "MiB", |s| {
            let bytes = s.dataset_dirty_bytes? + s.dataset_writeback_bytes?;
            Some(bytes as f64 / MIB)
        }),
    ];
    let per_s = |n: u64, s: &Sample| Some(n as f64 / s.interval_secs);
    plots.extend([
        plot(
            &runs,
            "kswapd CPU (all kswapd threads)",
            "% of a CPU",
            |s| Some(s.kswapd_pct()),
        ),
        plot(&runs, "Pages scanned by kswapd", "pages/s", |s| {
            per_s(s.pgscan_kswapd, s)
        }),
        plot(&runs, "Pages scanned in direct reclaim", "pages/s", |s| {
            per_s(s.pgscan_direct, s)
        }),
        plot(&runs, "Pages reclaimed (kswapd + direct)", "pages/s", |s| {
            per_s(s.pgsteal_kswapd + s.pgsteal_direct, s)
        }),
        plot(&runs, "Free memory", "MiB", |s| {
            s.free_bytes.map(|b| b as f64 / MIB)
        }),
        plot(&runs, "Page cache (whole machine)", "MiB", |s| {
            Some(s.cached_bytes as f64 / MIB)
        }),
    ]);
    if report
        .runs
        .iter()
        .flat_map(|r| &r.samples)
        .any(|s| s.victim_ops_per_s.is_some())
    {
        plots.push(plot(&runs, "Victim reads", "reads/s", |s| {
            s.victim_ops_per_s
        }));
    }
    for p in &plots {
        let _ = writeln!(out, "<figure>\n{}</figure>", svg::render(p));
    }
    out += "<h2>Per second</h2>\n";
    for (mode, run) in &runs {
        let Some(run) = run else { continue };
        let _ = writeln!(
            out,
            "<details><summary>{} (round {}, its median run)</summary>",
            escape(&mode.to_string()),
            run.round
        );
        out += &table_html(&table::per_second(run));
        out += "</details>\n";
    }
    out += "<h2>Environment</h2>\n";
    out += &lines_html(&table::environment(report));
    out += "<h2>Configuration</h2>\n";
    out += &lines_html(&table::config(report));
    if !report.fio.is_empty() {
        out += "<h2>fio cross-check</h2>\n";
        out += &table_html(&table::fio(report));
    }
    out += "</body>\n</html>\n";
    out
}

/// Per mode (in report order), the ok run with the median throughput (the
/// lower middle one for an even count); None when no run succeeded.
pub(super) fn representative_runs(report: &Report) -> Vec<(BenchMode, Option<&Run>)> {
    modes_in_order(report)
        .into_iter()
        .map(|mode| {
            let mut runs: Vec<&Run> = ok_runs(report, mode).collect();
            runs.sort_by(|a, b| a.summary.mb_per_s.total_cmp(&b.summary.mb_per_s));
            let middle = runs.len().saturating_sub(1) / 2;
            (mode, runs.get(middle).copied())
        })
        .collect()
}

fn plot(
    runs: &[(BenchMode, Option<&Run>)],
    title: &str,
    unit: &str,
    value: impl Fn(&Sample) -> Option<f64>,
) -> Plot {
    Plot {
        title: title.to_owned(),
        x_label: "seconds into the run".into(),
        y_label: unit.to_owned(),
        series: runs
            .iter()
            .map(|(mode, run)| Series {
                label: mode.to_string(),
                points: run
                    .map(|r| {
                        r.samples
                            .iter()
                            .filter_map(|s| value(s).map(|v| (s.t_secs, v)))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect(),
        limit: None,
    }
}

pub(crate) fn table_html(t: &Table) -> String {
    let mut out = String::from("<table>\n<tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out += "</tr>\n";
    for row in &t.rows {
        out += "<tr>";
        for c in row {
            let _ = write!(out, "<td>{}</td>", escape(c));
        }
        out += "</tr>\n";
    }
    out += "</table>\n";
    out
}

pub(crate) fn lines_html(lines: &[(String, String)]) -> String {
    let mut out = String::from("<ul>\n");
    for (k, v) in lines {
        let _ = writeln!(out, "<li><b>{}</b>: {}</li>", escape(k), escape(v));
    }
    out + "</ul>\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;

    #[test]
    fn svg_elements_are_balanced() {
        let html = render(&mock::report(9));
        assert_eq!(html.matches("<svg").count(), 10, "ten plots");
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        for tag in [
            "figure", "table", "tr", "ul", "title", "polyline", "text", "details",
        ] {
            let open = html.matches(&format!("<{tag}>")).count()
                + html.matches(&format!("<{tag} ")).count();
            assert_eq!(open, html.matches(&format!("</{tag}>")).count(), "<{tag}>");
        }
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    }

    #[test]
    fn one_line_per_mode_in_every_plot() {
        let report = mock::report(9);
        let html = render(&report);
        for svg in html.split("<svg").skip(1) {
            let svg = &svg[..svg.find("</svg>").unwrap()];
            assert_eq!(svg.matches("<polyline").count(), report.modes.len());
            for m in &report.modes {
                assert!(svg.contains(&format!("<title>{}</title></polyline>", m.mode)));
            }
        }
    }

    #[test]
    fn says_which_figure_bare_metal_would_see() {
        let report = mock::report(9);
        let html = render(&report);
        assert!(html.contains("vs buffered+backed (bare metal)"));
        assert!(html.contains("a bare-metal machine would see"), "{html}");
        let mut undone = report.clone();
        for r in &mut undone.runs {
            r.summary.reported_to_host_bytes = r.prefaulted_bytes;
        }
        assert!(render(&undone).contains("but perhaps only in part"));
        assert!(!html.contains("but perhaps only in part"));
        // Under global pressure: the reported memory of every mode decides.
        let mut pressed = report.clone();
        pressed.config.global_pressure = Some(crate::harness::schema::GlobalPressure {
            leave_bytes: 1 << 30,
            floor_bytes: 512 << 20,
        });
        pressed.config.memory_limit_bytes = None;
        for m in &mut pressed.modes {
            m.reported_to_host_bytes = crate::stats::Summary::of(&[4e6]);
        }
        let near = render(&pressed);
        assert!(near.contains("stayed near zero for every mode"), "{near}");
        assert!(near.contains("ubio 3.8 MiB"), "{near}");
        pressed.modes[0].reported_to_host_bytes = crate::stats::Summary::of(&[900e6]);
        assert!(render(&pressed).contains("memory did go back to the host"));
        let mut off = report.clone();
        off.environment.free_page_reporting = None;
        assert!(render(&off).contains("No free page reporting here"));
        off.environment.virtualization = Default::default();
        assert!(render(&off).contains("predates the record of the VM"));
    }

    #[test]
    fn loads_nothing_from_outside() {
        let html = render(&mock::report(9));
        for needle in [
            "<script", "<link", "http:", "https:", "url(", "@import", "src=",
        ] {
            assert!(!html.contains(needle), "{needle}");
        }
    }

    #[test]
    fn escapes_what_the_report_says() {
        let mut report = mock::report(9);
        report.environment.hostname = "<script>alert(1)</script>".into();
        let html = render(&report);
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // The mock's own CPU model and warning carry '<' and '&'.
        assert!(html.contains("Mock CPU &lt;2 cores&gt; &amp; co"));
        assert!(html.contains("(&lt;the dataset) &amp; may"));
    }

    #[test]
    fn no_victim_no_victim_plot() {
        let mut report = mock::report(9);
        for s in report.runs.iter_mut().flat_map(|r| &mut r.samples) {
            s.victim_ops_per_s = None;
        }
        assert_eq!(render(&report).matches("<svg").count(), 9);
    }
}
