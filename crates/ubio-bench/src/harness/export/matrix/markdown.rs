//! matrix.md: the setup, the scaling curves and the walls as tables (with
//! the memcpy ceiling), the ratios between modes at every point, every
//! point's figures, the seed point's fio cross-check, and what is missing.

use super::figures;
use crate::harness::export::markdown::{cell, render_table};
use crate::harness::matrix::record::{MatrixRecord, PointState};
use crate::harness::runner::process::FITS_WARNING;
use std::fmt::Write;

/// The whole matrix as Markdown.
pub fn render(record: &MatrixRecord) -> String {
    let mut out = String::from("# ubio bench matrix\n\n");
    for (k, v) in figures::setup(record) {
        let _ = writeln!(out, "- {}: {}", cell(&k), cell(&v));
    }
    let note = figures::bare_metal_note(record);
    if !note.is_empty() {
        let _ = writeln!(out, "\n{}", cell(&note));
    }
    for (title, curves) in [
        ("Scaling (MB/s against threads)", figures::scaling(record)),
        (
            "The wall (MB/s against the dataset over the memory)",
            figures::wall(record),
        ),
    ] {
        if curves.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n## {title}\n");
        for c in &curves {
            let _ = writeln!(out, "### {}\n", cell(&c.plot.title));
            out += &render_table(&figures::curve_table(c));
            out.push('\n');
        }
    }
    out += "\n## Ratios between modes (median throughput over median throughput)\n\n";
    out += &render_table(&figures::ratios(record));
    out += "\n## Every point\n\n";
    out += &render_table(&figures::points(record));
    let fio = figures::fio(record);
    if !fio.rows.is_empty() {
        out += "\n## Seed 003's job: fio's cross-check\n\n";
        out += &render_table(&fio);
    }
    let open: Vec<String> = record
        .points
        .iter()
        .filter_map(|p| match &p.state {
            PointState::Done => None,
            PointState::Pending => Some(format!("- {}: not run yet", cell(&p.point.id))),
            PointState::Failed { error } => {
                Some(format!("- {}: failed: {}", cell(&p.point.id), cell(error)))
            }
        })
        .collect();
    if !open.is_empty() {
        let _ = writeln!(out, "\n## Points not done\n\n{}", open.join("\n"));
    }
    // A dataset that fits in the memory is a point of the wall on
    // purpose: the runner's warning about it is left out here.
    let mut warnings: Vec<String> = Vec::new();
    for p in &record.points {
        for w in p.warnings.iter().filter(|w| !w.contains(FITS_WARNING)) {
            warnings.push(format!("- {}: {}", cell(&p.point.id), cell(w)));
        }
    }
    if !warnings.is_empty() {
        let _ = writeln!(
            out,
            "\n## Warnings of the points\n\n{}",
            warnings.join("\n")
        );
    }
    out
}
