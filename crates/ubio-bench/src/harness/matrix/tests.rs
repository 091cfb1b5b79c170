//! The matrix through the runner's fake executor: the points and their
//! order, sessions that stop and go on, the estimate, and the A/B verdicts
//! against the runs' own noise. No root, no loop device, no timing: the
//! fake makes up every run, and the directories are temporary.

use super::ab;
use super::record::{self, MatrixRecord, PointState};
use super::*;
use crate::harness::compare::CompareOptions;
use crate::harness::runner::fake::{Attempt, Fake};
use crate::harness::runner::Quiet;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

const GIB: u64 = 1 << 30;
const UBIO: BenchMode = BenchMode::Ubio(BackendKind::Auto);

fn spec(seed: u64) -> Spec {
    Spec {
        rounds: 3,
        ..Spec::standard(2, GIB, Pressure::Cgroup, seed)
    }
}

fn options(dir: &Path) -> MatrixOptions {
    let mut run = RunOptions::new(PathBuf::from("/nonexistent/ubio-bench"), None);
    run.warmup = false;
    MatrixOptions {
        run,
        out_dir: dir.to_owned(),
        max_points: None,
        max_secs: None,
        ceiling_bytes: None,
    }
}

/// What each point's fake does: by default every mode at 100 MB/s.
type Script = dyn Fn(&Point, &mut Fake);

/// Runs a session of `spec` in `dir` through fakes set up by `script`;
/// the outcome and the ids of the points in the order their executors
/// were made.
fn session(
    spec: &Spec,
    options: &MatrixOptions,
    script: &Script,
) -> (io::Result<Outcome>, Vec<String>) {
    let made = RefCell::new(Vec::new());
    let mut make = |p: &Point, _: &RunOptions| -> io::Result<Box<dyn Executor>> {
        made.borrow_mut().push(p.id.clone());
        let mut fake = Fake::new(p.workload.dataset_bytes);
        script(p, &mut fake);
        Ok(Box::new(fake))
    };
    let outcome = run(spec, options, &mut make, &Quiet);
    (outcome, made.into_inner())
}

fn plain(_: &Point, _: &mut Fake) {}

#[test]
fn the_points_are_the_product_of_the_axes_in_a_seeded_order() {
    let s = spec(7);
    let points = s.points();
    // 2 targets x 2 workloads x threads 1, 2, 4 x 1 block x 1 file x 3 datasets.
    assert_eq!(s.threads, [1, 2, 4], "1 to 2 x nproc by powers of two");
    assert_eq!(points.len(), 36);
    let mut ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 36, "ids are unique");
    assert!(
        ids.contains(&"ext4-shm_seq-read_bs1M_t4_f1_x0.5"),
        "{ids:?}"
    );
    for p in &points {
        let want = (p.dataset_fraction * GIB as f64) as u64;
        assert_eq!(p.workload.dataset_bytes, want, "{}", p.id);
        let config = s.config(p).unwrap();
        assert_eq!(config.memory_limit_bytes, Some(GIB));
        assert_eq!(config.modes, s.modes);
        assert!(matches!(config.target, Target::Loop { size_bytes, .. } if size_bytes > want));
    }
    assert_eq!(spec(7).points(), points, "the same seed, the same order");
    assert_ne!(spec(8).points(), points, "another seed, another order");
    let product_order = {
        let mut s = spec(7);
        s.targets.truncate(1);
        s.workloads.truncate(1);
        s.points()
    };
    assert!(
        product_order
            .windows(2)
            .any(|w| w[0].workload.threads > w[1].workload.threads
                || w[0].dataset_fraction > w[1].dataset_fraction),
        "shuffled, not in the axes' order"
    );
}

