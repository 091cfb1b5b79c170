//! ubio's benchmark harness: workloads, the victim, samplers of a run,
//! exporters and the seed suite. The environment it runs in (scratch
//! filesystems, memory cgroups, cleanup on signals) is `ubio-testenv`.

#![deny(unsafe_code)] // io_uring's submission queue (engine/uring.rs) is the exception

pub mod backing;
pub mod clock;
pub mod cpu;
pub mod harness;
pub mod page_reporting;
pub mod rng;
pub mod stats;
pub mod victim;
pub mod worker;

pub(crate) use ubio_testenv::path_context;
