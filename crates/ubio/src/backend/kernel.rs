//! `kernel`: preadv2()/pwritev2() with RWF_DONTCACHE (Linux 6.14+, where the
//! filesystem sets FOP_DONTCACHE). The kernel drops pages it brought in and
//! starts writeback right after each write; the tracker still bounds the
//! writeback in flight and cleans up what the kernel leaves: readahead beyond
//! the last read, and (ext4 on 6.18) overwritten pages that stay cached.

use super::{Backend, Caps};
use crate::sys::RwFlags;

#[derive(Debug, Default)]
pub struct Kernel;

impl Backend for Kernel {
    fn caps(&self) -> Caps {
        Caps {
            kernel_drops_reads: true,
            kernel_starts_writeback: true,
            ..Caps::default()
        }
    }
    fn flags(&self) -> RwFlags {
        RwFlags::DONTCACHE
    }
}
