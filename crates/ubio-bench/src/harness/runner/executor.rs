//! The seam between the runner's phases and what carries them out, as
//! hyperfine's `Executor`: the runner decides what runs when (the
//! schedule, retries, time-outs, warnings, the report after every run); an
//! executor makes the target, runs the workload and measures it.
//! [`super::process::ProcessExecutor`] does it for real (root, a memory
//! cgroup or a balloon, worker processes, samplers); the tests' fake
//! (`runner/fake.rs`) answers from a script, without root and without disk.

use super::Progress;
use crate::harness::mode::BenchMode;
use crate::harness::schema::{
    Config, Environment, FioCheck, PressureRecord, Report, Run, VictimSolo,
};
use std::io;
use std::time::Duration;

/// A mode asked for, and why it cannot run on the target (None: it can).
pub type ModeCheck = (BenchMode, Option<String>);

/// What the prepare phase made.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// For the report: anything the user should know before trusting the
    /// figures.
    pub warnings: Vec<String>,
    pub environment: Environment,
    /// The balloon of a global-pressure run, as inflated.
    pub pressure: Option<PressureRecord>,
    /// The victim's rate alone, if there is a victim.
    pub victim_solo: Option<VictimSolo>,
}

/// One measured run, as the runner asks for it.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    pub mode: BenchMode,
    /// 1-based.
    pub round: u32,
    /// "round 2/3: ubio" (for progress).
    pub label: &'a str,
    /// Stop the run if it is still going after this long.
    pub timeout: Option<Duration>,
}

/// How a measured run ended.
#[derive(Debug, Clone)]
pub enum Ended {
    /// The workload ended by itself: done, or failed (the run's error says
    /// why).
    Finished(Run),
    /// It was still running at [`RunSpec::timeout`] and was stopped: what
    /// it measured until then.
    TimedOut(Run),
}

/// The balloon of a global-pressure run, now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalloonState {
    pub held_bytes: u64,
    /// Its lines about memory it gave back to keep the floor.
    pub shrinks: Vec<String>,
}

/// What the conclude phase adds to the report.
#[derive(Debug, Clone, Default)]
pub struct Concluded {
    /// fio's figures against the harness's, per mode.
    pub fio: Vec<FioCheck>,
    pub warnings: Vec<String>,
}

/// Carries out the phases the runner drives. Errors end the benchmark (a
/// run that fails is not an error: it comes back with its error set).
pub trait Executor {
    /// The first step of preparing: the target made, and each mode of the
    /// config checked there.
    fn check_modes(
        &mut self,
        config: &Config,
        progress: &dyn Progress,
    ) -> io::Result<Vec<ModeCheck>>;

    /// The rest of preparing, for the modes that can run: the memory
    /// cgroup or the balloon, the dataset, the victim and its rate alone.
    fn prepare(&mut self, modes: &[BenchMode], progress: &dyn Progress) -> io::Result<Prepared>;

    /// Before the warm-up, every run and every cross-check: the dataset's
    /// own pages dropped, fresh files where the workload writes them, the
    /// victim's hot file read through again. A warning goes into
    /// `warnings` (once).
    fn settle(&mut self, warnings: &mut Vec<String>) -> io::Result<()>;

    /// One untimed pass of the workload before measuring.
    fn warm_up(&mut self, progress: &dyn Progress) -> io::Result<()>;

    /// One measured run (a backed mode first backs its pages).
    fn measure(&mut self, run: &RunSpec, progress: &dyn Progress) -> io::Result<Ended>;

    /// The balloon now, under global pressure.
    fn balloon(&self) -> Option<BalloonState>;

    /// Whether `mode` has a cross-check (fio's job for it).
    fn cross_checks(&mut self, mode: BenchMode) -> bool;

    /// The cross-check of `mode`, once, right after its run in a round.
    fn cross_check(&mut self, mode: BenchMode);

    /// Conclude: the victim stopped, the cross-checks judged against the
    /// report's runs.
    fn conclude(&mut self, report: &Report) -> io::Result<Concluded>;
}
