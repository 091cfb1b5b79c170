//! The release matrix's history: one row per matrix kept under a
//! directory (bench/runs/release/<date>-<commit>/), oldest first, with each
//! point's median throughput per mode, so that a regression of ubio (or of
//! the kernel under it) shows in the row where it landed.

use super::record::{self, MatrixRecord, PointState};
use crate::harness::judge::Metric;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// The Markdown table of the matrices in `dir`'s subdirectories.
pub fn table(dir: &Path) -> io::Result<String> {
    let mut runs: Vec<(String, MatrixRecord)> = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| crate::path_context(e, "read", dir))?;
    for entry in entries {
        let path = entry?.path();
        if let Some(r) = record::load(&path)? {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            runs.push((name, r));
        }
    }
    if runs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no matrix (DIR/*/matrix.json) in {}", dir.display()),
        ));
    }
    let started = |r: &MatrixRecord| r.sessions.first().map_or(0, |s| s.started_unix_secs);
    runs.sort_by_key(|(_, r)| started(r));
    Ok(render(&runs))
}

/// The table: date, commit, kernel, then per point the medians of its
/// modes ("buffered / dontcache / odirect / ubio MB/s").
pub fn render(runs: &[(String, MatrixRecord)]) -> String {
    let Some((_, newest)) = runs.last() else {
        return String::new();
    };
    let modes = &newest.spec.modes;
    let mut ids: Vec<String> = newest.points.iter().map(|p| p.point.id.clone()).collect();
    ids.sort();
    let mode_names: Vec<String> = modes.iter().map(|m| m.to_string()).collect();
    let mut out = format!(
        "MB/s, median of the rounds, per point: {}\n\n| run | date | commit | kernel |",
        mode_names.join(" / ")
    );
    for id in &ids {
        let _ = write!(out, " {id} |");
    }
    let _ = write!(out, "\n|---|---|---|---|{}\n", "---|".repeat(ids.len()));
    for (name, r) in runs {
        let env = r.environment.as_ref();
        let date = r
            .sessions
            .first()
            .map_or("?".into(), |s| crate::clock::utc_date(s.started_unix_secs));
        let _ = write!(
            out,
            "| {name} | {date} | {} | {} |",
            env.and_then(|e| e.git_commit.clone()).unwrap_or("?".into()),
            env.map_or("?".into(), |e| e.kernel.clone())
        );
        for id in &ids {
            let cell = match r.point(id) {
                Some(p) if p.state == PointState::Done => modes
                    .iter()
                    .map(|m| {
                        p.modes
                            .iter()
                            .find(|s| s.mode == *m)
                            .and_then(|s| Metric::Throughput.of_mode(s))
                            .map_or("–".into(), |v| format!("{v:.0}"))
                    })
                    .collect::<Vec<_>>()
                    .join(" / "),
                _ => "–".into(),
            };
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out
}
