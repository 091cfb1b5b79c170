//! A neighbours run's exports, one module per format: neighbours.json (the
//! record itself, which the others are made from), runs.csv and
//! seconds.csv, neighbours.md (the tables) and neighbours.html (the tables
//! and the plots of the services' latency per second).

pub mod csv;
pub mod figures;
pub mod html;
pub mod markdown;

use crate::harness::export::write_files;
use crate::harness::neighbours::report::NeighboursReport;
use std::io;
use std::path::{Path, PathBuf};

/// The files [`write_all`] writes.
pub const FILES: [&str; 5] = [
    "neighbours.json",
    "runs.csv",
    "seconds.csv",
    "neighbours.md",
    "neighbours.html",
];

/// Writes the exports of `report` into `dir` (made if missing), each
/// atomically; returns their paths.
pub fn write_all(report: &NeighboursReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let json = serde_json::to_string_pretty(report).map_err(io::Error::other)? + "\n";
    let contents = [
        json,
        csv::runs(report),
        csv::seconds(report),
        markdown::render(report),
        html::render(report),
    ];
    write_files(dir, FILES.iter().copied().zip(contents))
}
