//! The whole benchmark, hyperfine-style phases driven by its schedule:
//!
//! 1. prepare: the target made and each mode checked there (a mode that
//!    cannot run is left out with a warning that says why), then the
//!    memory cgroup or the balloon, the dataset, the victim and its rate
//!    alone;
//! 2. warm up: the dataset settled, one untimed pass of the workload;
//! 3. measure: rounds x modes, each round in a new random order (seeded,
//!    see [`super::schedule`]); before each run the dataset is settled; a
//!    run that fails or is still going at `--timeout` (then stopped) is
//!    run again at once, up to `--retries` times, every attempt kept in
//!    the report; the balloon's state is noted and the report written
//!    after every run; fio's cross-check of the mode right after it;
//! 4. conclude: the cross-checks judged, the mode summaries, the balloon's
//!    give-back warned about, the report marked complete.
//!
//! The phases are this module's; what carries them out is behind the
//! executor seam ([`executor::Executor`], as hyperfine's): the process
//! executor ([`process::ProcessExecutor`]) for real runs, and in the tests
//! a fake that answers from a script, without root and without disk.

pub mod environment;
pub mod executor;
#[cfg(test)]
pub(crate) mod fake;
pub mod process;
pub mod target;

use super::mode::WorkloadKind;
use super::schedule::Schedule;
use super::schema::{Config, LeftOut, Report, Run, Sample, Workload};
use super::{sampler, summary};
use executor::{BalloonState, Ended, Executor, RunSpec};
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How to run a benchmark (what is measured is the [`Config`]).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The harness's own binary: workers run as `ubio-bench __worker bench
    /// JOB`, the balloon's holder as `ubio-bench __worker balloon`.
    pub worker_exe: PathBuf,
    /// The `ubio` binary that the ubio-cat, ubio-cp and ubio-run-* modes
    /// run; None where none was found (those modes are then left out).
    pub ubio_exe: Option<PathBuf>,
    /// Where the report files go (rewritten after every run); None: nowhere.
    pub out_dir: Option<PathBuf>,
    /// Run fio's version of the buffered and O_DIRECT jobs afterwards.
    pub fio: bool,
    /// One untimed buffered pass of the workload before measuring.
    pub warmup: bool,
    /// How long the victim is measured alone.
    pub victim_solo_secs: f64,
    /// For the report's environment.
    pub git_commit: Option<String>,
    /// After every run that wrote or copied the whole dataset, check
    /// (untimed) that every file holds what was written; a mismatch fails
    /// the run.
    pub verify: bool,
    /// Seed of the modes' order in every round (kept in the report).
    pub order_seed: u64,
    /// How many times a failed (or timed-out) run is run again, at once.
    pub retries: u32,
    /// A run still going after this long is stopped and counts as failed.
    pub run_timeout: Option<Duration>,
}

impl RunOptions {
    /// Defaults around the given binaries.
    pub fn new(worker_exe: PathBuf, ubio_exe: Option<PathBuf>) -> RunOptions {
        RunOptions {
            worker_exe,
            ubio_exe,
            out_dir: None,
            fio: false,
            warmup: true,
            victim_solo_secs: 3.0,
            git_commit: None,
            verify: false,
            order_seed: super::schedule::seed_from_clock(),
            retries: 0,
            run_timeout: None,
        }
    }
}

/// What the runner tells its caller while it works. Every method has a
/// default that does nothing.
pub trait Progress {
    /// A phase starts or something happened ("writing the dataset").
    fn message(&self, _line: &str) {}
    /// A measured run starts: its label ("round 1/3: buffered") and the
    /// bytes it will move (unless capped by the duration).
    fn run_started(&self, _label: &str, _bytes: u64) {}
    /// A sample of the running run and its live line.
    fn sample(&self, _sample: &Sample, _line: &str) {}
    /// The run is over: its one-line result.
    fn run_finished(&self, _run: &Run, _line: &str) {}
    /// A warning (also in the report).
    fn warning(&self, _line: &str) {}
}

