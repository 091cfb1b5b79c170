//! Running a matrix's points, and writing its record and exports after
//! each (apart from the spec, so that the exports, which read the spec's
//! types, and the runner, which writes them, do not import each other).

use super::record::{self, MatrixRecord, PointState, Session};
use super::{ceiling, duration_text, estimate, MakeExecutor, MatrixOptions, Rates, Spec};
use crate::harness::runner::{self, Progress};
use crate::harness::schema::Report;
use std::io;
use std::path::Path;
use std::time::Instant;
use ubio::size::human as human_bytes;

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub record: MatrixRecord,
    /// Points run in this session.
    pub ran: usize,
    /// Why it stopped before the end, if it did ("--max-points 2").
    pub stopped: Option<String>,
}

/// Runs the points of `spec` not yet done in `options.out_dir` (all of
/// them in a new directory), each through an executor from `make`, and
/// writes matrix.json and the exports after every point. A point that
/// fails is recorded with its error and the next one runs; run again, a
/// matrix runs its failed and pending points.
pub fn run(
    spec: &Spec,
    options: &MatrixOptions,
    make: &mut MakeExecutor,
    progress: &dyn Progress,
) -> io::Result<Outcome> {
    spec.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let dir = &options.out_dir;
    let mut record = match record::load(dir)? {
        Some(r) => {
            r.same_spec(spec)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            progress.message(&format!(
                "{}: {} of {} points done; going on with the rest",
                dir.display(),
                r.done(),
                r.points.len()
            ));
            r
        }
        None => MatrixRecord::new(spec.clone()),
    };
    let session_started = Instant::now();
    record
        .sessions
        .push(Session::start(options.run.git_commit.clone()));
    if record.ceiling.is_none() {
        if let Some(bytes) = options.ceiling_bytes {
            progress.message("measuring the memcpy ceiling (the machine's memory bandwidth)");
            let c = ceiling::measure(&spec.threads_with_seed(), bytes, ceiling::PASSES)?;
            progress.message(&c.describe());
            record.ceiling = Some(c);
        }
    }
    let e = estimate(&record)?;
    progress.message(&format!(
        "matrix: {} points to run ({} runs, {} moved in all): about {}, {}",
        e.points,
        e.runs,
        human_bytes(e.bytes),
        duration_text(e.secs),
        e.basis
    ));
    save(&record, dir, progress)?;

    let total = record.points.len();
    let mut ran = 0;
    let mut stopped = None;
    for i in 0..total {
        if record.points[i].state == PointState::Done {
            continue;
        }
        if let Some(max) = options.max_points.filter(|m| ran >= *m) {
            stopped = Some(format!("--max-points {max}"));
            break;
        }
        let left = estimate(&record)?.secs;
        if let Some(max) = options.max_secs {
            let next = Rates::of(&record)?.secs_per_gb(&record.points[i].point.target)
                * record.points[i].point.gb_moved(spec)?;
            let used = session_started.elapsed().as_secs_f64();
            if ran > 0 && used + next > max {
                stopped = Some(format!(
                    "--max-minutes {:.0}: the next point would end after the time given (about {} more)",
                    max / 60.0,
                    duration_text(next)
                ));
                break;
            }
        }
        let point = record.points[i].point.clone();
        let done = record.done();
        progress.message(&format!(
            "== point {}/{total} ({done} done, about {} left): {}",
            done + 1,
            duration_text(left),
            point.describe()
        ));
        let config = spec.config(&point)?;
        let point_dir = dir.join(record::point_dir(&point));
        let mut run_options = options.run.clone();
        run_options.out_dir = Some(point_dir.clone());
        run_options.fio = point.seed_job;
        run_options.order_seed = crate::rng::mix(
            spec.order_seed
                .wrapping_add(crate::rng::GOLDEN_GAMMA.wrapping_mul(i as u64 + 1)),
        );
        let started = Instant::now();
        let result = make(&point, &run_options).and_then(|mut executor| {
            runner::run_with(
                &config,
                &run_options,
                executor.as_mut(),
                progress,
                &mut |r: &Report| write_point(r, &point_dir),
            )
        });
        let p = &mut record.points[i];
        p.wall_secs = Some(started.elapsed().as_secs_f64());
        p.finished_unix_secs = Some(record::now_unix_secs());
        p.git_commit = options.run.git_commit.clone();
        match result {
            Ok(report) => {
                p.take_report(&report);
                if record.environment.is_none() {
                    record.environment = Some(report.environment.clone());
                }
            }
            Err(e) => {
                let msg = format!("{}: {e}", point.id);
                progress.warning(&format!("point {msg}"));
                p.state = PointState::Failed {
                    error: e.to_string(),
                };
            }
        }
        ran += 1;
        if let Some(s) = record.sessions.last_mut() {
            s.points_run = ran as u32;
            s.wall_secs = session_started.elapsed().as_secs_f64();
        }
        save(&record, dir, progress)?;
    }
    record.complete = record.done() == total;
    if let Some(s) = record.sessions.last_mut() {
        s.wall_secs = session_started.elapsed().as_secs_f64();
        s.stopped = stopped.clone();
    }
    save(&record, dir, progress)?;
    Ok(Outcome {
        record,
        ran,
        stopped,
    })
}

/// A point's report files: the JSON (what the matrix reads back) and the
/// Markdown (to read); the matrix's own HTML has the plots.
fn write_point(report: &Report, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| crate::path_context(e, "mkdir", dir))?;
    let json = crate::harness::export::json::render(report)?;
    crate::harness::export::write_atomically(&dir.join("report.json"), json.as_bytes())?;
    crate::harness::export::write_atomically(
        &dir.join("report.md"),
        crate::harness::export::markdown::render(report).as_bytes(),
    )
    .map(drop)
}

/// matrix.json, then the exports (a failure of those is a warning: the
/// JSON is what matters, and `ubio bench report` renders them again).
fn save(record: &MatrixRecord, dir: &Path, progress: &dyn Progress) -> io::Result<()> {
    record::save(record, dir)?;
    if let Err(e) = crate::harness::export::matrix::write_all(record, dir) {
        progress.warning(&format!("the matrix's exports: {e}"));
    }
    Ok(())
}
