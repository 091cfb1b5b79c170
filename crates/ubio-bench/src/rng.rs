//! The harness's seeded generator is the test environment's.

pub use ubio_testenv::rng::{mix, SplitMix64, GOLDEN_GAMMA};
