//! `ubio bench`: the limits of buffered I/O, measured and tracked.
//!
//! A benchmark is a [`schema::Config`] (a workload, modes, a target, a memory
//! limit, an optional victim) run as phases, hyperfine-style: prepare the
//! target and dataset, warm up, measure every mode round after round
//! (interleaved, caches dropped between runs, one sample per second), then
//! summarise. The result is a [`schema::Report`], written as JSON after
//! every run; the exporters, `compare` and the seed suite read only that.

pub mod mode;
pub mod schema;
pub mod suite;
pub mod summary;
pub mod mock;
pub mod export;
pub mod engine;
pub mod sampler;
pub mod runner;
pub mod fio;
pub mod compare;
