//! ubio's engine outside the process: the contract applied to the files
//! of other programs, which cannot link the library or load its shim
//! (statically linked programs, stdio, inherited descriptors, a process
//! already running, every process of a machine's scopes).
//!
//! - [`follow`]: the [`Follower`], which watches the file positions of a
//!   set of processes through /proc and applies the library's own
//!   policies (its [`Tracker`](ubio::tracker::Tracker)) to how they move:
//!   `ubio run` and `ubio attach`.
//! - [`policy`]: `ubio policy`'s engine: [`scope`]s say which processes
//!   and files are managed, [`discover`] finds the processes (fanotify, or
//!   the scopes' cgroups polled), and the same Follower follows them.
//! - [`budget`]: a page-cache budget per scope, kept in each of its
//!   cgroups ([`cgroup`]: v1 and v2) by the kernel's own reclaim.
//! - [`reclaim`]: the machine's reclaim as the policy daemon reports it,
//!   with kswapd's wakes counted in a [`tracefs`] instance of its own.
//!
//! The library (`ubio`), its C API, the Python module and the shim do not
//! link any of this: what the shim shares with the engine (the claims it
//! sends) is in [`ubio::claims`].

// Unsafe code lives only in the library's system-call wrappers (ubio::sys).
#![deny(unsafe_code)]

pub mod bdi;
pub mod budget;
pub mod cgroup;
pub mod discover;
pub mod follow;
pub mod lateness;
pub mod policy;
pub mod realtime;
pub mod reclaim;
pub mod scope;
mod silent;
mod submit;
pub mod tracefs;
pub mod tree;

pub use follow::{Admit, AdmitFn, Candidate, FileReport, FollowOptions, FollowStats, Follower};
