//! Regressions found by the exerciser (crates/ubio-fsx), one behaviour each.

mod common;

use common::*;
use std::os::fd::AsFd;
use ubio::BackendKind;

/// fsx seed 5, kernel backend, ubio operations alone on ext4: a hole punched
/// through the handle's descriptor zeroes the partial page at its edge in
/// the page cache (read in and dirtied by the filesystem, not by a ubio
/// write). Close dropped it with fadvise(DONTNEED), which only starts the
/// writeback of a dirty page and leaves it cached: one page stayed after
/// close. Close now writes such pages back and waits before dropping them.
#[test]
fn close_drops_pages_dirtied_behind_the_stream() {
    for t in targets("close_dirtied", 512 * MIB) {
        if t.pages_are_storage() {
            continue;
        }
        for backend in [
            BackendKind::Emulated,
            BackendKind::Kernel,
            BackendKind::Direct,
        ] {
            let path = t.path(&format!("punched-{backend}"));
            make_cold_file(&path, 3, 4 * MIB);
            let mut opts = ubio::OpenOptions::new();
            opts.read(true).write(true);
            let Some(f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            let mut b = [0u8; 16];
            f.read_exact_at(&mut b, 0).unwrap();
            for i in 0..8u64 {
                // A hole inside one page: its edges are zeroed in the cache.
                let (off, len) = ((i * 64 + 1) * PAGE / 2 + 100, 200u64);
                let r = ubio::sys::fallocate(
                    f.as_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    off,
                    len,
                );
                assert!(r.is_ok(), "{}: punch: {r:?}", t.name);
            }
            f.close().unwrap();
            assert_eq!(
                cached_pages(&path),
                0,
                "{} {backend}: pages left after close",
                t.name
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}