/// Progress that goes nowhere.
pub struct Quiet;
impl Progress for Quiet {}

/// Runs the benchmark of `config` for real (needs root) and returns its
/// report, also written to `options.out_dir` after every run.
pub fn run(config: &Config, options: &RunOptions, progress: &dyn Progress) -> io::Result<Report> {
    validate(config)?;
    let mut executor = process::ProcessExecutor::new(options)?;
    let mut write = |report: &Report| match &options.out_dir {
        Some(dir) => super::export::write_all(report, dir).map(drop),
        None => Ok(()),
    };
    run_with(config, options, &mut executor, progress, &mut write)
}

/// The phases of the benchmark of `config`, carried out by `executor`;
/// `write` gets the report after the warm-up, after every run and at the
/// end (complete). An error of the executor ends the benchmark (what was
/// written stays, marked incomplete); a run that fails does not.
pub fn run_with(
    config: &Config,
    options: &RunOptions,
    executor: &mut dyn Executor,
    progress: &dyn Progress,
    write: &mut dyn FnMut(&Report) -> io::Result<()>,
) -> io::Result<Report> {
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    validate(config)?;

    // 1. Prepare.
    let mut warnings = Vec::new();
    let mut modes = Vec::new();
    let mut left_out = Vec::new();
    for (mode, why) in executor.check_modes(config, progress)? {
        match why {
            None => modes.push(mode),
            Some(why) => {
                let l = LeftOut { mode, why };
                progress.warning(&l.warning());
                warnings.push(l.warning());
                left_out.push(l);
            }
        }
    }
    if modes.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("no mode can run here: {}", warnings.join("; ")),
        ));
    }
    let prepared = executor.prepare(&modes, progress)?;
    let mut report = Report::new(prepared.environment, config.clone(), started_unix);
    report.pressure = prepared.pressure;
    report.victim_solo = prepared.victim_solo;
    warnings.extend(prepared.warnings);
    report.warnings = warnings;
    report.left_out = left_out;

    // 2. Warm up.
    if options.warmup {
        executor.settle(&mut report.warnings)?;
        progress.message("warm-up: one buffered pass of the workload (untimed)");
        executor.warm_up(progress)?;
    }
    write(&report)?;

    // 3. Measure.
    let schedule = Schedule::new(options.order_seed, &modes, config.rounds);
    progress.message(&format!(
        "order seed {} (--seed {} runs the same orders)",
        schedule.seed, schedule.seed
    ));
    report.schedule = Some(schedule.clone());
    for (round, mode) in schedule.runs() {
        let label = format!("round {round}/{}: {mode}", config.rounds);
        let attempts = 1 + options.retries;
        for attempt in 1..=attempts {
            executor.settle(&mut report.warnings)?;
            let label = if attempt > 1 {
                format!("{label} (attempt {attempt} of {attempts})")
            } else {
                label.clone()
            };
            let spec = RunSpec {
                mode,
                round,
                label: &label,
                timeout: options.run_timeout,
            };
            let run = match executor.measure(&spec, progress)? {
                Ended::Finished(run) => run,
                Ended::TimedOut(mut run) => {
                    let secs = options.run_timeout.map_or(0.0, |t| t.as_secs_f64());
                    run.error = Some(format!(
                        "timed out: still running after {secs:.0} s (--timeout), stopped"
                    ));
                    run
                }
            };
            progress.run_finished(&run, &run_line(&label, &run));
            let failed = run.error.is_some();
            if let Some(e) = &run.error {
                let again = if attempt < attempts {
                    "; running it again"
                } else {
                    ""
                };
                let msg = format!("{label} failed: {e}{again}");
                progress.warning(&msg);
                report.warnings.push(msg);
            }
            report.runs.push(run);
            report.wall_secs = started.elapsed().as_secs_f64();
            note_balloon(executor.balloon(), &mut report);
            write(&report)?;
            if !failed {
                break;
            }
        }
        if executor.cross_checks(mode) {
            executor.settle(&mut report.warnings)?;
            progress.message(&format!("round {round}/{}: fio's {mode}", config.rounds));
            executor.cross_check(mode);
        }
    }

    // 4. Conclude.
    let concluded = executor.conclude(&report)?;
    for line in &concluded.warnings {
        progress.warning(line);
    }
    report.fio = concluded.fio;
    report.warnings.extend(concluded.warnings);
    report.modes = summary::summarize_modes(&report);
    report.wall_secs = started.elapsed().as_secs_f64();
    note_balloon(executor.balloon(), &mut report);
    if let Some(p) = report
        .pressure
        .as_ref()
        .filter(|p| p.held_at_end_bytes < p.balloon_bytes)
    {
        report.warnings.push(format!(
            "the balloon gave back {} MiB during the benchmark to keep {} MiB available for others: \
             the runs after that had more memory than planned ({:?})",
            (p.balloon_bytes - p.held_at_end_bytes) >> 20,
            p.floor_bytes >> 20,
            p.shrinks
        ));
    }
    report.complete = true;
    write(&report)?;
    Ok(report)
}

