//! One run's streams spread over several worker processes, seen by the
//! parent as one worker: [`Combine`] folds the events of N bench workers
//! into the events one worker would have sent.
//!
//! - `bench_ready` of every worker: time to say go to all of them (the
//!   parent writes the line; the clocks start together);
//! - `bench_started`: once every worker has started, at the earliest start;
//! - `bench_progress`: bytes and CPU summed over the workers' latest
//!   reports (a worker done counts with its final figures), at the latest
//!   time reported;
//! - `bench_done`: once every worker is done: bytes and CPU summed, the
//!   earliest start, the latest ends, every stream's ubio statistics, capped
//!   if any was;
//! - an error of any worker is the group's error, naming the worker.
//!
//! It is pure (no processes, no clock), so the tests drive it with made-up
//! events.

use super::Event;
use crate::harness::engine::{EngineProgress, EngineResult, EngineStart};

/// What the group's reader should do with one worker's event.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing to pass on yet.
    Wait,
    /// Every worker is ready: send each its go line.
    Go,
    /// The group's event, as one worker would have sent it.
    Pass(Event),
    /// The group failed.
    Fail(String),
}

/// The state of a group of `n` bench workers.
#[derive(Debug, Clone)]
pub struct Combine {
    ready: Vec<bool>,
    started: Vec<Option<f64>>,
    last: Vec<Option<EngineProgress>>,
    done: Vec<Option<EngineResult>>,
    failed: bool,
}

impl Combine {
    pub fn new(n: usize) -> Combine {
        Combine {
            ready: vec![false; n],
            started: vec![None; n],
            last: vec![None; n],
            done: vec![None; n],
            failed: false,
        }
    }

    pub fn len(&self) -> usize {
        self.ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Worker `i` said `ev` (or failed with the message).
    pub fn on(&mut self, i: usize, ev: Result<Event, String>) -> Step {
        if self.failed {
            return Step::Wait;
        }
        let n = self.len();
        let who = |m: String| {
            if n > 1 {
                format!("worker {} of {n}: {m}", i + 1)
            } else {
                m
            }
        };
        let ev = match ev {
            // The end of the output of a worker that is done.
            Err(_) if self.done[i].is_some() => return Step::Wait,
            Ok(Event::Error { message }) | Err(message) => {
                self.failed = true;
                return Step::Fail(who(message));
            }
            Ok(ev) => ev,
        };
        match ev {
            Event::BenchReady => {
                self.ready[i] = true;
                if self.ready.iter().all(|r| *r) {
                    Step::Go
                } else {
                    Step::Wait
                }
            }
            Event::BenchStarted(s) => {
                self.started[i] = Some(s.start_mono_secs);
                if self.started.iter().all(Option::is_some) {
                    Step::Pass(Event::BenchStarted(EngineStart {
                        start_mono_secs: self.start(),
                    }))
                } else {
                    Step::Wait
                }
            }
            Event::BenchProgress(p) => {
                self.last[i] = Some(p);
                if self.started.iter().all(Option::is_some) {
                    Step::Pass(Event::BenchProgress(self.progress()))
                } else {
                    Step::Wait
                }
            }
            Event::BenchDone(r) => {
                self.last[i] = Some(EngineProgress {
                    t_mono_secs: r.end_mono_secs,
                    bytes: r.bytes,
                    cpu_user_secs: r.cpu_user_secs,
                    cpu_sys_secs: r.cpu_sys_secs,
                });
                self.done[i] = Some(r);
                if self.done.iter().all(Option::is_some) {
                    Step::Pass(Event::BenchDone(self.result()))
                } else if self.started.iter().all(Option::is_some) {
                    Step::Pass(Event::BenchProgress(self.progress()))
                } else {
                    Step::Wait
                }
            }
            // Victim events never come from a bench worker.
            other => Step::Fail(who(format!(
                "unexpected event from a bench worker: {other:?}"
            ))),
        }
    }

    fn start(&self) -> f64 {
        self.started
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min)
    }

    /// The sum of the latest reports (a worker not heard from yet: 0).
    fn progress(&self) -> EngineProgress {
        let mut p = EngineProgress {
            t_mono_secs: self.start(),
            bytes: 0,
            cpu_user_secs: 0.0,
            cpu_sys_secs: 0.0,
        };
        for l in self.last.iter().flatten() {
            p.t_mono_secs = p.t_mono_secs.max(l.t_mono_secs);
            p.bytes += l.bytes;
            p.cpu_user_secs += l.cpu_user_secs;
            p.cpu_sys_secs += l.cpu_sys_secs;
        }
        p
    }

