//! What a workload wrote: each file's old and new contents, and what each
//! commit acknowledged.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;

/// One file of a workload: what it held before and what it holds after;
/// the commits say which bytes of `new` were acknowledged.
#[derive(Clone)]
pub(crate) struct Model {
    pub(crate) path: PathBuf,
    pub(crate) old: Option<Vec<u8>>,
    pub(crate) new: Vec<u8>,
}

/// What a commit acknowledged: per file (index into the models), ranges of
/// its new content.
pub(crate) type Acked = BTreeMap<usize, Vec<Range<u64>>>;

pub(crate) struct Workload {
    pub(crate) models: Vec<Model>,
    /// Commit number (its mark is "c<N>") -> what was acknowledged by then.
    pub(crate) commits: Vec<Acked>,
}