/// The balloon's state so far, into the report.
fn note_balloon(balloon: Option<BalloonState>, report: &mut Report) {
    if let (Some(b), Some(p)) = (balloon, report.pressure.as_mut()) {
        p.held_at_end_bytes = b.held_bytes;
        p.shrinks = b.shrinks;
    }
}

fn validate(c: &Config) -> io::Result<()> {
    let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
    let w = &c.workload;
    if w.threads == 0 || w.files_per_thread == 0 || c.rounds == 0 || w.queue_depth == 0 {
        return bad("threads, files per thread, rounds and queue depth must be at least 1".into());
    }
    if c.modes.is_empty() {
        return bad("no modes to run".into());
    }
    if w.block_bytes < 512 || w.block_bytes > 1 << 30 {
        return bad(format!(
            "block size {} out of range (512 B to 1 GiB)",
            w.block_bytes
        ));
    }
    let files = u64::from(w.threads) * u64::from(w.files_per_thread);
    if w.dataset_bytes < files * w.block_bytes {
        return bad(format!(
            "the dataset ({} bytes) is smaller than one block per file ({files} files of {} bytes)",
            w.dataset_bytes, w.block_bytes
        ));
    }
    if let (Some(hot), Some(limit)) = (c.victim_hot_bytes, c.memory_limit_bytes) {
        if hot > limit / 4 * 3 {
            return bad(format!(
                "the victim's hot file ({} MiB) does not fit in the memory limit ({} MiB) with room to spare: keep it under three quarters",
                hot >> 20,
                limit >> 20
            ));
        }
    }
    if w.duration_secs.is_some_and(|d| d.is_nan() || d <= 0.0) {
        return bad("the duration must be positive".into());
    }
    check_streams(w).or_else(bad)?;
    if let Some(p) = c.global_pressure {
        if c.memory_limit_bytes.is_some() {
            return bad(
                "global pressure runs without a memory cgroup: give no memory limit with it".into(),
            );
        }
        if c.victim_hot_bytes
            .is_some_and(|hot| hot > p.leave_bytes / 4 * 3)
        {
            return bad(format!(
                "the victim's hot file does not fit in the {} MiB global pressure leaves, with room to spare: \
                 keep it under three quarters",
                p.leave_bytes >> 20
            ));
        }
    }
    Ok(())
}

/// The streams' processes divide the threads evenly; a shared file holds
/// regions, which copies (a whole file to a whole file) have none of.
pub fn check_streams(w: &Workload) -> Result<(), String> {
    if w.processes == 0 || !w.threads.is_multiple_of(w.processes) {
        return Err(format!(
            "{} threads cannot be spread evenly over {} processes: give a divisor of the threads",
            w.threads, w.processes
        ));
    }
    if w.shared_file && w.kind == WorkloadKind::Copy {
        return Err("a copy copies whole files: a shared file is for reads and writes".into());
    }
    Ok(())
}

