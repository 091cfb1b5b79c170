//! matrix.json: what a matrix run knows, rewritten after every point. The
//! exports, the A/B comparison and the release history read only this file
//! and the points' own report.json files, so a matrix can be rendered or
//! compared on another machine.

use super::ceiling::Ceiling;
use super::{Point, Spec};
use crate::harness::export::write_atomically;
use crate::harness::gz;
use crate::harness::schema::{Environment, FioCheck, ModeSummary, Report};
use crate::path_context;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// The `schema` field of matrix.json.
pub const SCHEMA_NAME: &str = "ubio-bench-matrix";
/// Goes up when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;
/// The file's name in the matrix's directory.
pub const FILE: &str = "matrix.json";

/// A matrix and what it measured so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixRecord {
    pub schema: String,
    pub schema_version: u32,
    pub spec: Spec,
    /// The machine, as the first point that ran found it.
    pub environment: Option<Environment>,
    /// The memory bandwidth, measured before the first point.
    pub ceiling: Option<Ceiling>,
    /// In the order they run.
    pub points: Vec<PointRecord>,
    /// Each invocation that worked on the matrix.
    pub sessions: Vec<Session>,
    /// Every point done.
    pub complete: bool,
}

/// One point: its state and, once done, its modes' summaries (copied from
/// its report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    pub point: Point,
    pub state: PointState,
    /// Its report.json, relative to the matrix's directory.
    pub report: String,
    /// From the start of its benchmark (target made) to the report complete.
    pub wall_secs: Option<f64>,
    pub finished_unix_secs: Option<u64>,
    /// `git describe` of the harness that ran it.
    pub git_commit: Option<String>,
    pub modes: Vec<ModeSummary>,
    #[serde(default)]
    pub fio: Vec<FioCheck>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Where a point is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum PointState {
    /// Not run yet, or interrupted (it runs again from its start).
    Pending,
    Done,
    /// Its benchmark could not run (the target, the cgroup, the balloon,
    /// no mode possible): why. A new session runs it again.
    Failed {
        error: String,
    },
}

/// One invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub started_unix_secs: u64,
    pub wall_secs: f64,
    pub points_run: u32,
    pub git_commit: Option<String>,
    /// Why it ended before the matrix did ("--max-points 4"); None when it
    /// ran to the end (or was interrupted: then `wall_secs` is the time to
    /// its last point).
    pub stopped: Option<String>,
}

impl Session {
    pub fn start(git_commit: Option<String>) -> Session {
        Session {
            started_unix_secs: now_unix_secs(),
            wall_secs: 0.0,
            points_run: 0,
            git_commit,
            stopped: None,
        }
    }
}

impl MatrixRecord {
    /// A new matrix of `spec`, every point pending.
    pub fn new(spec: Spec) -> MatrixRecord {
        let points = spec
            .points()
            .into_iter()
            .map(|point| PointRecord {
                report: format!("{}/report.json", point_dir(&point).display()),
                point,
                state: PointState::Pending,
                wall_secs: None,
                finished_unix_secs: None,
                git_commit: None,
                modes: Vec::new(),
                fio: Vec::new(),
                warnings: Vec::new(),
            })
            .collect();
        MatrixRecord {
            schema: SCHEMA_NAME.to_owned(),
            schema_version: SCHEMA_VERSION,
            spec,
            environment: None,
            ceiling: None,
            points,
            sessions: Vec::new(),
            complete: false,
        }
    }

    /// Points done.
    pub fn done(&self) -> usize {
        self.points
            .iter()
            .filter(|p| p.state == PointState::Done)
            .count()
    }

    /// Ok when `spec` is this matrix's; else which part differs (a
    /// directory holds one matrix: continuing it with another spec would
    /// mix figures that do not belong together).
    pub fn same_spec(&self, spec: &Spec) -> Result<(), String> {
        if self.spec == *spec {
            return Ok(());
        }
        let a = serde_json::to_value(&self.spec).unwrap_or_default();
        let b = serde_json::to_value(spec).unwrap_or_default();
        let differs: Vec<String> = a
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| b.get(k.as_str()) != Some(v))
            .map(|(k, v)| {
                format!(
                    "{k} is {v} there, {} here",
                    b.get(k.as_str()).map_or("absent".into(), |x| x.to_string())
                )
            })
            .collect();
        Err(format!(
            "the directory holds a matrix of another spec ({}): give another --out, or the same options",
            differs.join("; ")
        ))
    }

    /// The point with this id.
    pub fn point(&self, id: &str) -> Option<&PointRecord> {
        self.points.iter().find(|p| p.point.id == id)
    }

    /// Parses matrix.json, refusing other schemas and versions.
    pub fn from_json(text: &str) -> Result<MatrixRecord, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let schema = value.get("schema").and_then(|v| v.as_str());
        if schema != Some(SCHEMA_NAME) {
            return Err(format!(
                "not a ubio bench matrix (schema {schema:?}, expected \"{SCHEMA_NAME}\")"
            ));
        }
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(u64::from(SCHEMA_VERSION)) {
            return Err(format!(
                "schema_version {version:?}: this ubio reads version {SCHEMA_VERSION}"
            ));
        }
        serde_json::from_value(value).map_err(|e| format!("malformed matrix: {e}"))
    }
}

impl PointRecord {
    /// The point's finished benchmark: done, with its summaries.
    pub fn take_report(&mut self, report: &Report) {
        self.state = PointState::Done;
        self.modes = report.modes.clone();
        self.fio = report.fio.clone();
        self.warnings = report.warnings.clone();
    }

    /// Loads the point's report.json from the matrix's directory `dir`.
    pub fn load_report(&self, dir: &Path) -> io::Result<Report> {
        let path = dir.join(&self.report);
        let text = gz::read_to_string(&path)?;
        Report::from_json(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })
    }
}

/// `points/<id>`: a point's directory, relative to the matrix's.
pub fn point_dir(point: &Point) -> PathBuf {
    Path::new("points").join(&point.id)
}

/// The matrix in `dir` (its matrix.json, or matrix.json.gz), if there is one.
pub fn load(dir: &Path) -> io::Result<Option<MatrixRecord>> {
    let path = dir.join(FILE);
    match gz::read_to_string(&path) {
        Ok(text) => MatrixRecord::from_json(&text).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes matrix.json into `dir` (made if missing), atomically.
pub fn save(record: &MatrixRecord, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| path_context(e, "mkdir", dir))?;
    let mut text = serde_json::to_string_pretty(record).map_err(io::Error::other)?;
    text.push('\n');
    write_atomically(&dir.join(FILE), text.as_bytes()).map(drop)
}

pub fn now_unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
