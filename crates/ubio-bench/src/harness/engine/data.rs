//! Where a benchmark's files are and what is in them.
//!
//! Every thread owns `files_per_thread` files of the same size (the dataset
//! split evenly, rounded down to whole blocks, so every request is a whole
//! block and O_DIRECT needs no tail handling); or, with a shared file, every
//! thread's files are regions of the same size, one after the other, in one
//! file (`data/shared`), as many streams of one program working on their
//! own parts of one file. Every block starts with a
//! stamp (file id, block index) over an incompressible pattern, so a block
//! written or copied to the wrong place is caught by [`check_file`], at the
//! cost of 16 bytes per block in the workload.

use crate::harness::mode::WorkloadKind;
use crate::harness::schema::Workload;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Bytes of the stamp at the start of every block.
pub const STAMP_BYTES: usize = 16;

/// The files of one benchmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// The benchmark's own directory (files go in `data/` and `copy/`).
    pub dir: PathBuf,
    pub threads: u32,
    pub files_per_thread: u32,
    /// Size of every file: a whole number of blocks.
    pub file_bytes: u64,
    pub block_bytes: u64,
    /// Every (thread, file) is a region of `file_bytes` of one shared file,
    /// at `file_id * file_bytes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

impl Layout {
    /// The layout of `w` under `dir`: `dataset_bytes` split evenly over
    /// the files, rounded down to whole blocks (at least one per file).
    pub fn new(dir: &Path, w: &Workload) -> Layout {
        let files = u64::from(w.threads.max(1)) * u64::from(w.files_per_thread.max(1));
        let block = w.block_bytes.max(1);
        let blocks = (w.dataset_bytes / files / block).max(1);
        Layout {
            dir: dir.to_path_buf(),
            threads: w.threads.max(1),
            files_per_thread: w.files_per_thread.max(1),
            file_bytes: blocks * block,
            block_bytes: block,
            shared: w.shared_file,
        }
    }

