//! A matrix's figures as tables of text and as curves, shared by its
//! Markdown, CSV and HTML exporters: every point and mode; the ratios
//! between modes at every point; per mode, the scaling curve (throughput
//! against threads) and the wall (throughput against the dataset over the
//! memory), with the memcpy ceiling as the limit.

use crate::harness::export::svg::{Plot, Series};
use crate::harness::export::table::Table;
use crate::harness::judge::Metric;
use crate::harness::matrix::record::{MatrixRecord, PointRecord, PointState};
use crate::harness::matrix::{block_label, Point};
use crate::harness::mode::BenchMode;
use crate::harness::schema::ModeSummary;
use crate::stats::Summary;
use ubio::size::human as human_bytes;
use ubio::BackendKind;

const UBIO: BenchMode = BenchMode::Ubio(BackendKind::Auto);

/// The modes of the matrix, in the spec's order.
fn modes(record: &MatrixRecord) -> &[BenchMode] {
    &record.spec.modes
}

fn done(record: &MatrixRecord) -> impl Iterator<Item = &PointRecord> {
    record.points.iter().filter(|p| p.state == PointState::Done)
}

/// The points in a stable reading order (target, workload, block, files,
/// threads, dataset), not the random order they ran in.
fn sorted(record: &MatrixRecord) -> Vec<&PointRecord> {
    let mut points: Vec<&PointRecord> = done(record).collect();
    points.sort_by(|a, b| {
        let key = |p: &Point| {
            (
                p.target.to_string(),
                p.seed_job,
                p.workload.kind.name(),
                p.workload.block_bytes,
                p.workload.files_per_thread,
                p.workload.shared_file,
                p.workload.processes > 1,
                p.workload.threads,
            )
        };
        key(&a.point).cmp(&key(&b.point)).then(
            a.point
                .dataset_fraction
                .total_cmp(&b.point.dataset_fraction),
        )
    });
    points
}

fn summary(p: &PointRecord, mode: BenchMode) -> Option<&ModeSummary> {
    p.modes.iter().find(|m| m.mode == mode && m.runs_ok > 0)
}

fn speed(p: &PointRecord, mode: BenchMode) -> Option<f64> {
    summary(p, mode).and_then(|m| Metric::Throughput.of_mode(m))
}

fn dash() -> String {
    "–".into()
}

fn med(s: Option<Summary>, decimals: usize) -> String {
    s.map_or_else(dash, |s| format!("{:.decimals$}", s.median))
}

/// The columns that say which point a row is.
const POINT_COLUMNS: [&str; 6] = ["target", "workload", "block", "threads", "files", "dataset"];

fn point_cells(p: &Point) -> Vec<String> {
    vec![
        p.target.to_string(),
        if p.seed_job {
            format!("{} (seed 003)", p.workload.kind)
        } else {
            p.workload.kind.to_string()
        },
        block_label(p.workload.block_bytes),
        match p.workload.streams_note() {
            n if n.is_empty() => p.workload.threads.to_string(),
            n => format!("{} ({n})", p.workload.threads),
        },
        p.workload.files_per_thread.to_string(),
        format!(
            "{}x ({})",
            p.dataset_fraction,
            human_bytes(p.workload.dataset_bytes)
        ),
    ]
}

/// Every point and mode with its figures.
pub fn points(record: &MatrixRecord) -> Table {
    let mut header: Vec<String> = POINT_COLUMNS.map(str::to_owned).to_vec();
    header.extend(
        [
            "mode",
            "runs",
            "MB/s median [min–max]",
            "CPU s/GB",
            "sys s/GB",
            "reclaimed pages/GB",
            "kswapd CPU s",
            "dataset cache peak",
            "dirty+writeback peak",
            "reported to host",
        ]
        .map(str::to_owned),
    );
    let mut rows = Vec::new();
    for p in sorted(record) {
        for m in &p.modes {
            let mut row = point_cells(&p.point);
            let ran = m.runs_ok > 0;
            row.extend([
                m.mode.to_string(),
                match m.runs_failed {
                    0 => m.runs_ok.to_string(),
                    f => format!("{} ({f} failed)", m.runs_ok),
                },
                m.mb_per_s.filter(|_| ran).map_or_else(dash, |s| {
                    format!("{:.0} [{:.0}–{:.0}]", s.median, s.min, s.max)
                }),
                med(m.cpu_secs_per_gb, 2),
                med(m.cpu_sys_secs_per_gb, 2),
                med(m.reclaimed_pages_per_gb, 0),
                med(m.kswapd_cpu_secs, 2),
                if ran {
                    human_bytes(m.peak_dataset_cached_bytes)
                } else {
                    dash()
                },
                match m.peak_dataset_dirty_writeback_bytes {
                    Some(b) if ran => human_bytes(b),
                    _ => dash(),
                },
                m.reported_to_host_bytes
                    .map_or_else(dash, |s| human_bytes(s.median as u64)),
            ]);
            rows.push(row);
        }
    }
    Table { header, rows }
}

