//! One handle shared by threads: `read_at`/`write_at` take `&self`.

mod common;

use common::*;
use std::time::Duration;
use ubio::BackendKind;
use ubio_bench::residency_sampler::ResidencySampler;

const SIZE: u64 = 256 * MIB;
const THREADS: u64 = 4;
const STRIPE: u64 = MIB;

/// Four threads write interleaved 1 MiB stripes (the write-behind sees no
/// single sequential stream) and then read them back in parallel: the data
/// is intact, dirty + writeback stays within twice the window plus one I/O
/// per thread, and nothing stays cached after close.
#[test]
fn threads_share_one_handle() {
    for t in targets("threads", GIB) {
        for backend in [
            BackendKind::Auto,
            BackendKind::Emulated,
            BackendKind::Kernel,
            BackendKind::Direct,
        ] {
            let path = t.path(&format!("shared-{backend}"));
            let mut opts = ubio::OpenOptions::new();
            opts.read(true).write(true).create(true).truncate(true);
            let Some(f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            let sampler = ResidencySampler::start(&path, Duration::from_millis(1)).unwrap();
            std::thread::scope(|s| {
                for id in 0..THREADS {
                    let f = &f;
                    s.spawn(move || {
                        let mut buf = vec![0u8; STRIPE as usize];
                        let mut off = id * STRIPE;
                        while off < SIZE {
                            fill_pattern(11, off, &mut buf);
                            f.write_all_at(&buf, off).unwrap();
                            off += THREADS * STRIPE;
                        }
                    });
                }
            });
            f.flush_writeback().unwrap();
            std::thread::scope(|s| {
                for id in 0..THREADS {
                    let f = &f;
                    s.spawn(move || {
                        let (mut got, mut want) =
                            (vec![0u8; STRIPE as usize], vec![0u8; STRIPE as usize]);
                        let mut off = id * STRIPE;
                        while off < SIZE {
                            f.read_exact_at(&mut got, off).unwrap();
                            fill_pattern(11, off, &mut want);
                            assert!(got == want, "{backend}: stripe at {off} differs");
                            off += THREADS * STRIPE;
                        }
                    });
                }
            });
            let stats = f.close().unwrap();
            let peaks = sampler.finish().unwrap();
            let after = cached_pages(&path);
            eprintln!(
                "{} {backend}: peak dirty+wb {} KiB, {after} pages after; {stats:?}",
                t.name,
                peaks.max_dirty_writeback * 4
            );
            if !t.pages_are_storage() {
                let bound = 2 * ubio::DEFAULT_WINDOW + THREADS * STRIPE;
                assert!(
                    peaks.max_dirty_writeback * PAGE <= bound,
                    "{} {backend}: dirty+wb peak {} pages",
                    t.name,
                    peaks.max_dirty_writeback
                );
                assert_eq!(after, 0, "{} {backend}: pages left after close", t.name);
            }
            verify_pattern(&path, 11, SIZE);
            std::fs::remove_file(&path).unwrap();
        }
    }
}
