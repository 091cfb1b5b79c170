//! neighbours.html: one self-contained page (inline CSS and SVG, nothing
//! fetched): the setup, per pressure and load its table and, beside every
//! stream, the load's p99 latency, its rate and its set's residency second
//! by second (the median run of each mode, and the load alone).

use super::figures;
use crate::harness::export::html::{escape, lines_html, table_html, STYLE};
use crate::harness::export::svg;
use crate::harness::neighbours::report::NeighboursReport;
use std::fmt::Write;

pub fn render(r: &NeighboursReport) -> String {
    let title = "ubio bench neighbours";
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    if !r.complete {
        out += "<p class=\"warn\">Incomplete: the run did not finish (the figures so far).</p>\n";
    }
    out += &lines_html(&figures::setup(r));
    let _ = writeln!(
        out,
        "<p>{}</p>\n<p>{}</p>",
        escape(&figures::bare_metal_note(r)),
        escape(figures::NOTE)
    );
    for (pressure, load) in figures::sections(r) {
        let _ = writeln!(
            out,
            "<h2>{}</h2>",
            escape(&format!("{load}, {pressure} pressure"))
        );
        out += &table_html(&figures::table(r, pressure, load));
        for stream in figures::streams(r) {
            for plot in figures::plots(r, pressure, load, stream) {
                let _ = writeln!(out, "<figure>\n{}</figure>", svg::render(&plot));
            }
        }
    }
    if !r.warnings.is_empty() {
        out += "<h2>Warnings</h2>\n<ul>\n";
        for w in &r.warnings {
            let _ = writeln!(out, "<li class=\"warn\">{}</li>", escape(w));
        }
        out += "</ul>\n";
    }
    out += "</body>\n</html>\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::neighbours::mock;

    #[test]
    fn plots_per_stream_with_a_line_per_mode_and_alone() {
        let r = mock::report(4);
        let html = render(&r);
        // One load, one stream: three plots.
        assert_eq!(html.matches("<svg").count(), 3, "{html}");
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        for svg in html.split("<svg").skip(1) {
            let svg = &svg[..svg.find("</svg>").unwrap()];
            assert_eq!(
                svg.matches("<polyline").count(),
                3,
                "alone, plain, ubio-run"
            );
            assert!(svg.contains("<title>alone</title></polyline>"));
        }
        assert!(html.contains("p99 latency per second"));
        assert!(!html.contains("<script") && !html.contains("http"));
        assert!(html.contains("a warning &lt;with&gt; &amp; signs"));
    }
}
