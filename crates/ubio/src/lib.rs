//! ubio: uncached buffered I/O.
//!
//! Stream large files through the page cache without filling it: pages a
//! stream brings in are dropped soon after use, writeback is started early
//! and bounded by a small window, and pages that others had cached stay.
//! Four interchangeable backends (`kernel` RWF_DONTCACHE, `emulated`,
//! `direct`, `buffered`) are chosen per file by `auto`.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! let mut src = ubio::File::open("big.in")?;
//! let mut dst = ubio::File::create("big.out")?;
//! std::io::copy(&mut src, &mut dst)?;
//! dst.close()?; // flushes the write-behind and reports deferred errors
//! # Ok::<(), std::io::Error>(())
//! ```

// Unsafe code lives only in the system-call wrappers and the aligned buffer.
#![deny(unsafe_code)]

pub mod backend;
#[allow(unsafe_code)]
mod buffer;
pub mod claims;
pub mod copy;
pub mod descriptors;
pub mod error;
pub mod evict;
mod file;
pub mod mounts;
pub mod overlay;
pub mod probe;
pub mod procfs;
pub mod race;
pub mod read_switch;
pub mod readahead;
mod readbehind;
pub mod reclaim;
pub mod residency;
mod setting;
pub mod size;
mod stream;
#[allow(unsafe_code)]
pub mod sys;
pub mod tracker;
mod writebehind;

pub use backend::BackendKind;
pub use buffer::AlignedBuf;
pub use file::{File, OpenOptions};
pub use probe::{probe_path, Choice, Probe};
pub use readahead::SmallReadahead;
pub use stream::{
    DirectReads, DirectWrites, Stats, Stream, StreamOptions, DEFAULT_READ_LAG, DEFAULT_WINDOW,
    DIRECT_MIN, PIECE,
};

/// `SKIP name: reason` for this crate's own tests, a failure with
/// UBIO_NO_SKIP=1 (as ubio_testenv::skip, which this crate cannot depend on).
#[cfg(test)]
pub(crate) fn test_skip(name: &str, reason: &str) {
    let line = format!("SKIP {name}: {reason}");
    assert!(
        std::env::var_os("UBIO_NO_SKIP").is_none_or(|v| v != "1"),
        "{line}"
    );
    eprintln!("{line}");
}
