//! sigaction and signal: every handler the program installs runs inside a
//! trampoline that raises the thread's "in a handler" depth (see guard), so
//! that an interposed call made from a handler goes straight to libc,
//! without the shim's allocations and locks. sigaction reports the
//! program's own handler as the old one, never the trampoline.
//!
//! Only atomics and the real sigaction are used here: the program may call
//! sigaction from a handler. A handler that leaves by siglongjmp leaves the
//! depth raised: that thread then bypasses the shim (safe, uncached no more).

use crate::guard;
use crate::real::f;
use libc::{c_int, c_void, sighandler_t, siginfo_t};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const NSIG: usize = 65;

/// The program's handler per signal and whether it takes three arguments.
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
static SIGINFO: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];

extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let i = sig as usize;
    let h = HANDLERS.get(i).map_or(0, |h| h.load(Ordering::Acquire));
    if h == 0 {
        return;
    }
    guard::handler_enter();
    if SIGINFO[i].load(Ordering::Acquire) {
        // SAFETY: the program installed `h` with SA_SIGINFO: it takes three arguments.
        let h: extern "C" fn(c_int, *mut siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(h) };
        h(sig, info, ctx);
    } else {
        // SAFETY: the program installed `h` as a one-argument handler.
        let h: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
        h(sig);
    }
    guard::handler_leave();
}

fn tramp() -> sighandler_t {
    trampoline as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as sighandler_t
}

#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let i = sig as usize;
    if !(1..NSIG).contains(&i) {
        // SAFETY: the caller's arguments, passed on unchanged (EINVAL).
        return unsafe { f::sigaction()(sig, act, old) };
    }
    let prev = (
        HANDLERS[i].load(Ordering::Acquire),
        SIGINFO[i].load(Ordering::Acquire),
    );
    // SAFETY: `act`, when not null, is the caller's valid struct sigaction.
    let mut wrapped = unsafe { act.as_ref() }.copied();
    let mut installs = false;
    if let Some(w) = wrapped.as_mut() {
        if w.sa_sigaction != libc::SIG_DFL && w.sa_sigaction != libc::SIG_IGN {
            SIGINFO[i].store(w.sa_flags & libc::SA_SIGINFO != 0, Ordering::Release);
            HANDLERS[i].store(w.sa_sigaction, Ordering::Release);
            w.sa_sigaction = tramp();
            w.sa_flags |= libc::SA_SIGINFO;
            installs = true;
        }
    }
    let act2 = wrapped.as_ref().map_or(std::ptr::null(), |w| w as *const _);
    // SAFETY: a valid struct sigaction (or null) and the caller's `old`.
    let r = unsafe { f::sigaction()(sig, act2, old) };
    if r != 0 && installs {
        SIGINFO[i].store(prev.1, Ordering::Release);
        HANDLERS[i].store(prev.0, Ordering::Release);
    }
    // SAFETY: `old`, when not null, is the caller's struct, just filled.
    if let Some(o) = unsafe { old.as_mut() } {
        if r == 0 && o.sa_sigaction == tramp() {
            o.sa_sigaction = prev.0;
            if !prev.1 {
                o.sa_flags &= !libc::SA_SIGINFO;
            }
        }
    }
    r
}

/// signal(2) as glibc does it (BSD semantics: SA_RESTART, the signal
/// blocked in its handler), through the sigaction above.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    // SAFETY: zeroed is a valid struct sigaction; the set calls get valid pointers.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaddset(&mut sa.sa_mask, sig) < 0 {
            return libc::SIG_ERR;
        }
        sa.sa_flags = libc::SA_RESTART;
        let mut old: libc::sigaction = std::mem::zeroed();
        if sigaction(sig, &sa, &mut old) < 0 {
            return libc::SIG_ERR;
        }
        old.sa_sigaction
    }
}
