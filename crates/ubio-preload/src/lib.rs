//! libubio_preload.so: the LD_PRELOAD shim behind `ubio run`.
//!
//! It interposes the libc functions that programs use to open, read, write,
//! copy, duplicate and close files, and keeps one `ubio::Stream` per open
//! file description that the program reads or writes: drop-behind while
//! reading, write-behind while writing, pages cached by others kept, and
//! everything that is not a regular file on a page-cache filesystem (pipes,
//! sockets, devices, /proc, tmpfs, O_DIRECT/O_SYNC) passed through.
//!
//! It never changes what a program reads or writes: the data moves through
//! the same descriptor with the same call semantics; only page-cache advice
//! and writeback are added. Any internal failure falls back to the real call.
//!
//! One place per concern:
//! - `real`: the libc functions behind ours (dlsym RTLD_NEXT);
//! - `guard`: re-entrancy and "inside a signal handler" tracking;
//! - `config`: settings from the environment (UBIO_WINDOW, UBIO_BACKEND, UBIO_LOG);
//! - `fdtable`: descriptor -> description state, lazily grown, lock-free to read;
//! - `desc`: the state of one open file description and its I/O;
//! - `log`: the debug log;
//! - `interpose/*`: the interposed functions, by family.

mod config;
mod desc;
mod fdtable;
mod guard;
mod interpose;
mod log;
mod real;
mod registry;

/// Runs when the dynamic loader maps the library, before the program's main.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    // A panic inside the shim is caught and the real call made instead; its
    // message must not reach the program's stderr.
    std::panic::set_hook(Box::new(|info| {
        log::debug(&format!("internal panic: {info}"))
    }));
    real::resolve_all();
    log::settings_loaded();
    // SAFETY: registering plain `extern "C"` functions without arguments.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_child));
        libc::atexit(at_exit);
    }
    guard::set_ready();
}

/// In the child of fork(): the descriptors are shared with the parent, whose
/// streams must not be finished twice nor their locks (maybe held by a thread
/// that does not exist here) be taken. Start a new generation: streams are
/// made afresh for this process.
extern "C" fn after_fork_child() {
    desc::new_generation();
    fdtable::clear_locks_after_fork();
}

/// At exit(): finish the streams of descriptors the program left open
/// (flush the write-behind tail, drop what the streams brought in).
extern "C" fn at_exit() {
    if let Some(_g) = guard::enter() {
        let _ = std::panic::catch_unwind(registry::finish_all);
    }
}
