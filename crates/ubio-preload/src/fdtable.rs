//! Descriptor -> open-file-description state. A two-level table of atomic
//! slots indexed by fd: the first level is static (1024 pointers), second-
//! level blocks of 1024 slots are allocated the first time a descriptor in
//! their range gets state, so memory follows the descriptors actually used,
//! never RLIMIT_NOFILE. Descriptors past 2^20 are passed through.
//!
//! A slot holds an `Arc<Desc>` as a raw pointer, or 0. Bit 0 is a per-slot
//! lock held for a few instructions (to take a reference or swap the
//! pointer), so that a reader never takes a reference to a `Desc` that a
//! concurrent close is freeing. A fork may copy a slot locked by another
//! thread; the child clears every lock bit (`clear_locks_after_fork`).

use crate::desc::Desc;
use std::hint;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

const BITS: usize = 10;
const BLOCK: usize = 1 << BITS;
const BLOCKS: usize = 1 << BITS;
const LOCK: usize = 1;

struct Block([AtomicUsize; BLOCK]);

static TABLE: [AtomicPtr<Block>; BLOCKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; BLOCKS];

fn block(i: usize, create: bool) -> Option<&'static Block> {
    let p = TABLE[i].load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: blocks are never freed once published.
        return Some(unsafe { &*p });
    }
    if !create {
        return None;
    }
    let fresh = Box::into_raw(Box::new(Block([const { AtomicUsize::new(0) }; BLOCK])));
    match TABLE[i].compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just published; never freed.
        Ok(_) => Some(unsafe { &*fresh }),
        Err(won) => {
            // SAFETY: `fresh` was never shared; `won` is published for good.
            unsafe {
                drop(Box::from_raw(fresh));
                Some(&*won)
            }
        }
    }
}

fn slot(fd: i32, create: bool) -> Option<&'static AtomicUsize> {
    let fd = usize::try_from(fd).ok()?;
    if fd >= BLOCK * BLOCKS {
        return None;
    }
    block(fd >> BITS, create).map(|b| &b.0[fd & (BLOCK - 1)])
}

/// Lock the slot; returns its pointer value.
fn lock(s: &AtomicUsize) -> usize {
    loop {
        let v = s.load(Ordering::Relaxed);
        if v & LOCK == 0
            && s.compare_exchange_weak(v, v | LOCK, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return v;
        }
        hint::spin_loop();
    }
}

fn unlock(s: &AtomicUsize, v: usize) {
    s.store(v, Ordering::Release);
}

fn into_raw(d: Arc<Desc>) -> usize {
    Arc::into_raw(d) as usize
}

/// # Safety
/// `v` must come from `into_raw` and own one reference.
unsafe fn from_raw(v: usize) -> Arc<Desc> {
    // SAFETY: per the function contract.
    unsafe { Arc::from_raw(v as *const Desc) }
}

/// The state of `fd`, if it has any.
pub fn get(fd: i32) -> Option<Arc<Desc>> {
    let s = slot(fd, false)?;
    let v = lock(s);
    if v != 0 {
        // SAFETY: the slot owns a reference to `v`, and holding the slot lock
        // keeps it from being released while we take another.
        unsafe { Arc::increment_strong_count(v as *const Desc) };
    }
    unlock(s, v);
    // SAFETY: we took a reference of our own above.
    (v != 0).then(|| unsafe { from_raw(v) })
}

/// Put `d` in `fd`'s slot unless `keep` approves of the state already there;
/// returns the state the slot holds afterwards, and the state it replaced.
pub fn insert_unless(
    fd: i32,
    d: Arc<Desc>,
    keep: impl Fn(&Desc) -> bool,
) -> (Arc<Desc>, Option<Arc<Desc>>) {
    let Some(s) = slot(fd, true) else {
        return (d, None);
    };
    let v = lock(s);
    if v != 0 {
        // SAFETY: as in `get`.
        let cur = unsafe {
            Arc::increment_strong_count(v as *const Desc);
            from_raw(v)
        };
        if keep(&cur) {
            unlock(s, v);
            return (cur, None);
        }
        drop(cur);
    }
    d.add_fd();
    unlock(s, into_raw(d.clone()));
    // SAFETY: the slot's reference to the old state is now ours.
    let old = (v != 0).then(|| unsafe { from_raw(v) });
    if let Some(o) = &old {
        o.remove_fd();
    }
    (d, old)
}

/// Remove and return `fd`'s state; the bool says whether it was the last
/// descriptor of this process that referred to it.
pub fn take(fd: i32) -> Option<(Arc<Desc>, bool)> {
    let s = slot(fd, false)?;
    let v = lock(s);
    unlock(s, 0);
    if v == 0 {
        return None;
    }
    // SAFETY: the slot's reference is now ours.
    let d = unsafe { from_raw(v) };
    let last = d.remove_fd();
    Some((d, last))
}

/// Descriptors in `first..=last` that have state.
pub fn fds_in(first: u32, last: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for (b, p) in TABLE.iter().enumerate() {
        let p = p.load(Ordering::Acquire);
        if p.is_null() {
            continue;
        }
        // SAFETY: published blocks are never freed.
        let blk = unsafe { &*p };
        for (i, s) in blk.0.iter().enumerate() {
            let fd = (b << BITS | i) as u64;
            if fd >= u64::from(first) && fd <= u64::from(last) && s.load(Ordering::Relaxed) != 0 {
                out.push(fd as i32);
            }
        }
    }
    out
}

/// In the child of fork(): only the forking thread exists, so any slot lock
/// still set belonged to a thread that is gone.
pub fn clear_locks_after_fork() {
    for p in &TABLE {
        let p = p.load(Ordering::Relaxed);
        if p.is_null() {
            continue;
        }
        // SAFETY: published blocks are never freed.
        for s in unsafe { &*p }.0.iter() {
            s.fetch_and(!LOCK, Ordering::Relaxed);
        }
    }
}
