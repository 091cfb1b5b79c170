//! `emulated`: plain buffered I/O; the tracker drops what the stream read
//! (fadvise DONTNEED behind the read position) and writes behind it
//! (sync_file_range, then DONTNEED once written back). Works on every kernel
//! and filesystem with a page cache that can be dropped.

use super::{Backend, Caps};

#[derive(Debug, Default)]
pub struct Emulated;

impl Backend for Emulated {
    fn caps(&self) -> Caps {
        Caps {
            direct_reads: true,
            ..Caps::default()
        }
    }
}