    fn result(&self) -> EngineResult {
        let done: Vec<&EngineResult> = self.done.iter().flatten().collect();
        let first = done[0];
        let stats: Vec<serde_json::Value> = done
            .iter()
            .filter_map(|r| r.ubio_stats.as_ref())
            .flat_map(|v| match v {
                serde_json::Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            })
            .collect();
        EngineResult {
            bytes: done.iter().map(|r| r.bytes).sum(),
            start_mono_secs: done
                .iter()
                .map(|r| r.start_mono_secs)
                .fold(f64::INFINITY, f64::min),
            end_mono_secs: done
                .iter()
                .map(|r| r.end_mono_secs)
                .fold(f64::NEG_INFINITY, f64::max),
            io_end_mono_secs: done
                .iter()
                .map(|r| r.io_end_mono_secs)
                .fold(f64::NEG_INFINITY, f64::max),
            cpu_user_secs: done.iter().map(|r| r.cpu_user_secs).sum(),
            cpu_sys_secs: done.iter().map(|r| r.cpu_sys_secs).sum(),
            backend: first.backend.clone(),
            reason: first.reason.clone(),
            ubio_stats: (!stats.is_empty()).then_some(serde_json::Value::Array(stats)),
            capped: done.iter().any(|r| r.capped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(t: f64) -> Result<Event, String> {
        Ok(Event::BenchStarted(EngineStart { start_mono_secs: t }))
    }

    fn progress(t: f64, bytes: u64, cpu: f64) -> Result<Event, String> {
        Ok(Event::BenchProgress(EngineProgress {
            t_mono_secs: t,
            bytes,
            cpu_user_secs: cpu,
            cpu_sys_secs: cpu / 2.0,
        }))
    }

    fn done(start: f64, end: f64, bytes: u64, stats: u64) -> Result<Event, String> {
        Ok(Event::BenchDone(EngineResult {
            bytes,
            start_mono_secs: start,
            end_mono_secs: end,
            io_end_mono_secs: end - 0.5,
            cpu_user_secs: 1.0,
            cpu_sys_secs: 2.0,
            backend: "emulated".into(),
            reason: "why".into(),
            ubio_stats: Some(serde_json::json!([{ "n": stats }])),
            capped: false,
        }))
    }

    #[test]
    fn one_worker_passes_its_events_through() {
        let mut c = Combine::new(1);
        assert_eq!(c.on(0, Ok(Event::BenchReady)), Step::Go);
        assert_eq!(c.on(0, started(5.0)), Step::Pass(started(5.0).unwrap()));
        assert_eq!(
            c.on(0, progress(5.1, 10, 0.2)),
            Step::Pass(progress(5.1, 10, 0.2).unwrap())
        );
        let Step::Pass(Event::BenchDone(r)) = c.on(0, done(5.0, 7.0, 20, 1)) else {
            panic!("done")
        };
        assert_eq!(
            (r.bytes, r.start_mono_secs, r.end_mono_secs),
            (20, 5.0, 7.0)
        );
        assert_eq!(r.ubio_stats, Some(serde_json::json!([{ "n": 1 }])));
    }

    #[test]
    fn go_waits_for_every_worker() {
        let mut c = Combine::new(3);
        assert_eq!(c.on(2, Ok(Event::BenchReady)), Step::Wait);
        assert_eq!(c.on(0, Ok(Event::BenchReady)), Step::Wait);
        assert_eq!(c.on(1, Ok(Event::BenchReady)), Step::Go);
    }

    #[test]
    fn progress_is_summed_once_all_started() {
        let mut c = Combine::new(2);
        assert_eq!(c.on(1, started(10.2)), Step::Wait);
        // Progress before every worker started is kept, not passed on.
        assert_eq!(c.on(1, progress(10.3, 100, 0.1)), Step::Wait);
        assert_eq!(c.on(0, started(10.0)), Step::Pass(started(10.0).unwrap()));
        let Step::Pass(Event::BenchProgress(p)) = c.on(0, progress(10.4, 50, 0.3)) else {
            panic!("progress")
        };
        assert_eq!((p.t_mono_secs, p.bytes), (10.4, 150));
        assert!((p.cpu_user_secs - 0.4).abs() < 1e-9 && (p.cpu_sys_secs - 0.2).abs() < 1e-9);
        // A later report replaces the worker's earlier one.
        let Step::Pass(Event::BenchProgress(p)) = c.on(1, progress(10.5, 300, 0.2)) else {
            panic!("progress")
        };
        assert_eq!(p.bytes, 350);
    }

    #[test]
    fn done_once_every_worker_is_done() {
        let mut c = Combine::new(2);
        c.on(0, started(1.0));
        c.on(1, started(1.1));
        // The first done counts in the progress with its final figures.
        let Step::Pass(Event::BenchProgress(p)) = c.on(1, done(1.1, 3.0, 64, 2)) else {
            panic!("progress")
        };
        assert_eq!(p.bytes, 64);
        assert_eq!(
            c.on(1, Err("the bench worker exited".into())),
            Step::Wait,
            "a worker done may end its output"
        );
        let Step::Pass(Event::BenchDone(r)) = c.on(0, done(1.0, 4.0, 36, 1)) else {
            panic!("done")
        };
        assert_eq!(r.bytes, 100);
        assert_eq!((r.start_mono_secs, r.end_mono_secs), (1.0, 4.0));
        assert_eq!(r.io_end_mono_secs, 3.5);
        assert_eq!((r.cpu_user_secs, r.cpu_sys_secs), (2.0, 4.0));
        assert_eq!(
            r.ubio_stats,
            Some(serde_json::json!([{ "n": 1 }, { "n": 2 }])),
            "every stream's statistics, in the workers' order"
        );
        assert!(!r.capped);
    }

    #[test]
    fn a_worker_error_fails_the_group_once() {
        let mut c = Combine::new(4);
        c.on(0, started(1.0));
        assert_eq!(
            c.on(
                2,
                Ok(Event::Error {
                    message: "read: EIO".into()
                })
            ),
            Step::Fail("worker 3 of 4: read: EIO".into())
        );
        assert_eq!(c.on(1, Err("the bench worker exited".into())), Step::Wait);
    }
}