#[test]
fn the_seed_point_is_seed_003s_job_with_fio() {
    let mut s = spec(3);
    s.seed_jobs = Some(2);
    let points = s.points();
    assert_eq!(points.len(), 36 + 2 * 3, "one per target and dataset");
    let seed: Vec<&Point> = points.iter().filter(|p| p.seed_job).collect();
    for p in &seed {
        let w = &p.workload;
        assert_eq!(
            (w.kind, w.block_bytes, w.threads, w.files_per_thread),
            (WorkloadKind::SeqWrite, 2 << 20, 2, 10)
        );
        assert!(p.id.contains("seed003"), "{}", p.id);
    }
    // fio runs only at the seed's points, mirroring buffered and odirect.
    let dir = tempfile::tempdir().unwrap();
    let fio_points = RefCell::new(Vec::new());
    // The executor is made with the point's options: fio only where asked.
    let mut make = |p: &Point, o: &RunOptions| -> io::Result<Box<dyn Executor>> {
        let mut fake = Fake::new(p.workload.dataset_bytes);
        if o.fio {
            fio_points.borrow_mut().push(p.id.clone());
            fake.cross_checked = vec![BenchMode::Buffered, BenchMode::Odirect];
        }
        Ok(Box::new(fake))
    };
    let o = options(dir.path());
    let outcome = run(&s, &o, &mut make, &Quiet).unwrap();
    assert_eq!(fio_points.into_inner().len(), 6);
    let r = outcome.record;
    for p in r.points.iter().filter(|p| p.point.seed_job) {
        assert_eq!(p.fio.len(), 2, "{}", p.point.id);
    }
    let md = std::fs::read_to_string(dir.path().join("matrix.md")).unwrap();
    assert!(md.contains("Seed 003's job: fio's cross-check"), "{md}");
}

#[test]
fn every_point_runs_once_in_the_planned_order_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(11);
    let (outcome, made) = session(&s, &options(dir.path()), &plain);
    let outcome = outcome.unwrap();
    let planned: Vec<String> = s.points().into_iter().map(|p| p.id).collect();
    assert_eq!(made, planned);
    assert_eq!(outcome.ran, 36);
    assert_eq!(outcome.stopped, None);
    let r = &outcome.record;
    assert!(r.complete);
    assert_eq!(r.sessions.len(), 1);
    for p in &r.points {
        assert_eq!(p.state, PointState::Done, "{}", p.point.id);
        assert_eq!(p.modes.len(), 4);
        assert!(p.modes.iter().all(|m| m.runs_ok == 3));
        // The point's own report: its runs in the runner's order.
        let report = p.load_report(dir.path()).unwrap();
        assert!(report.complete);
        assert_eq!(report.runs.len(), 12);
        assert_eq!(report.config, s.config(&p.point).unwrap());
    }
    // Each point's rounds have an order seed of their own.
    let seeds: std::collections::HashSet<u64> = r
        .points
        .iter()
        .map(|p| p.load_report(dir.path()).unwrap().schedule.unwrap().seed)
        .collect();
    assert_eq!(seeds.len(), 36);
    // The record on disk is the one returned, and the exports are there.
    assert_eq!(record::load(dir.path()).unwrap().as_ref(), Some(r));
    for f in crate::harness::export::matrix::FILES {
        assert!(dir.path().join(f).exists(), "{f}");
    }
}

#[test]
fn a_matrix_split_into_sessions_goes_on_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(5);
    let mut o = options(dir.path());
    o.max_points = Some(10);
    let mut ran = Vec::new();
    for session_no in 1..=4 {
        let (outcome, made) = session(&s, &o, &plain);
        let outcome = outcome.unwrap();
        assert_eq!(outcome.ran, made.len());
        ran.extend(made);
        let r = &outcome.record;
        assert_eq!(r.sessions.len(), session_no);
        if session_no < 4 {
            assert_eq!(outcome.stopped.as_deref(), Some("--max-points 10"));
            assert_eq!(r.done(), 10 * session_no);
            assert!(!r.complete);
        } else {
            assert_eq!((outcome.ran, outcome.stopped), (6, None));
            assert!(r.complete);
        }
    }
    let planned: Vec<String> = s.points().into_iter().map(|p| p.id).collect();
    assert_eq!(ran, planned, "each point once, in the planned order");
    let (again, made) = session(&s, &o, &plain);
    assert_eq!((again.unwrap().ran, made.len()), (0, 0), "nothing left");
}

