//! `buffered`: plain buffered I/O, the page cache left to the kernel. The
//! baseline every other backend is compared with, and the pass-through for
//! files whose cache there is nothing to manage (pipes, /proc, tmpfs).

use super::Backend;

#[derive(Debug, Default)]
pub struct Buffered;

impl Backend for Buffered {}