/// The ratios between modes of the matrix at every point (medians of the
/// point's rounds): buffered against O_DIRECT first.
pub fn ratios(record: &MatrixRecord) -> Table {
    let pairs: Vec<(BenchMode, BenchMode)> = [
        (BenchMode::Buffered, BenchMode::Odirect),
        (BenchMode::Buffered, BenchMode::OdirectUring),
        (UBIO, BenchMode::Buffered),
        (UBIO, BenchMode::Odirect),
        (BenchMode::Dontcache, BenchMode::Buffered),
    ]
    .into_iter()
    .filter(|(a, b)| modes(record).contains(a) && modes(record).contains(b))
    .collect();
    let others: Vec<BenchMode> = [
        BenchMode::Buffered,
        BenchMode::Dontcache,
        BenchMode::Odirect,
    ]
    .into_iter()
    .filter(|m| modes(record).contains(m))
    .collect();
    let best = modes(record).contains(&UBIO) && !others.is_empty();
    let mut header: Vec<String> = POINT_COLUMNS.map(str::to_owned).to_vec();
    header.extend(pairs.iter().map(|(a, b)| format!("{a} / {b}")));
    if best {
        let names: Vec<String> = others.iter().map(BenchMode::to_string).collect();
        header.push(format!("ubio / best of {}", names.join(", ")));
        header.push("ubio CPU/GB / best's CPU/GB".into());
    }
    let rows = sorted(record)
        .into_iter()
        .map(|p| {
            let mut row = point_cells(&p.point);
            row.extend(
                pairs
                    .iter()
                    .map(|&(a, b)| match (speed(p, a), speed(p, b)) {
                        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                        _ => dash(),
                    }),
            );
            if best {
                row.extend(ubio_against_best(p, &others));
            }
            row
        })
        .collect();
    Table { header, rows }
}