#[test]
fn an_interrupted_point_runs_again_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(9);
    let o = options(dir.path());
    let victim = s.points()[4].id.clone();
    // Its executor dies at its 5th run: the point fails, the matrix goes on.
    let breaks = {
        let victim = victim.clone();
        move |p: &Point, f: &mut Fake| {
            if p.id == victim {
                f.broken_at_measure = Some(5);
            }
        }
    };
    let (outcome, made) = session(&s, &o, &breaks);
    let r = outcome.unwrap().record;
    assert_eq!(made.len(), 36);
    assert!(!r.complete);
    let failed = r.point(&victim).unwrap();
    assert!(
        matches!(&failed.state, PointState::Failed { error } if error.contains("could not be spawned")),
        "{:?}",
        failed.state
    );
    // Its report holds the four runs it finished, marked incomplete.
    let partial = failed.load_report(dir.path()).unwrap();
    assert_eq!((partial.runs.len(), partial.complete), (4, false));
    let md = std::fs::read_to_string(dir.path().join("matrix.md")).unwrap();
    assert!(md.contains(&format!("{victim}: failed:")), "{md}");

    // The next session runs that point alone, whole.
    let (outcome, made) = session(&s, &o, &plain);
    let r = outcome.unwrap().record;
    assert_eq!(made, std::slice::from_ref(&victim));
    assert!(r.complete);
    let report = r.point(&victim).unwrap().load_report(dir.path()).unwrap();
    assert_eq!((report.runs.len(), report.complete), (12, true));

    // A point left pending by a kill (the process gone mid-point) runs
    // again too.
    let mut killed = record::load(dir.path()).unwrap().unwrap();
    killed.points[7].state = PointState::Pending;
    killed.complete = false;
    record::save(&killed, dir.path()).unwrap();
    let (_, made) = session(&s, &o, &plain);
    assert_eq!(made, [killed.points[7].point.id.clone()]);
}

#[test]
fn a_directory_of_another_matrix_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(dir.path());
    let mut s = spec(1);
    s.workloads.truncate(1);
    session(&s, &o, &plain).0.unwrap();
    let mut other = s.clone();
    other.memory_bytes = 2 * GIB;
    let (err, made) = session(&other, &o, &plain);
    let err = err.unwrap_err();
    assert!(made.is_empty());
    assert!(
        err.to_string()
            .contains("memory_bytes is 1073741824 there, 2147483648 here"),
        "{err}"
    );
}

#[test]
fn a_bad_spec_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    for (change, want) in [
        (
            (|s: &mut Spec| s.dataset_fractions.push(0.0)) as fn(&mut Spec),
            "dataset fraction 0",
        ),
        (|s: &mut Spec| s.modes.clear(), "the matrix has no modes"),
        (
            |s: &mut Spec| s.threads.push(2),
            "thread count 2 is listed twice",
        ),
        (|s: &mut Spec| s.memory_bytes = 1 << 20, "too little"),
    ] {
        let mut s = spec(1);
        change(&mut s);
        let (err, made) = session(&s, &options(dir.path()), &plain);
        let err = err.unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
        assert!(made.is_empty());
    }
}

#[test]
fn the_estimate_counts_every_pass_and_learns_the_rate_of_the_points_done() {
    let s = spec(2);
    let mut r = MatrixRecord::new(s.clone());
    let e = estimate(&r).unwrap();
    assert_eq!(e.points, 36);
    assert_eq!(e.runs, 36 * 3 * 4);
    // Each point: 3 rounds x 4 modes + the warm-up, + the dataset written
    // first for reads; datasets 0.5, 1, 2 GiB on each of 2 targets x 3
    // thread counts.
    let per_dataset = |passes: u64| passes * (GIB / 2 + GIB + 2 * GIB);
    let want = 2 * 3 * (per_dataset(13) + per_dataset(14));
    assert_eq!(e.bytes, want);
    let gb = want as f64 / 1e9;
    assert!((e.secs - ASSUMED_SECS_PER_GB * gb).abs() < 1e-6, "{e:?}");
    assert!(e.basis.contains("assuming"), "{}", e.basis);

    // Points done on the shm target at 0.5 s per GB: the shm points left
    // at that rate, the disk points at the overall rate (the same here).
    let mut done_gb = 0.0;
    for p in r
        .points
        .iter_mut()
        .filter(|p| p.point.target.backing == Backing::Shm)
        .take(5)
    {
        let gb = p.point.gb_moved(&s).unwrap();
        p.state = PointState::Done;
        p.wall_secs = Some(0.5 * gb);
        done_gb += gb;
    }
    let e = estimate(&r).unwrap();
    assert_eq!(e.points, 31);
    assert!((e.secs - 0.5 * (gb - done_gb)).abs() < 1e-6, "{e:?}");
    assert!(e.basis.contains("the 5 point(s) done"), "{}", e.basis);
    assert_eq!(duration_text(40.0), "40 s");
    assert_eq!(duration_text(725.0), "12 min");
    assert_eq!(duration_text(3900.0), "1 h 05 min");
}

