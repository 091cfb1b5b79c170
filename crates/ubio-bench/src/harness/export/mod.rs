//! The report in every format, one module per format (hyperfine-style):
//! JSON (the source of truth: everything else can be re-rendered from it),
//! CSV (samples and runs), Markdown (the headline table) and a
//! self-contained HTML page with SVG plots; [`matrix`] the same for a
//! matrix of benchmarks.
//!
//! [`write_all`] writes them all into one directory; each file is written to
//! a temporary name and renamed into place, so a reader (or a benchmark
//! interrupted mid-write) never sees half a file.

pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
mod markup;
pub mod matrix;
pub mod neighbours;
mod svg;
pub mod table;

use super::gz;
use super::schema::Report;
use crate::path_context;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The files [`write_all`] writes, in order.
pub const FILES: [&str; 5] = [
    "report.json",
    "samples.csv",
    "runs.csv",
    "report.md",
    "report.html",
];

/// Writes report.json, samples.csv, runs.csv, report.md and report.html
/// into `out_dir` (made if missing), each atomically; returns their paths.
pub fn write_all(report: &Report, out_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let contents = [
        json::render(report)?,
        csv::samples(report),
        csv::runs(report),
        markdown::render(report),
        html::render(report),
    ];
    write_files(out_dir, FILES.iter().copied().zip(contents))
}

/// Writes each (name, text) into `dir` (made if missing), atomically;
/// returns their paths.
pub(crate) fn write_files<'a>(
    dir: &Path,
    files: impl IntoIterator<Item = (&'a str, String)>,
) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).map_err(|e| path_context(e, "mkdir", dir))?;
    files
        .into_iter()
        .map(|(name, text)| write_atomically(&dir.join(name), text.as_bytes()))
        .collect()
}

/// The headline table (one row per mode) in Markdown, as `report.md`
/// starts and as a command prints it after a run.
pub fn headline_markdown(report: &Report) -> String {
    markdown::render_table(&table::headline(report))
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename: the old file or the new one, never a torn one. Where only
/// `path.gz` exists (a committed run), that is rewritten, gzipped, instead
/// ([`gz::write_target`]); returns the path written.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let path = gz::write_target(path);
    let bytes = gz::encode(&path, bytes).map_err(|e| path_context(e, "compress", &path))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp.{}", std::process::id()));
    let written = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_data()))
        .map_err(|e| path_context(e, "write", &tmp));
    let renamed = written
        .and_then(|()| fs::rename(&tmp, &path).map_err(|e| path_context(e, "rename", &path)));
    if renamed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    renamed.map(|()| path)
}
