//! report.md: the headline table, the environment and configuration, the
//! fio cross-check and the warnings, in GitHub-flavoured Markdown.

use super::table::{self, Table};
use crate::harness::schema::Report;
use std::fmt::Write;

/// The whole report as Markdown.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let w = &report.config.workload;
    let _ = writeln!(
        out,
        "# ubio bench: {} on {}\n",
        w.kind,
        cell(&report.environment.filesystem)
    );
    out += &render_table(&table::headline(report));
    let _ = writeln!(out, "\n{}", table::HEADLINE_NOTE);
    let _ = writeln!(
        out,
        "\n{}",
        cell(&crate::harness::judge::page_reporting_note(report))
    );
    out += "\n## Environment\n\n";
    out += &render_lines(&table::environment(report));
    out += "\n## Configuration\n\n";
    out += &render_lines(&table::config(report));
    out += "\n## Per second\n\n";
    for (mode, run) in super::html::representative_runs(report) {
        let Some(run) = run else { continue };
        let _ = writeln!(out, "### {mode} (round {}, its median run)\n", run.round);
        out += &render_table(&table::per_second(run));
        out += "\n";
    }
    if !report.fio.is_empty() {
        out += "\n## fio cross-check\n\n";
        out += &render_table(&table::fio(report));
    }
    if !report.warnings.is_empty() {
        out += "\n## Warnings\n\n";
        for w in &report.warnings {
            let _ = writeln!(out, "- {}", cell(w));
        }
    }
    out
}

/// A Markdown table.
pub fn render_table(t: &Table) -> String {
    let row = |cells: &[String]| {
        let cells: Vec<String> = cells.iter().map(|c| cell(c)).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = row(&t.header);
    out += &format!("|{}\n", "---|".repeat(t.header.len()));
    for r in &t.rows {
        out += &row(r);
    }
    out
}

fn render_lines(lines: &[(String, String)]) -> String {
    lines
        .iter()
        .map(|(k, v)| format!("- {}: {}\n", cell(k), cell(v)))
        .collect()
}

/// Text made safe for a table cell: no pipes or line breaks that would
/// split it, no HTML that a renderer would interpret.
pub fn cell(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;

    #[test]
    fn has_a_row_per_mode() {
        let report = mock::report(8);
        let md = render(&report);
        for m in &report.modes {
            let start = format!("| {} | {} |", m.mode, m.backend);
            assert_eq!(md.matches(&start).count(), 1, "{start} in\n{md}");
        }
        assert!(md.contains("vs buffered"));
        assert!(md.contains("vs buffered+backed (bare metal)"), "{md}");
        assert!(md.contains("sys s/GB") && md.contains("reported to host"));
        assert!(
            md.contains("free page reporting: on (page_reporting_order=9"),
            "{md}"
        );
        assert!(md.contains("virtualization: Firecracker (kvm) VM"), "{md}");
        assert!(md.contains("a bare-metal machine would see"), "{md}");
        let order = &report.schedule.as_ref().unwrap().rounds[1];
        let names: Vec<String> = order.iter().map(|m| m.to_string()).collect();
        assert!(md.contains(&format!("2: {}", names.join(" "))), "{md}");
        assert!(md.contains("## fio cross-check"));
        assert!(md.contains("2 (1 failed)"), "{md}");
    }

    #[test]
    fn cells_cannot_break_the_table() {
        let mut report = mock::report(8);
        report
            .runs
            .iter_mut()
            .for_each(|r| r.backend = "a|b\n<c>".into());
        report.modes = crate::harness::summary::summarize_modes(&report);
        let md = render(&report);
        assert!(md.contains("a\\|b &lt;c&gt;"), "{md}");
        assert!(!md.contains("<c>"));
    }
}
