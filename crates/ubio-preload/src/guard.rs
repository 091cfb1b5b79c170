//! When the shim may act: after its constructor, never from inside itself
//! (the library's own libc calls come back through our interposed symbols
//! and go straight to libc), and never while the thread runs a signal
//! handler (the shim allocates and takes locks, which a handler that
//! interrupted the shim could deadlock on). Each is one thread-local counter
//! without a destructor: no allocation, safe to touch in a handler.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

static READY: AtomicBool = AtomicBool::new(false);

thread_local! {
    static IN_SHIM: Cell<bool> = const { Cell::new(false) };
    static HANDLER_DEPTH: Cell<u32> = const { Cell::new(0) };
}

pub fn set_ready() {
    READY.store(true, Ordering::Release);
}

/// Held while the shim works on a call; dropping it leaves the shim.
pub struct Guard(());

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = IN_SHIM.try_with(|g| g.set(false));
    }
}

/// Enter the shim, or `None` if the call must go straight to libc: before
/// the constructor ran, from inside the shim, or inside a signal handler.
pub fn enter() -> Option<Guard> {
    if !READY.load(Ordering::Acquire) || in_handler() {
        return None;
    }
    IN_SHIM
        .try_with(|g| (!g.replace(true)).then(|| Guard(())))
        .ok()
        .flatten()
}

/// The thread is running a signal handler installed through our sigaction.
pub fn in_handler() -> bool {
    HANDLER_DEPTH.try_with(|d| d.get() > 0).unwrap_or(true)
}

/// Around a signal handler's body (see interpose::signal).
pub fn handler_enter() {
    let _ = HANDLER_DEPTH.try_with(|d| d.set(d.get() + 1));
}

pub fn handler_leave() {
    let _ = HANDLER_DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
}
