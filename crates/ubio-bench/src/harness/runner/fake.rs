//! An executor for the runner's tests: it answers from a script (which
//! modes can run, how each attempt of a mode ends, what the balloon holds
//! after each run, which modes have a cross-check) and records every call
//! the runner makes, in order. No root, no disk, no processes: runs are
//! made up, with a sample or two and the summary the real runs get.

use super::executor::{BalloonState, Concluded, Ended, Executor, ModeCheck, Prepared, RunSpec};
use super::Progress;
use crate::harness::mode::BenchMode;
use crate::harness::schema::{Config, FioCheck, PressureRecord, Report, Run, Sample, VictimSolo};
use crate::harness::summary::{summarize_run, FastPeaks, RunInput};
use crate::stats::Summary;
use std::collections::HashMap;
use std::io;
use std::time::Duration;

/// How one attempt of a mode ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attempt {
    /// Moves the dataset at this many MB/s.
    Done(f64),
    /// The workload fails with this error.
    Fails(&'static str),
    /// It never ends by itself: stopped at the runner's time-out.
    Hangs,
}

/// What the runner asked, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    CheckModes,
    Prepare(Vec<BenchMode>),
    Settle,
    WarmUp,
    Measure {
        mode: BenchMode,
        round: u32,
        label: String,
        timeout: Option<Duration>,
    },
    CrossCheck(BenchMode),
    Conclude,
}

#[derive(Default)]
pub struct Fake {
    /// Modes that cannot run, and why.
    pub left_out: Vec<(BenchMode, &'static str)>,
    /// Each mode's attempts in the order they happen, the last repeated;
    /// a mode not here is always Done(100.0).
    pub attempts: HashMap<BenchMode, Vec<Attempt>>,
    /// The balloon: its size (None: no global pressure) and what it holds
    /// after each run, the last repeated.
    pub balloon_bytes: Option<u64>,
    pub held_after_run: Vec<u64>,
    /// Modes that have a cross-check.
    pub cross_checked: Vec<BenchMode>,
    /// Fail the measure call with this number (1-based): an error that
    /// ends the benchmark.
    pub broken_at_measure: Option<usize>,
    pub dataset_bytes: u64,
    /// The dataset's page-cache peak of each mode's runs (absent: 0).
    pub peak_cache: HashMap<BenchMode, u64>,
    pub calls: Vec<Call>,
    measured: usize,
    tried: HashMap<BenchMode, usize>,
}

impl Fake {
    pub fn new(dataset_bytes: u64) -> Fake {
        Fake {
            dataset_bytes,
            ..Fake::default()
        }
    }

    /// The measure calls, as (round, mode).
    pub fn measured(&self) -> Vec<(u32, BenchMode)> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Measure { mode, round, .. } => Some((*round, *mode)),
                _ => None,
            })
            .collect()
    }

    fn next_attempt(&mut self, mode: BenchMode) -> Attempt {
        let n = self.tried.entry(mode).or_insert(0);
        *n += 1;
        match self.attempts.get(&mode) {
            Some(list) if !list.is_empty() => list[(*n - 1).min(list.len() - 1)],
            _ => Attempt::Done(100.0),
        }
    }

    /// A run of `mode` that moved `bytes` in `secs`, sampled once a second.
    fn run(&self, mode: BenchMode, round: u32, bytes: u64, secs: f64) -> Run {
        let whole = secs.floor().max(1.0) as usize;
        let samples: Vec<Sample> = (1..=whole)
            .map(|t| Sample {
                cpu_user_secs: 0.1,
                cpu_sys_secs: 0.2,
                ..Sample::moved(t as f64, 1.0, bytes / whole as u64)
            })
            .collect();
        let summary = summarize_run(&RunInput {
            samples: &samples,
            bytes,
            secs,
            time_to_durable_secs: None,
            final_dataset_cached_bytes: Some(0),
            victim_solo_ops_per_s: None,
            fast_peaks: self.peak_cache.get(&mode).map(|&cached_bytes| FastPeaks {
                cached_bytes,
                dirty_writeback_bytes: Some(0),
            }),
            reported_to_host_bytes: None,
        });
        Run {
            mode,
            round,
            backend: "fake".into(),
            reason: "scripted".into(),
            error: None,
            bytes,
            secs,
            samples,
            summary,
            ubio_stats: None,
            prefaulted_bytes: None,
        }
    }
}