/// ubio's median throughput over the fastest of `others` at the point
/// (named), and its CPU per GB over that mode's.
fn ubio_against_best(p: &PointRecord, others: &[BenchMode]) -> [String; 2] {
    let fastest = others
        .iter()
        .filter_map(|&m| speed(p, m).map(|s| (m, s)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let cpu = |m: BenchMode| {
        summary(p, m)
            .and_then(|s| s.cpu_secs_per_gb)
            .map(|c| c.median)
    };
    match (speed(p, UBIO), fastest) {
        (Some(u), Some((m, b))) if b > 0.0 => [
            format!("{:.2} ({m})", u / b),
            match (cpu(UBIO), cpu(m)) {
                (Some(u), Some(c)) if c > 0.0 => format!("{:.2}", u / c),
                _ => dash(),
            },
        ],
        _ => [dash(), dash()],
    }
}

/// A curve plot: one series per mode, the ceiling as its limit.
pub struct Curve {
    pub plot: Plot,
}

/// The curves of `record` along one axis: points that differ only in
/// `x` are one plot.
fn curves(
    record: &MatrixRecord,
    x_label: &str,
    x: fn(&Point) -> f64,
    group: fn(&Point) -> String,
    title: fn(&Point) -> String,
) -> Vec<Curve> {
    let mut groups: Vec<(String, Vec<&PointRecord>)> = Vec::new();
    for p in sorted(record) {
        let key = group(&p.point);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(p),
            None => groups.push((key, vec![p])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, list)| list.len() > 1)
        .map(|(_, mut list)| {
            list.sort_by(|a, b| x(&a.point).total_cmp(&x(&b.point)));
            let series = modes(record)
                .iter()
                .map(|&mode| Series {
                    label: mode.to_string(),
                    points: list
                        .iter()
                        .filter_map(|p| speed(p, mode).map(|v| (x(&p.point), v)))
                        .collect(),
                })
                .collect();
            let limit = record.ceiling.as_ref().map(|c| Series {
                label: "memcpy (memory bandwidth)".into(),
                points: list
                    .iter()
                    .filter_map(|p| c.at(p.point.workload.threads).map(|v| (x(&p.point), v)))
                    .collect(),
            });
            Curve {
                plot: Plot {
                    title: title(&list[0].point),
                    x_label: x_label.to_owned(),
                    y_label: "MB/s".into(),
                    series,
                    limit,
                },
            }
        })
        .collect()
}

/// The plot a point of a curve is in: its target, workload, block and
/// files, and `rest` (what else stays the same along the curve's axis).
fn group_key(p: &Point, rest: impl std::fmt::Display) -> String {
    format!(
        "{} {} {} {} {} {} {} {rest}",
        p.target,
        p.seed_job,
        p.workload.kind,
        p.workload.block_bytes,
        p.workload.files_per_thread,
        p.workload.processes > 1,
        p.workload.shared_file
    )
}

/// The start of a curve's title: target, workload and block (and how the
/// streams run, where not as threads with files of their own).
fn title_head(p: &Point) -> String {
    let streams = match (p.workload.processes > 1, p.workload.shared_file) {
        (false, false) => "",
        (true, false) => ", a process per stream",
        (false, true) => ", one shared file",
        (true, true) => ", a process per stream, one shared file",
    };
    format!(
        "{} {}{}, {} blocks{streams}",
        p.target,
        p.workload.kind,
        if p.seed_job { " (seed 003)" } else { "" },
        block_label(p.workload.block_bytes)
    )
}

/// Throughput against threads, one plot per target, workload, block,
/// files and dataset.
pub fn scaling(record: &MatrixRecord) -> Vec<Curve> {
    curves(
        record,
        "threads",
        |p| f64::from(p.workload.threads),
        |p| group_key(p, p.dataset_fraction),
        |p| {
            format!(
                "Scaling: {}, {}x the memory",
                title_head(p),
                p.dataset_fraction
            )
        },
    )
}

/// Throughput against the dataset over the memory the run may use, one
/// plot per target, workload, block, files and threads.
pub fn wall(record: &MatrixRecord) -> Vec<Curve> {
    curves(
        record,
        "dataset / memory the run may use",
        |p| p.dataset_fraction,
        |p| group_key(p, p.workload.threads),
        |p| {
            format!(
                "The wall: {}, {} thread(s)",
                title_head(p),
                p.workload.threads
            )
        },
    )
}

/// A curve as a table: x, then one column per series and the limit.
pub fn curve_table(c: &Curve) -> Table {
    let mut xs: Vec<f64> = c
        .plot
        .series
        .iter()
        .chain(&c.plot.limit)
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut header = vec![c.plot.x_label.clone()];
    header.extend(c.plot.series.iter().map(|s| format!("{} MB/s", s.label)));
    header.extend(c.plot.limit.iter().map(|s| s.label.clone()));
    let rows = xs
        .iter()
        .map(|&x| {
            let mut row = vec![format!("{x}")];
            for s in c.plot.series.iter().chain(&c.plot.limit) {
                row.push(
                    s.points
                        .iter()
                        .find(|p| p.0 == x)
                        .map_or_else(dash, |p| format!("{:.0}", p.1)),
                );
            }
            row
        })
        .collect();
    Table { header, rows }
}

/// The seed points' fio cross-checks.
pub fn fio(record: &MatrixRecord) -> Table {
    let mut header: Vec<String> = POINT_COLUMNS.map(str::to_owned).to_vec();
    header.extend(
        [
            "mode",
            "fio MB/s",
            "harness MB/s",
            "difference",
            "fio command",
        ]
        .map(str::to_owned),
    );
    let rows = sorted(record)
        .into_iter()
        .flat_map(|p| {
            p.fio.iter().map(move |f| {
                let mut row = point_cells(&p.point);
                row.extend([
                    f.mode.to_string(),
                    format!("{:.0}", f.fio_mb_per_s),
                    format!("{:.0}", f.harness_mb_per_s),
                    format!("{:+.1}%", f.difference_pct),
                    f.command.clone(),
                ]);
                row
            })
        })
        .collect();
    Table { header, rows }
}

/// The spec and the machine, as lines.
pub fn setup(record: &MatrixRecord) -> Vec<(String, String)> {
    let s = &record.spec;
    let list = |v: Vec<String>| v.join(", ");
    let mut lines = vec![
        (
            "memory the run may use".to_owned(),
            match s.pressure {
                crate::harness::matrix::Pressure::Cgroup => {
                    format!("{} (a memory cgroup's limit)", human_bytes(s.memory_bytes))
                }
                crate::harness::matrix::Pressure::Global { floor_bytes } => format!(
                    "{} (global pressure: a balloon of locked memory leaves it to the whole machine; floor {})",
                    human_bytes(s.memory_bytes),
                    human_bytes(floor_bytes)
                ),
            },
        ),
        ("targets".into(), list(s.targets.iter().map(|t| t.to_string()).collect())),
        ("workloads".into(), list(s.workloads.iter().map(|w| w.to_string()).collect())),
        ("blocks".into(), list(s.blocks_bytes.iter().map(|b| block_label(*b)).collect())),
        ("threads".into(), list(s.threads.iter().map(|t| t.to_string()).collect())),
        (
            "files per thread".into(),
            list(s.files_per_thread.iter().map(|t| t.to_string()).collect()),
        ),
        (
            "datasets (x memory)".into(),
            list(s.dataset_fractions.iter().map(|t| t.to_string()).collect()),
        ),
        ("modes".into(), list(s.modes.iter().map(|t| t.to_string()).collect())),
        (
            "rounds".into(),
            format!(
                "{} per point, each in a new random order; points in a random order (seed {})",
                s.rounds, s.order_seed
            ),
        ),
        (
            "points".into(),
            format!(
                "{} of {} done{}",
                record.done(),
                record.points.len(),
                if record.complete { "" } else { " (not complete)" }
            ),
        ),
    ];
    if let Some(j) = s.seed_jobs {
        lines.push((
            "seed 003's job".into(),
            format!("seq-write, 2 MiB blocks, {j} jobs x 10 files, with fio's cross-check"),
        ));
    }
    if let Some(c) = &record.ceiling {
        lines.push(("memory bandwidth".into(), c.describe()));
    }
    if let Some(e) = &record.environment {
        lines.push((
            "machine".into(),
            format!(
                "Linux {}, {} ({} CPUs), {}, {}",
                e.kernel,
                e.cpu_model,
                e.cpus,
                human_bytes(e.mem_total_bytes),
                if e.virtualization.summary.is_empty() {
                    "virtualization unknown".to_owned()
                } else {
                    e.virtualization.summary.clone()
                }
            ),
        ));
        lines.push((
            "ubio's data path".into(),
            crate::harness::export::table::settings_line(&e.ubio_settings),
        ));
        lines.push((
            "harness".into(),
            format!(
                "{}{}",
                e.tool_version,
                e.git_commit
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default()
            ),
        ));
    }
    lines
}

/// What a bare-metal machine would see beside these figures.
pub fn bare_metal_note(record: &MatrixRecord) -> String {
    let Some(e) = &record.environment else {
        return String::new();
    };
    match (&e.free_page_reporting, record.spec.pressure) {
        (None, _) => "No free page reporting here: buffered I/O takes its page-cache pages as on bare metal.".into(),
        (Some(_), crate::harness::matrix::Pressure::Global { .. }) => format!(
            "This machine ({}) hands free memory back to its host (free page reporting). The points ran under \
             global pressure: the balloon kept free memory small, so buffered I/O took its pages from what \
             reclaim had just freed, as on bare metal; the \"reported to host\" column shows how much memory \
             went back to the host during each run.",
            e.virtualization.summary
        ),
        (Some(_), crate::harness::matrix::Pressure::Cgroup) => format!(
            "This machine ({}) hands free memory back to its host (free page reporting): in a memory cgroup, \
             a buffered run takes its first pages from the machine's free memory, which costs a host fault per \
             page that bare metal never pays, so buffered I/O is slower here than on bare metal (the \"reported \
             to host\" column shows how much went back during each run). Global pressure \
             (`--pressure global`) is this machine's bare-metal-like setting.",
            e.virtualization.summary
        ),
    }
}