/// Two matrices of the same spec through fakes: `slow` scales one mode's
/// throughput at one point of the new one.
fn ab_pair(
    old_script: &Script,
    new_script: &Script,
    timings: bool,
) -> (ab::MatrixComparison, tempfile::TempDir, tempfile::TempDir) {
    let mut s = spec(4);
    s.targets.truncate(1);
    s.workloads.truncate(1);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = session(&s, &options(a.path()), old_script)
        .0
        .unwrap()
        .record;
    let new = session(&s, &options(b.path()), new_script)
        .0
        .unwrap()
        .record;
    let opts = CompareOptions {
        timings,
        ..CompareOptions::default()
    };
    let c = ab::compare(&old, a.path(), &new, b.path(), opts).unwrap();
    (c, a, b)
}

const SLOW_POINT: &str = "ext4-disk_seq-write_bs1M_t2_f1_x1";

#[test]
fn ab_names_the_point_and_mode_that_regressed() {
    let slower = |p: &Point, f: &mut Fake| {
        if p.id == SLOW_POINT {
            f.attempts.insert(UBIO, vec![Attempt::Done(80.0)]);
        }
    };
    let (c, ..) = ab_pair(&plain, &slower, true);
    assert_eq!(c.points.len(), 9);
    assert!(c.regressed);
    // Slower, and (the fake's CPU runs by the second) more CPU per GB:
    // both at that point, of that mode only.
    let regressions = c.regressions();
    assert!(
        regressions[0].starts_with(&format!("{SLOW_POINT}: ubio: throughput MB/s -20.0%")),
        "{regressions:?}"
    );
    assert!(
        regressions
            .iter()
            .all(|r| r.starts_with(&format!("{SLOW_POINT}: ubio: "))),
        "{regressions:?}"
    );
    let md = c.to_markdown();
    assert!(md.contains("REGRESSION (ubio)"), "{md}");
    assert!(
        md.contains(&format!("- {SLOW_POINT}: ubio: throughput")),
        "{md}"
    );

    let (same, ..) = ab_pair(&plain, &plain, true);
    assert!(!same.regressed);
    assert!(same
        .to_markdown()
        .contains("no regression beyond the noise at any point"));
}

#[test]
fn ab_a_change_within_the_runs_own_noise_is_not_a_regression() {
    // Rounds that scatter by ±15 % in both runs (a combined noise of about
    // 2 x 21 %): 10 % off the median is within it; half is not.
    let scatter = |median: f64| {
        move |p: &Point, f: &mut Fake| {
            if p.id == SLOW_POINT {
                let runs = [0.85, 1.0, 1.15].map(|x| Attempt::Done(median * x));
                f.attempts.insert(BenchMode::Buffered, runs.to_vec());
            }
        }
    };
    let (c, ..) = ab_pair(&scatter(100.0), &scatter(90.0), true);
    assert!(!c.regressed, "{:?}", c.regressions());
    let point = c.points.iter().find(|p| p.id == SLOW_POINT).unwrap();
    let buffered = &point.comparison.modes[0];
    assert_eq!(buffered.mode, BenchMode::Buffered);
    let m = &buffered.metrics[0];
    assert!(m.noise_pct > 10.0, "{}", m.noise_pct);

    let (c, ..) = ab_pair(&scatter(100.0), &scatter(50.0), true);
    assert!(c.regressed);
    assert!(c.regressions()[0].starts_with(&format!("{SLOW_POINT}: buffered: throughput")));
}

#[test]
fn ab_without_timings_judges_only_cache_and_reclaim() {
    // The new machine is twice as slow (an emulated guest), and ubio keeps
    // 64 MiB more cached at one point.
    let guest = |p: &Point, f: &mut Fake| {
        for m in [
            BenchMode::Buffered,
            BenchMode::Dontcache,
            BenchMode::Odirect,
            UBIO,
        ] {
            f.attempts.insert(m, vec![Attempt::Done(50.0)]);
        }
        if p.id == SLOW_POINT {
            f.peak_cache = HashMap::from([(UBIO, 80 << 20)]);
        }
    };
    let host = |_: &Point, f: &mut Fake| {
        f.peak_cache = HashMap::from([(UBIO, 16 << 20)]);
    };
    let (timed, ..) = ab_pair(&host, &guest, true);
    assert!(
        timed.regressions().len() > 9,
        "every point slower when timings count"
    );
    let (c, ..) = ab_pair(&host, &guest, false);
    let regressions = c.regressions();
    assert_eq!(regressions.len(), 1, "{regressions:?}");
    assert!(
        regressions[0].starts_with(&format!(
            "{SLOW_POINT}: ubio: peak dataset cache MiB +400.0%"
        )),
        "{regressions:?}"
    );
    let md = c.to_markdown();
    assert!(md.contains("timings not compared"), "{md}");
    assert!(!md.contains("| throughput MB/s |"), "{md}");
}

