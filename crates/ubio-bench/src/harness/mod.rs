//! `ubio bench`: the limits of buffered I/O, measured and tracked.
//!
//! A benchmark is a [`schema::Config`] (a workload, modes, a target, a memory
//! limit, an optional victim) run as phases, hyperfine-style: prepare the
//! target and dataset, warm up, measure every mode round after round
//! (each round in a new random order, the dataset's own pages dropped between runs, one sample
//! per second and page-cache peaks every 10 ms), then summarise. The result is a [`schema::Report`], written as JSON after
//! every run; the exporters, `compare` and the seed suite read only that.

// In the order a benchmark uses them: what it is, how it runs, what it
// gives.
pub mod compare;
pub mod data_path;
pub mod engine;
pub mod export;
pub mod fio;
pub mod gz;
pub mod judge;
pub mod matrix;
/// A synthetic report for tests of the results side (no disk needed).
pub mod mock;
pub mod mode;
pub mod neighbours;
pub mod runner;
pub mod sampler;
pub mod schedule;
pub mod schema;
pub mod suite;
pub mod summary;