/// One line per finished run.
pub fn run_line(label: &str, run: &Run) -> String {
    if let Some(e) = &run.error {
        return format!("{label}: FAILED: {e}");
    }
    let s = &run.summary;
    let mut line = format!(
        "{label}: {:.0} MB/s in {:.1} s, cpu {:.2} s/GB (sys {:.2}), dataset cache peak {} final {}",
        s.mb_per_s,
        run.secs,
        s.cpu_secs_per_gb,
        s.cpu_sys_secs_per_gb,
        sampler::short_bytes(s.peak_dataset_cached_bytes),
        sampler::short_bytes(s.final_dataset_cached_bytes)
    );
    if let Some(v) = &s.victim {
        line.push_str(&format!(
            ", victim {:.0}/s (worst {:.0})",
            v.median_ops_per_s, v.worst_ops_per_s
        ));
    }
    if let Some(b) = s.reported_to_host_bytes {
        line.push_str(&format!(
            ", {} reported to the host",
            sampler::short_bytes(b)
        ));
    }
    line
}

/// The phases, through the fake executor: no root, no disk.
#[cfg(test)]
mod tests {
    use super::fake::{Attempt, Call, Fake};
    use super::*;
    use crate::harness::mode::{Backable, BenchMode, WorkloadKind};
    use crate::harness::schema::{GlobalPressure, Target, Workload};
    use ubio::BackendKind;

    const DATASET: u64 = 400_000_000;
    const UBIO: BenchMode = BenchMode::Ubio(BackendKind::Auto);
    const BACKED: BenchMode = BenchMode::Backed(Backable::Buffered);

    fn config(modes: &[BenchMode], rounds: u32) -> Config {
        Config {
            workload: Workload {
                kind: WorkloadKind::SeqRead,
                block_bytes: 1 << 20,
                threads: 1,
                files_per_thread: 1,
                dataset_bytes: DATASET,
                duration_secs: None,
                queue_depth: 1,
                seed: 1,
                processes: 1,
                shared_file: false,
            },
            modes: modes.to_vec(),
            rounds,
            target: Target::Dir {
                path: PathBuf::from("/nonexistent: the fake makes nothing"),
            },
            memory_limit_bytes: Some(100_000_000),
            victim_hot_bytes: None,
            global_pressure: None,
        }
    }

    fn options(seed: u64) -> RunOptions {
        let mut o = RunOptions::new(PathBuf::from("/nonexistent/ubio-bench"), None);
        o.order_seed = seed;
        o
    }

    /// Runs the benchmark through `fake`; the report and every report
    /// written on the way.
    fn bench(
        config: &Config,
        options: &RunOptions,
        fake: &mut Fake,
    ) -> (io::Result<Report>, Vec<Report>) {
        let mut written = Vec::new();
        let result = run_with(config, options, fake, &Quiet, &mut |r: &Report| {
            written.push(r.clone());
            Ok(())
        });
        (result, written)
    }

    fn runs_of(r: &Report, mode: BenchMode) -> Vec<&Run> {
        r.runs.iter().filter(|run| run.mode == mode).collect()
    }

    #[test]
    fn runs_follow_the_schedule_each_round_in_a_new_order() {
        let modes = [BenchMode::Buffered, BenchMode::Dontcache, UBIO, BACKED];
        for seed in [1, 7, 42] {
            let c = config(&modes, 5);
            let mut fake = Fake::new(DATASET);
            let report = bench(&c, &options(seed), &mut fake).0.unwrap();
            let planned = Schedule::new(seed, &modes, 5);
            assert_eq!(
                fake.measured(),
                planned.runs().collect::<Vec<_>>(),
                "seed {seed}"
            );
            assert_eq!(report.schedule.as_ref(), Some(&planned));
            assert!(
                planned.rounds.windows(2).any(|w| w[0] != w[1]),
                "seed {seed}"
            );
            let ran: Vec<(u32, BenchMode)> =
                report.runs.iter().map(|r| (r.round, r.mode)).collect();
            assert_eq!(ran, fake.measured());
            // Every run starts settled: a settle right before each measure.
            for (i, call) in fake.calls.iter().enumerate() {
                if matches!(call, Call::Measure { .. }) {
                    assert_eq!(fake.calls[i - 1], Call::Settle, "before {call:?}");
                }
            }
            assert!(report.complete);
            assert_eq!(report.modes.len(), modes.len());
        }
    }

