//! neighbours.md: the setup, what bare metal would see, one table per
//! pressure and load (alone, then beside every stream in every mode), the
//! warnings.

use super::figures;
use crate::harness::export::markdown::{cell, render_table};
use crate::harness::neighbours::report::NeighboursReport;
use std::fmt::Write;

pub fn render(r: &NeighboursReport) -> String {
    let mut out = String::from("# ubio bench neighbours\n\n");
    if !r.complete {
        out += "**Incomplete: the run did not finish (the figures so far).**\n\n";
    }
    for (k, v) in figures::setup(r) {
        let _ = writeln!(out, "- {}: {}", cell(&k), cell(&v));
    }
    let _ = writeln!(
        out,
        "\n{}\n\n{}",
        cell(&figures::bare_metal_note(r)),
        figures::NOTE
    );
    for (pressure, load) in figures::sections(r) {
        let _ = writeln!(out, "\n## {load}, {pressure} pressure\n");
        out += &render_table(&figures::table(r, pressure, load));
    }
    if !r.warnings.is_empty() {
        out += "\n## Warnings\n\n";
        for w in &r.warnings {
            let _ = writeln!(out, "- {}", cell(w));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::neighbours::mock;

    #[test]
    fn a_table_per_load_and_a_row_per_cell() {
        let r = mock::report(3);
        let md = render(&r);
        assert!(md.contains("## pgbench-ro, global pressure"), "{md}");
        for beside in [
            "| alone | 3 |",
            "| tar (plain) | 3 |",
            "| tar (ubio-run) | 3 |",
        ] {
            assert_eq!(md.matches(beside).count(), 1, "{beside} in\n{md}");
        }
        assert!(md.contains("| 50% |") && md.contains("3.00×"), "{md}");
        assert!(md.contains("bare metal"), "{md}");
        assert!(md.contains("a warning &lt;with&gt; &amp; signs"));
        assert!(!md.contains("Incomplete"));
    }
}