impl Executor for Fake {
    fn check_modes(&mut self, config: &Config, _: &dyn Progress) -> io::Result<Vec<ModeCheck>> {
        self.calls.push(Call::CheckModes);
        Ok(config
            .modes
            .iter()
            .map(|&m| {
                let why = self.left_out.iter().find(|(l, _)| *l == m);
                (m, why.map(|(_, w)| (*w).to_owned()))
            })
            .collect())
    }

    fn prepare(&mut self, modes: &[BenchMode], _: &dyn Progress) -> io::Result<Prepared> {
        self.calls.push(Call::Prepare(modes.to_vec()));
        let pressure = self.balloon_bytes.map(|b| PressureRecord {
            balloon_bytes: b,
            leave_bytes: 2 << 30,
            floor_bytes: 1 << 30,
            available_before_bytes: b + (2 << 30),
            available_after_bytes: 2 << 30,
            inflate_secs: 1.0,
            held_at_end_bytes: b,
            shrinks: Vec::new(),
        });
        Ok(Prepared {
            warnings: vec!["prepared by the fake".into()],
            environment: crate::harness::mock::environment(),
            pressure,
            victim_solo: Summary::of(&[1000.0]).map(|ops_per_s| VictimSolo { ops_per_s }),
        })
    }

    fn settle(&mut self, _: &mut Vec<String>) -> io::Result<()> {
        self.calls.push(Call::Settle);
        Ok(())
    }

    fn warm_up(&mut self, _: &dyn Progress) -> io::Result<()> {
        self.calls.push(Call::WarmUp);
        Ok(())
    }

    fn measure(&mut self, spec: &RunSpec, _: &dyn Progress) -> io::Result<Ended> {
        self.calls.push(Call::Measure {
            mode: spec.mode,
            round: spec.round,
            label: spec.label.to_owned(),
            timeout: spec.timeout,
        });
        self.measured += 1;
        if self.broken_at_measure == Some(self.measured) {
            return Err(io::Error::other("the fake's worker could not be spawned"));
        }
        let bytes = self.dataset_bytes;
        Ok(match self.next_attempt(spec.mode) {
            Attempt::Done(mb_per_s) => {
                let secs = bytes as f64 / (mb_per_s * 1e6);
                Ended::Finished(self.run(spec.mode, spec.round, bytes, secs))
            }
            Attempt::Fails(why) => {
                let mut run = self.run(spec.mode, spec.round, bytes / 4, 1.0);
                run.error = Some(why.to_owned());
                Ended::Finished(run)
            }
            Attempt::Hangs => {
                let timeout = spec
                    .timeout
                    .expect("a run that never ends needs the runner's time-out");
                let run = self.run(spec.mode, spec.round, bytes / 8, timeout.as_secs_f64());
                Ended::TimedOut(run)
            }
        })
    }

    fn balloon(&self) -> Option<BalloonState> {
        let size = self.balloon_bytes?;
        let held = match self.held_after_run.as_slice() {
            [] => size,
            list => list[self.measured.saturating_sub(1).min(list.len() - 1)],
        };
        let shrinks = (held < size)
            .then(|| format!("shrunk {held} 900000000 {}", 1u64 << 30))
            .into_iter()
            .collect();
        Some(BalloonState {
            held_bytes: held,
            shrinks,
        })
    }

    fn cross_checks(&mut self, mode: BenchMode) -> bool {
        self.cross_checked.contains(&mode)
    }

    fn cross_check(&mut self, mode: BenchMode) {
        self.calls.push(Call::CrossCheck(mode));
    }

    fn conclude(&mut self, report: &Report) -> io::Result<Concluded> {
        self.calls.push(Call::Conclude);
        let fio = self
            .cross_checked
            .iter()
            .map(|&mode| FioCheck {
                mode,
                command: "fio (fake)".into(),
                fio_version: "fio-fake".into(),
                fio_mb_per_s: 100.0,
                fio_runs_mb_per_s: vec![100.0; report.config.rounds as usize],
                harness_mb_per_s: 100.0,
                difference_pct: 0.0,
                agrees: true,
            })
            .collect();
        Ok(Concluded {
            fio,
            warnings: Vec::new(),
        })
    }
}
