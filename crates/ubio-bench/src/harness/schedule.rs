//! The order the modes run in: every round a new random permutation of the
//! modes, drawn from one seed, so that no mode always runs after the same
//! other one. On a VM that hands free memory back to its host, what ran
//! before a run decides where its page-cache pages come from (see
//! [`crate::backing`]): a fixed order (A B A B) decides who wins.
//!
//! The runner and the mock report both walk [`Schedule::runs`], so the
//! order is tested without processes; the report keeps the seed and every
//! round's order.

use super::mode::BenchMode;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

/// The seed and the order of every round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// `--seed`: the same seed and modes give the same orders.
    pub seed: u64,
    /// Round 1's order first.
    pub rounds: Vec<Vec<BenchMode>>,
}

impl Schedule {
    /// `rounds` shuffles of `modes` (Fisher-Yates over splitmix64), one per
    /// round, from `seed`.
    pub fn new(seed: u64, modes: &[BenchMode], rounds: u32) -> Schedule {
        let mut rng = SplitMix64(seed);
        let rounds = (0..rounds)
            .map(|_| {
                let mut order = modes.to_vec();
                shuffle(&mut rng, &mut order);
                order
            })
            .collect();
        Schedule { seed, rounds }
    }

    /// Every run in the order it happens: (round, 1-based; mode).
    pub fn runs(&self) -> impl Iterator<Item = (u32, BenchMode)> + '_ {
        self.rounds
            .iter()
            .zip(1..)
            .flat_map(|(order, round)| order.iter().map(move |&m| (round, m)))
    }
}

/// Fisher-Yates over `rng`: the modes of a round, the points of a matrix.
pub fn shuffle<T>(rng: &mut SplitMix64, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// A seed from the clock, for when none is given (printed and kept in the
/// report, so the order can be run again).
pub fn seed_from_clock() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    // Mixed once, so that seeds a second apart differ in every bit.
    SplitMix64(now.as_secs() ^ u64::from(now.subsec_nanos())).next_u64() >> 16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::mock;
    use crate::harness::mode::Tool;
    use ubio::BackendKind;

    fn modes() -> Vec<BenchMode> {
        vec![
            BenchMode::Buffered,
            BenchMode::Dontcache,
            BenchMode::Odirect,
            BenchMode::Ubio(BackendKind::Auto),
            BenchMode::Tool(Tool::Cat),
        ]
    }

    fn sorted(mut v: Vec<BenchMode>) -> Vec<String> {
        let mut names: Vec<String> = v.drain(..).map(|m| m.to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn every_round_is_a_permutation_and_the_seed_repeats_it() {
        for seed in 0..50 {
            let s = Schedule::new(seed, &modes(), 6);
            assert_eq!(s.rounds.len(), 6);
            for order in &s.rounds {
                assert_eq!(sorted(order.clone()), sorted(modes()), "seed {seed}");
            }
            assert_eq!(s, Schedule::new(seed, &modes(), 6));
            let runs: Vec<(u32, BenchMode)> = s.runs().collect();
            assert_eq!(runs.len(), 30);
            assert_eq!(runs[5], (2, s.rounds[1][0]));
        }
    }

    #[test]
    fn rounds_and_seeds_give_different_orders() {
        let s = Schedule::new(7, &modes(), 4);
        assert!(s.rounds.windows(2).any(|w| w[0] != w[1]), "{s:?}");
        let firsts: std::collections::HashSet<String> = (0..40)
            .map(|seed| Schedule::new(seed, &modes(), 1).rounds[0][0].to_string())
            .collect();
        assert_eq!(
            firsts.len(),
            modes().len(),
            "every mode comes first for some seed"
        );
        assert_ne!(Schedule::new(1, &modes(), 3), Schedule::new(2, &modes(), 3));
    }

    /// The mock report runs through the same schedule as the runner: its
    /// runs are in the recorded order, round by round.
    #[test]
    fn the_report_records_the_order_its_runs_ran_in() {
        for seed in [1, 2, 3] {
            let report = mock::report(seed);
            let schedule = report.schedule.as_ref().expect("recorded");
            assert_eq!(schedule.seed, seed);
            let ran: Vec<(u32, BenchMode)> =
                report.runs.iter().map(|r| (r.round, r.mode)).collect();
            let planned: Vec<(u32, BenchMode)> = schedule.runs().collect();
            assert_eq!(ran, planned);
            for order in &schedule.rounds {
                assert_eq!(sorted(order.clone()), sorted(report.config.modes.clone()));
            }
            let back = crate::harness::schema::Report::from_json(
                &crate::harness::export::json::render(&report).unwrap(),
            )
            .unwrap();
            assert_eq!(back.schedule.as_ref(), Some(schedule));
        }
        let differs = (1..20).any(|seed| {
            let r = mock::report(seed);
            let s = r.schedule.unwrap();
            s.rounds.windows(2).any(|w| w[0] != w[1])
        });
        assert!(differs);
    }
}