    /// Bytes over all files.
    pub fn total_bytes(&self) -> u64 {
        self.file_bytes * u64::from(self.threads) * u64::from(self.files_per_thread)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn copy_dir(&self) -> PathBuf {
        self.dir.join("copy")
    }

    /// Source file `file` of thread `thread` (with a shared file, the
    /// file that holds its region).
    pub fn source(&self, thread: u32, file: u32) -> PathBuf {
        if self.shared {
            return self.data_dir().join("shared");
        }
        self.data_dir().join(format!("t{thread}-f{file}"))
    }

    /// Where a copy of [`Layout::source`] goes.
    pub fn copy(&self, thread: u32, file: u32) -> PathBuf {
        if self.shared {
            return self.copy_dir().join("shared");
        }
        self.copy_dir().join(format!("t{thread}-f{file}"))
    }

    /// Where the region of file `file_id` starts in its file: 0, or with a
    /// shared file `file_id * file_bytes`.
    pub fn base(&self, file_id: u64) -> u64 {
        if self.shared {
            file_id * self.file_bytes
        } else {
            0
        }
    }

    /// Bytes of the files of `threads` threads.
    pub fn lane_bytes(&self, threads: u32) -> u64 {
        self.file_bytes * u64::from(threads) * u64::from(self.files_per_thread)
    }

    /// A number unique to each file of the dataset (its stamp).
    pub fn file_id(&self, thread: u32, file: u32) -> u64 {
        u64::from(thread) * u64::from(self.files_per_thread) + u64::from(file)
    }

    /// Every source file, thread by thread (a shared file once).
    pub fn sources(&self) -> Vec<PathBuf> {
        if self.shared {
            return vec![self.source(0, 0)];
        }
        self.each(|t, f| self.source(t, f))
    }

    /// Every copy, in the order of [`Layout::sources`].
    pub fn copies(&self) -> Vec<PathBuf> {
        if self.shared {
            return vec![self.copy(0, 0)];
        }
        self.each(|t, f| self.copy(t, f))
    }

    /// The files whose page cache a run of `kind` is about: the sources,
    /// and for copies the copies too.
    pub fn watched(&self, kind: WorkloadKind) -> Vec<PathBuf> {
        let mut v = self.sources();
        if kind == WorkloadKind::Copy {
            v.extend(self.copies());
        }
        v
    }

    fn each(&self, f: impl Fn(u32, u32) -> PathBuf) -> Vec<PathBuf> {
        (0..self.threads)
            .flat_map(|t| (0..self.files_per_thread).map(move |i| (t, i)))
            .map(|(t, i)| f(t, i))
            .collect()
    }

    pub fn blocks_per_file(&self) -> u64 {
        self.file_bytes / self.block_bytes
    }
}

/// Writes the stamp of block `block` of file `file_id` into `buf`.
pub fn stamp(buf: &mut [u8], file_id: u64, block: u64) {
    if buf.len() >= STAMP_BYTES {
        buf[..8].copy_from_slice(&file_id.to_le_bytes());
        buf[8..16].copy_from_slice(&block.to_le_bytes());
    }
}

/// The block offsets a thread visits in one file (or its region of the
/// shared file): in order for sequential workloads and copies; for random
/// ones a permutation (each block once, as fio's random map does), seeded
/// by `seed` and the file.
pub fn offsets(kind: WorkloadKind, layout: &Layout, file_id: u64, seed: u64) -> Vec<u64> {
    let blocks = layout.blocks_per_file();
    let mut v: Vec<u64> = (0..blocks).collect();
    if matches!(kind, WorkloadKind::RandRead | WorkloadKind::RandWrite) {
        let mut rng = SplitMix64(seed ^ file_id.wrapping_mul(crate::rng::GOLDEN_GAMMA));
        for i in (1..v.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
    let base = layout.base(file_id);
    v.iter_mut()
        .for_each(|b| *b = base + *b * layout.block_bytes);
    v
}

/// Checks that `path` holds what the dataset writer (and every write mode)
/// puts in file `file_id`: `layout.file_bytes` bytes, each block stamped
/// with its place over the pattern of [`crate::harness::engine::support::fill`] (with a
/// shared file: its region, and the file as long as every region). The
/// error says which block differs.
pub fn check_file(path: &Path, layout: &Layout, file_id: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let bad = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidData, msg));
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let expected = if layout.shared {
        layout.total_bytes()
    } else {
        layout.file_bytes
    };
    if len != expected {
        return bad(format!(
            "{}: {len} bytes, expected {expected}",
            path.display(),
        ));
    }
    f.seek(SeekFrom::Start(layout.base(file_id)))?;
    let block = layout.block_bytes as usize;
    let mut expect = vec![0u8; block];
    crate::harness::engine::support::fill(&mut expect);
    let mut got = ubio::AlignedBuf::page_aligned(block);
    for b in 0..layout.blocks_per_file() {
        f.read_exact(&mut got)?;
        stamp(&mut expect, file_id, b);
        if got[..] != expect[..] {
            return bad(format!(
                "{}: block {b} (offset {}) is not what was written",
                path.display(),
                layout.base(file_id) + b * layout.block_bytes
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(kind: WorkloadKind) -> Workload {
        Workload {
            kind,
            block_bytes: 4096,
            threads: 2,
            files_per_thread: 3,
            dataset_bytes: 6 * 10 * 4096 + 100,
            duration_secs: None,
            queue_depth: 1,
            seed: 7,
            processes: 1,
            shared_file: false,
        }
    }

    #[test]
    fn splits_the_dataset_into_whole_blocks() {
        let l = Layout::new(Path::new("/x"), &workload(WorkloadKind::SeqRead));
        assert_eq!((l.file_bytes, l.total_bytes()), (10 * 4096, 60 * 4096));
        assert_eq!(l.sources().len(), 6);
        assert_eq!(l.source(1, 2), Path::new("/x/data/t1-f2"));
        assert_eq!(l.copy(0, 1), Path::new("/x/copy/t0-f1"));
        assert_eq!(l.file_id(1, 2), 5);
        assert_eq!(l.watched(WorkloadKind::Copy).len(), 12);
    }

    #[test]
    fn random_offsets_visit_every_block_once() {
        let l = Layout::new(Path::new("/x"), &workload(WorkloadKind::RandRead));
        let mut r = offsets(WorkloadKind::RandRead, &l, 3, 7);
        assert_ne!(r, offsets(WorkloadKind::SeqRead, &l, 3, 7), "shuffled");
        assert_eq!(r, offsets(WorkloadKind::RandRead, &l, 3, 7), "seeded");
        assert_ne!(r, offsets(WorkloadKind::RandRead, &l, 4, 7), "per file");
        r.sort();
        assert_eq!(r, offsets(WorkloadKind::SeqRead, &l, 3, 7));
    }

    #[test]
    fn check_file_finds_a_misplaced_block() {
        let dir = tempfile::tempdir().unwrap();
        let l = Layout::new(dir.path(), &workload(WorkloadKind::SeqWrite));
        let mut data = Vec::new();
        let mut buf = vec![0u8; 4096];
        crate::harness::engine::support::fill(&mut buf);
        for b in 0..10 {
            stamp(&mut buf, 5, b);
            data.extend_from_slice(&buf);
        }
        let p = dir.path().join("f");
        std::fs::write(&p, &data).unwrap();
        check_file(&p, &l, 5).unwrap();
        assert!(check_file(&p, &l, 4).is_err());
        data[3 * 4096 + 8] ^= 1;
        std::fs::write(&p, &data).unwrap();
        let e = check_file(&p, &l, 5).unwrap_err().to_string();
        assert!(e.contains("block 3"), "{e}");
    }

    #[test]
    fn a_shared_file_holds_every_stream_in_a_region_of_its_own() {
        let w = Workload {
            shared_file: true,
            ..workload(WorkloadKind::SeqRead)
        };
        let l = Layout::new(Path::new("/x"), &w);
        assert!(l.shared);
        assert_eq!(l.source(1, 2), Path::new("/x/data/shared"));
        assert_eq!(l.sources(), [PathBuf::from("/x/data/shared")], "once");
        assert_eq!(l.watched(WorkloadKind::Copy).len(), 2);
        // Regions one after the other, in file-id order.
        let offs = offsets(WorkloadKind::SeqRead, &l, 5, 7);
        assert_eq!(offs.first(), Some(&(5 * 10 * 4096)));
        assert_eq!(offs.last(), Some(&(6 * 10 * 4096 - 4096)));
        let mut r = offsets(WorkloadKind::RandRead, &l, 1, 7);
        r.sort();
        assert_eq!(r, offsets(WorkloadKind::SeqRead, &l, 1, 7));
        assert_eq!(l.lane_bytes(1), 3 * 10 * 4096);

        // check_file reads the region of the id it is given.
        let dir = tempfile::tempdir().unwrap();
        let l = Layout::new(dir.path(), &w);
        let mut data = Vec::new();
        let mut buf = vec![0u8; 4096];
        crate::harness::engine::support::fill(&mut buf);
        for id in 0..6 {
            for b in 0..10 {
                stamp(&mut buf, id, b);
                data.extend_from_slice(&buf);
            }
        }
        let p = dir.path().join("shared");
        std::fs::write(&p, &data).unwrap();
        for id in 0..6 {
            check_file(&p, &l, id).unwrap();
        }
        data[4 * 10 * 4096 + 2 * 4096] ^= 1;
        std::fs::write(&p, &data).unwrap();
        check_file(&p, &l, 3).unwrap();
        let e = check_file(&p, &l, 4).unwrap_err().to_string();
        assert!(e.contains("block 2"), "{e}");
    }
}
