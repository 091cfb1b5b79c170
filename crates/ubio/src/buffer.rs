//! Aligned heap buffers for O_DIRECT bounce I/O.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A zero-initialised heap buffer whose address is aligned to `align`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads, like &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocate `len` bytes (rounded up to `align`) aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> Self {
        let len = len.div_ceil(align).max(1) * align;
        let layout = Layout::from_size_align(len, align).expect("alignment is a power of two");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len initialised bytes and borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for align in [512, 4096, 65536] {
            let mut b = AlignedBuf::new(1000, align);
            assert_eq!(b.as_slice().as_ptr() as usize % align, 0);
            assert_eq!(b.len() % align, 0);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice()[999] = 7;
            assert_eq!(b.as_slice()[999], 7);
        }
    }
}