    #[test]
    fn the_phases_come_in_order_and_the_warm_up_is_optional() {
        let c = config(&[BenchMode::Buffered, UBIO], 1);
        let mut fake = Fake::new(DATASET);
        bench(&c, &options(3), &mut fake).0.unwrap();
        let first: Vec<&Call> = fake.calls.iter().take(4).collect();
        assert!(matches!(first[0], Call::CheckModes));
        assert!(matches!(first[1], Call::Prepare(_)));
        assert_eq!(first[2..], [&Call::Settle, &Call::WarmUp]);
        assert_eq!(fake.calls.last(), Some(&Call::Conclude));

        let mut no_warmup = options(3);
        no_warmup.warmup = false;
        let mut fake = Fake::new(DATASET);
        bench(&c, &no_warmup, &mut fake).0.unwrap();
        assert!(!fake.calls.contains(&Call::WarmUp));
    }

    #[test]
    fn the_report_is_written_after_every_run() {
        let c = config(&[BenchMode::Buffered, BenchMode::Odirect, UBIO], 3);
        let mut fake = Fake::new(DATASET);
        let (report, written) = bench(&c, &options(5), &mut fake);
        let report = report.unwrap();
        // After the warm-up, after each of the 9 runs, and complete at the end.
        assert_eq!(written.len(), 1 + 9 + 1);
        for (i, w) in written.iter().enumerate().take(10) {
            assert_eq!(w.runs.len(), i, "report {i}");
            assert!(!w.complete && w.modes.is_empty(), "report {i}");
        }
        assert_eq!(written.last(), Some(&report));
        assert!(report.complete);
        assert_eq!(report.warnings, ["prepared by the fake"]);
    }

    #[test]
    fn a_mode_that_cannot_run_is_left_out_with_its_reason() {
        let c = config(&[BenchMode::Buffered, BenchMode::Odirect, UBIO], 2);
        let mut fake = Fake::new(DATASET);
        fake.left_out = vec![(BenchMode::Odirect, "O_DIRECT is refused here")];
        let report = bench(&c, &options(1), &mut fake).0.unwrap();
        assert_eq!(
            fake.calls[1],
            Call::Prepare(vec![BenchMode::Buffered, UBIO])
        );
        assert!(runs_of(&report, BenchMode::Odirect).is_empty());
        assert_eq!(report.runs.len(), 4);
        assert_eq!(
            report.warnings[0],
            "odirect left out: O_DIRECT is refused here"
        );
        assert_eq!(
            report.why_left_out(BenchMode::Odirect).as_deref(),
            Some("O_DIRECT is refused here")
        );
        assert_eq!(report.left_out.len(), 1);
        assert_eq!(report.why_left_out(BenchMode::Buffered), None);

        let mut none = Fake::new(DATASET);
        none.left_out = vec![(BenchMode::Buffered, "no"), (UBIO, "not either")];
        let c = config(&[BenchMode::Buffered, UBIO], 2);
        let err = bench(&c, &options(1), &mut none).0.unwrap_err();
        assert!(err.to_string().contains("no mode can run here"), "{err}");
        assert!(!none.calls.iter().any(|c| matches!(c, Call::Prepare(_))));
    }