#[test]
fn points_missing_from_one_run_are_listed_not_judged() {
    let mut s = spec(4);
    s.targets.truncate(1);
    s.workloads.truncate(1);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = session(&s, &options(a.path()), &plain).0.unwrap().record;
    let mut o = options(b.path());
    o.max_points = Some(4);
    let new = session(&s, &o, &plain).0.unwrap().record;
    let c = ab::compare(&old, a.path(), &new, b.path(), CompareOptions::default()).unwrap();
    assert_eq!(c.points.len(), 4);
    assert_eq!(c.unmatched.len(), 5);
    assert!(c.unmatched.iter().all(|u| u.ends_with("not done in new")));
    assert!(c
        .to_markdown()
        .contains("warning: the new matrix is not complete"));
}

/// The many-streams matrix of issue 37: threads against processes, files of
/// their own against one shared file.
fn streams_spec(seed: u64) -> Spec {
    Spec {
        targets: vec!["ext4/shm".parse().unwrap()],
        threads: vec![1, 4, 16, 64],
        streams: vec![Streams::Threads, Streams::Processes],
        files: vec![Files::Own, Files::Shared],
        dataset_fractions: vec![4.0],
        ..spec(seed)
    }
}

#[test]
fn streams_and_files_are_axes_and_one_stream_is_never_a_process_point() {
    let s = streams_spec(3);
    let points = s.points();
    // 2 workloads x (1 thread x 2 files + 3 thread counts x 2 streams x 2 files).
    assert_eq!(points.len(), 2 * (2 + 3 * 2 * 2));
    let ids: std::collections::HashSet<&str> = points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), points.len(), "ids are unique");
    for id in [
        "ext4-shm_seq-read_bs1M_t1_f1_x4",
        "ext4-shm_seq-read_bs1M_t1_f1_x4_shared",
        "ext4-shm_seq-write_bs1M_t64_f1_x4_procs",
        "ext4-shm_seq-write_bs1M_t16_f1_x4_procs_shared",
    ] {
        assert!(ids.contains(id), "{id} in {ids:?}");
    }
    assert!(!ids.contains("ext4-shm_seq-read_bs1M_t1_f1_x4_procs"));
    for p in &points {
        let w = &p.workload;
        assert_eq!(w.processes > 1, p.id.contains("_procs"), "{}", p.id);
        if w.processes > 1 {
            assert_eq!(w.processes, w.threads, "a process per stream");
        }
        assert_eq!(w.shared_file, p.id.ends_with("_shared"), "{}", p.id);
        crate::harness::runner::check_streams(w).unwrap();
    }
    // The axes' defaults keep the ids and the spec of matrices made before them.
    let old: Spec = {
        let mut v = serde_json::to_value(spec(3)).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("streams");
        o.remove("files");
        serde_json::from_value(v).unwrap()
    };
    assert_eq!(old, spec(3));
    assert!(spec(3).points().iter().all(|p| !p.id.contains("_procs")
        && !p.id.contains("_shared")
        && p.workload.processes == 1
        && !p.workload.shared_file));
}

#[test]
fn the_ratios_name_the_fastest_other_mode_and_compare_cpu_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = streams_spec(5);
    s.threads = vec![4];
    s.workloads = vec![WorkloadKind::SeqRead];
    s.rounds = 1;
    // O_DIRECT the fastest, ubio at 0.9 of it.
    let script = |_: &Point, f: &mut Fake| {
        f.attempts
            .insert(BenchMode::Odirect, vec![Attempt::Done(1000.0)]);
        f.attempts.insert(UBIO, vec![Attempt::Done(900.0)]);
    };
    let (outcome, _) = session(&s, &options(dir.path()), &script);
    let r = outcome.unwrap().record;
    let t = crate::harness::export::matrix::figures::ratios(&r);
    let col = t
        .header
        .iter()
        .position(|h| h.starts_with("ubio / best of"))
        .expect("a ubio / best column");
    assert_eq!(t.rows.len(), 4);
    for row in &t.rows {
        assert_eq!(row[col], "0.90 (odirect)", "{row:?}");
    }
    assert!(t
        .rows
        .iter()
        .any(|r| r[3] == "4 (4 processes, shared file)"));
}
