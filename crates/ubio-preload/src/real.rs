//! The libc functions behind the interposed ones, found once with
//! dlsym(RTLD_NEXT) and cached in atomics (a signal handler may need them:
//! `resolve_all` runs in the constructor so that no dlsym happens later).

use libc::{c_char, c_int, c_long, c_uint, c_void, off64_t, off_t, size_t, ssize_t, FILE};
use std::sync::atomic::{AtomicUsize, Ordering};

fn lookup(name: &'static [u8]) -> usize {
    // SAFETY: `name` is a NUL-terminated symbol name; RTLD_NEXT finds the
    // next definition after this library (libc's).
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) as usize }
}

macro_rules! real_fns {
    ($( $name:ident: fn($($arg:ty),* $(; $va:tt)?) -> $ret:ty; )*) => {
        $(
            #[allow(non_upper_case_globals)]
            static $name: AtomicUsize = AtomicUsize::new(0);
        )*
        /// The real functions, one accessor each.
        pub mod f {
            use super::*;
            $(
                /// The next definition of the function of this name (libc's).
                pub fn $name() -> unsafe extern "C" fn($($arg),* $(, $va)?) -> $ret {
                    let mut p = super::$name.load(Ordering::Relaxed);
                    if p == 0 {
                        p = lookup(concat!(stringify!($name), "\0").as_bytes());
                        if p == 0 {
                            missing(stringify!($name));
                        }
                        super::$name.store(p, Ordering::Relaxed);
                    }
                    // SAFETY: `p` is the address of the libc function of this
                    // name, whose C signature is the one declared here.
                    unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($arg),* $(, $va)?) -> $ret>(p) }
                }
            )*
        }
        /// Look every function up now (from the constructor).
        pub fn resolve_all() {
            $(
                if $name.load(Ordering::Relaxed) == 0 {
                    $name.store(lookup(concat!(stringify!($name), "\0").as_bytes()), Ordering::Relaxed);
                }
            )*
        }
    };
}

/// A libc without one of these functions cannot run the program either;
/// say which one and stop, rather than jump to address 0.
fn missing(name: &str) -> ! {
    let msg = format!("ubio-preload: libc has no {name}\n");
    // SAFETY: writing a valid buffer to stderr.
    unsafe { libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len()) };
    std::process::abort()
}

// A variadic function is written `fn(fixed; ...)`.
real_fns! {
    open: fn(*const c_char, c_int; ...) -> c_int;
    open64: fn(*const c_char, c_int; ...) -> c_int;
    openat: fn(c_int, *const c_char, c_int; ...) -> c_int;
    openat64: fn(c_int, *const c_char, c_int; ...) -> c_int;
    creat: fn(*const c_char, libc::mode_t) -> c_int;
    creat64: fn(*const c_char, libc::mode_t) -> c_int;
    __open_2: fn(*const c_char, c_int) -> c_int;
    __open64_2: fn(*const c_char, c_int) -> c_int;
    __openat_2: fn(c_int, *const c_char, c_int) -> c_int;
    __openat64_2: fn(c_int, *const c_char, c_int) -> c_int;
    syscall: fn(c_long; ...) -> c_long;
    fopen: fn(*const c_char, *const c_char) -> *mut FILE;
    fopen64: fn(*const c_char, *const c_char) -> *mut FILE;
    fclose: fn(*mut FILE) -> c_int;
    dup: fn(c_int) -> c_int;
    dup2: fn(c_int, c_int) -> c_int;
    dup3: fn(c_int, c_int, c_int) -> c_int;
    fcntl: fn(c_int, c_int; ...) -> c_int;
    fcntl64: fn(c_int, c_int; ...) -> c_int;
    close: fn(c_int) -> c_int;
    close_range: fn(c_uint, c_uint, c_int) -> c_int;
    read: fn(c_int, *mut c_void, size_t) -> ssize_t;
    pread: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
    pread64: fn(c_int, *mut c_void, size_t, off64_t) -> ssize_t;
    readv: fn(c_int, *const libc::iovec, c_int) -> ssize_t;
    preadv: fn(c_int, *const libc::iovec, c_int, off_t) -> ssize_t;
    preadv64: fn(c_int, *const libc::iovec, c_int, off64_t) -> ssize_t;
    preadv2: fn(c_int, *const libc::iovec, c_int, off_t, c_int) -> ssize_t;
    preadv64v2: fn(c_int, *const libc::iovec, c_int, off64_t, c_int) -> ssize_t;
    write: fn(c_int, *const c_void, size_t) -> ssize_t;
    pwrite: fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
    pwrite64: fn(c_int, *const c_void, size_t, off64_t) -> ssize_t;
    writev: fn(c_int, *const libc::iovec, c_int) -> ssize_t;
    pwritev: fn(c_int, *const libc::iovec, c_int, off_t) -> ssize_t;
    pwritev64: fn(c_int, *const libc::iovec, c_int, off64_t) -> ssize_t;
    pwritev2: fn(c_int, *const libc::iovec, c_int, off_t, c_int) -> ssize_t;
    pwritev64v2: fn(c_int, *const libc::iovec, c_int, off64_t, c_int) -> ssize_t;
    copy_file_range: fn(c_int, *mut off64_t, c_int, *mut off64_t, size_t, c_uint) -> ssize_t;
    sendfile: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t;
    sendfile64: fn(c_int, c_int, *mut off64_t, size_t) -> ssize_t;
    splice: fn(c_int, *mut off64_t, c_int, *mut off64_t, size_t, c_uint) -> ssize_t;
    mmap: fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void;
    mmap64: fn(*mut c_void, size_t, c_int, c_int, c_int, off64_t) -> *mut c_void;
    fsync: fn(c_int) -> c_int;
    posix_fadvise: fn(c_int, off_t, off_t, c_int) -> c_int;
    posix_fadvise64: fn(c_int, off64_t, off64_t, c_int) -> c_int;
    fdatasync: fn(c_int) -> c_int;
    sigaction: fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
}
