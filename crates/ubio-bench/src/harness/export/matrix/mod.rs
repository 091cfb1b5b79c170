//! A matrix's exports, one module per format: matrix.md (every table and
//! curve as text), points.csv (one row per point and mode) and
//! matrix.html (the curves as plots, with the memcpy ceiling, and the
//! tables). matrix.json, which they are made from, is the record's own
//! ([`crate::harness::matrix::record`]).

pub mod csv;
pub mod figures;
pub mod html;
pub mod markdown;

use crate::harness::export::write_files;
use crate::harness::matrix::record::MatrixRecord;
use std::io;
use std::path::{Path, PathBuf};

/// The files [`write_all`] writes.
pub const FILES: [&str; 3] = ["matrix.md", "points.csv", "matrix.html"];

/// Writes the exports of `record` into `dir` (made if missing), each
/// atomically; returns their paths.
pub fn write_all(record: &MatrixRecord, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let contents = [
        markdown::render(record),
        csv::render(record),
        html::render(record),
    ];
    write_files(dir, FILES.iter().copied().zip(contents))
}