    #[test]
    fn a_mode_that_fails_is_recorded_and_the_others_go_on() {
        let modes = [BenchMode::Buffered, BenchMode::Dontcache, UBIO];
        let c = config(&modes, 3);
        let mut fake = Fake::new(DATASET);
        fake.attempts.insert(
            BenchMode::Dontcache,
            vec![Attempt::Fails("preadv2: Operation not supported")],
        );
        let report = bench(&c, &options(9), &mut fake).0.unwrap();
        assert_eq!(report.runs.len(), 9);
        let failed = runs_of(&report, BenchMode::Dontcache);
        assert!(failed
            .iter()
            .all(|r| r.error.as_deref() == Some("preadv2: Operation not supported")));
        for round in 1..=3 {
            let want =
                format!("round {round}/3: dontcache failed: preadv2: Operation not supported");
            assert!(report.warnings.contains(&want), "{:#?}", report.warnings);
        }
        let summary = |m: BenchMode| report.modes.iter().find(|s| s.mode == m).unwrap();
        assert_eq!(summary(BenchMode::Dontcache).runs_ok, 0);
        assert_eq!(summary(BenchMode::Dontcache).runs_failed, 3);
        assert_eq!(summary(BenchMode::Dontcache).mb_per_s, None);
        assert_eq!(summary(UBIO).runs_ok, 3);
        assert!(summary(UBIO).mb_per_s.is_some());
        assert!(report.complete);
    }

