//! matrix.html: one self-contained page (inline CSS and SVG, nothing
//! fetched): per mode the scaling curves and the walls, each with the
//! memcpy ceiling dashed as the physical limit, then the tables.

use super::figures;
use crate::harness::export::html::{escape, lines_html, table_html, STYLE};
use crate::harness::export::svg;
use crate::harness::matrix::record::MatrixRecord;
use std::fmt::Write;

/// The whole matrix as an HTML page.
pub fn render(record: &MatrixRecord) -> String {
    let title = "ubio bench matrix";
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    out += &lines_html(&figures::setup(record));
    let note = figures::bare_metal_note(record);
    if !note.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", escape(&note));
    }
    for (heading, what, curves) in [
        (
            "Scaling",
            "Throughput against threads, one line per mode (medians of the rounds); the dashed line is \
             the memory bandwidth (memcpy) at that many threads: buffered I/O copies every byte at least once.",
            figures::scaling(record),
        ),
        (
            "The wall",
            "Throughput against the dataset over the memory the run may use; the dashed line is the memory \
             bandwidth at the point's threads.",
            figures::wall(record),
        ),
    ] {
        if curves.is_empty() {
            continue;
        }
        let _ = writeln!(out, "<h2>{heading}</h2>\n<p>{}</p>", escape(what));
        for c in &curves {
            let _ = writeln!(out, "<figure>\n{}</figure>", svg::render(&c.plot));
        }
    }
    out += "<h2>Ratios between modes</h2>\n";
    out += &table_html(&figures::ratios(record));
    out += "<h2>Every point</h2>\n";
    out += &table_html(&figures::points(record));
    let fio = figures::fio(record);
    if !fio.rows.is_empty() {
        out += "<h2>Seed 003's job: fio's cross-check</h2>\n";
        out += &table_html(&fio);
    }
    out += "</body>\n</html>\n";
    out
}