    #[test]
    fn retries_run_a_failed_run_again_at_once() {
        let modes = [BenchMode::Buffered, UBIO];
        let c = config(&modes, 2);
        let mut o = options(11);
        o.retries = 2;
        let mut fake = Fake::new(DATASET);
        // ubio fails its first attempt only; buffered every time.
        fake.attempts.insert(
            UBIO,
            vec![Attempt::Fails("worker died"), Attempt::Done(200.0)],
        );
        fake.attempts
            .insert(BenchMode::Buffered, vec![Attempt::Fails("disk full")]);
        let report = bench(&c, &o, &mut fake).0.unwrap();
        // Each attempt right after the one it repeats: the schedule's order
        // with every failed run repeated in place.
        let mut expected = Vec::new();
        let mut ubio_attempts = 0;
        for (round, mode) in Schedule::new(11, &modes, 2).runs() {
            let times = if mode == UBIO {
                ubio_attempts += 1;
                if ubio_attempts == 1 {
                    2
                } else {
                    1
                }
            } else {
                3
            };
            expected.extend((0..times).map(|_| (round, mode)));
        }
        assert_eq!(fake.measured(), expected);
        let labels: Vec<String> = fake
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Measure { label, mode, .. } if *mode == BenchMode::Buffered => {
                    Some(label.clone())
                }
                _ => None,
            })
            .collect();
        assert!(
            labels.contains(&"round 1/2: buffered (attempt 3 of 3)".to_owned()),
            "{labels:?}"
        );
        // Every attempt stays in the report.
        assert_eq!(runs_of(&report, UBIO).len(), 3);
        assert_eq!(runs_of(&report, BenchMode::Buffered).len(), 6);
        let summary = |m: BenchMode| report.modes.iter().find(|s| s.mode == m).unwrap();
        assert_eq!((summary(UBIO).runs_ok, summary(UBIO).runs_failed), (2, 1));
        assert_eq!(summary(BenchMode::Buffered).runs_ok, 0);
        let w = &report.warnings;
        assert!(
            w.iter()
                .any(|l| l.ends_with("ubio failed: worker died; running it again")),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|l| l == "round 2/2: buffered (attempt 3 of 3) failed: disk full"),
            "{w:#?}"
        );
    }

    #[test]
    fn a_run_that_times_out_is_stopped_and_counts_as_failed() {
        let modes = [BenchMode::Buffered, UBIO];
        let c = config(&modes, 2);
        let mut o = options(2);
        o.run_timeout = Some(Duration::from_secs(30));
        o.retries = 1;
        let mut fake = Fake::new(DATASET);
        fake.attempts
            .insert(UBIO, vec![Attempt::Hangs, Attempt::Done(100.0)]);
        let report = bench(&c, &o, &mut fake).0.unwrap();
        // The executor was told the time-out, for every run.
        assert!(fake.calls.iter().all(|c| match c {
            Call::Measure { timeout, .. } => *timeout == Some(Duration::from_secs(30)),
            _ => true,
        }));
        let ubio = runs_of(&report, UBIO);
        assert_eq!(ubio.len(), 3, "the timed-out run, its retry and round 2's");
        assert_eq!(
            ubio[0].error.as_deref(),
            Some("timed out: still running after 30 s (--timeout), stopped")
        );
        assert_eq!(ubio[0].secs, 30.0);
        assert!(ubio[1..].iter().all(|r| r.error.is_none()));
        let summary = report.modes.iter().find(|s| s.mode == UBIO).unwrap();
        assert_eq!((summary.runs_ok, summary.runs_failed), (2, 1));
    }

    #[test]
    fn the_balloons_give_back_is_noted_after_each_run_and_warned() {
        let modes = [BenchMode::Buffered, UBIO];
        let mut c = config(&modes, 2);
        c.memory_limit_bytes = None;
        c.global_pressure = Some(GlobalPressure {
            leave_bytes: 2 << 30,
            floor_bytes: 1 << 30,
        });
        let mut fake = Fake::new(DATASET);
        fake.balloon_bytes = Some(8 << 30);
        // Holds it all through run 2, gives 1 GiB back during run 3.
        fake.held_after_run = vec![8 << 30, 8 << 30, 7 << 30];
        let (report, written) = bench(&c, &options(4), &mut fake);
        let report = report.unwrap();
        let held: Vec<u64> = written[1..5]
            .iter()
            .map(|w| w.pressure.as_ref().unwrap().held_at_end_bytes)
            .collect();
        assert_eq!(held, [8 << 30, 8 << 30, 7 << 30, 7 << 30]);
        let p = report.pressure.as_ref().unwrap();
        assert_eq!(p.held_at_end_bytes, 7 << 30);
        assert_eq!(p.shrinks.len(), 1);
        assert!(
            report.warnings.iter().any(|w| w.starts_with(
                "the balloon gave back 1024 MiB during the benchmark to keep 1024 MiB available"
            )),
            "{:#?}",
            report.warnings
        );

        let mut kept = Fake::new(DATASET);
        kept.balloon_bytes = Some(8 << 30);
        let report = bench(&c, &options(4), &mut kept).0.unwrap();
        assert!(!report.warnings.iter().any(|w| w.contains("balloon")));
    }

    #[test]
    fn a_cross_check_runs_settled_right_after_its_mode() {
        let modes = [BenchMode::Buffered, BenchMode::Odirect, UBIO];
        let c = config(&modes, 2);
        let mut fake = Fake::new(DATASET);
        fake.cross_checked = vec![BenchMode::Buffered, BenchMode::Odirect];
        let report = bench(&c, &options(8), &mut fake).0.unwrap();
        for (i, call) in fake.calls.iter().enumerate() {
            if let Call::CrossCheck(mode) = call {
                assert_eq!(fake.calls[i - 1], Call::Settle);
                assert!(
                    matches!(&fake.calls[i - 2], Call::Measure { mode: m, .. } if m == mode),
                    "{:?}",
                    &fake.calls[i - 2..=i]
                );
            }
        }
        let checks = fake
            .calls
            .iter()
            .filter(|c| matches!(c, Call::CrossCheck(_)))
            .count();
        assert_eq!(checks, 4);
        assert_eq!(report.fio.len(), 2);
    }

    #[test]
    fn an_executor_error_ends_the_benchmark_with_what_was_written() {
        let c = config(&[BenchMode::Buffered, UBIO], 3);
        let mut fake = Fake::new(DATASET);
        fake.broken_at_measure = Some(4);
        let (result, written) = bench(&c, &options(6), &mut fake);
        let err = result.unwrap_err();
        assert!(err.to_string().contains("could not be spawned"), "{err}");
        let last = written.last().unwrap();
        assert_eq!(last.runs.len(), 3);
        assert!(!last.complete);
        assert!(!fake.calls.contains(&Call::Conclude));
    }

    #[test]
    fn a_bad_config_is_refused_before_anything_runs() {
        let mut c = config(&[BenchMode::Buffered], 1);
        c.rounds = 0;
        let mut fake = Fake::new(DATASET);
        let err = bench(&c, &options(1), &mut fake).0.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(fake.calls.is_empty());
    }
}
