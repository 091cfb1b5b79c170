//! The page-cache contract (cases 1-4 of the library issue), on ext4, xfs,
//! btrfs and tmpfs, for every backend that can run there. Residency is
//! sampled with cachestat() by a second thread during the stream and checked
//! with cachestat()/mincore() after it; never with timing.

mod common;

use common::*;
use std::io::{Read, Write};
use std::time::Duration;
use ubio::BackendKind;
use ubio_testenv::kept_pages::{check_kept, with_damon_retries};
use ubio_testenv::residency_sampler::ResidencySampler;

const IO: u64 = MIB;
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

fn managed(b: BackendKind) -> bool {
    b != BackendKind::Buffered
}

/// Case 1: reading a cold file of 1 GiB keeps its cached pages under 64 MiB
/// during the stream and leaves none after close (tmpfs: all stay, they are
/// the file). The buffered baseline is the control: the sampler must see it
/// cache far more, or the measurement proves nothing.
#[test]
fn cold_read_stays_under_64mib_and_leaves_nothing() {
    let stream = stream_bytes();
    for t in targets("cold_read", 3 * GIB) {
        let path = t.path("cold");
        make_cold_file(&path, 1, stream);
        for backend in all_backends() {
            evict(&path);
            let Some(mut f) =
                open_or_refused(ubio::OpenOptions::new().read(true), backend, &path, &t)
            else {
                continue;
            };
            let sampler = ResidencySampler::start(&path, SAMPLE_EVERY).unwrap();
            let mut buf = vec![0u8; IO as usize];
            let mut total = 0u64;
            loop {
                let n = f.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                total += n as u64;
                // Between reads too, from this thread: the judgement does
                // not rest on the sampling thread alone, which a busy TCG
                // guest may not schedule often during a fast direct read.
                sampler.sample().unwrap();
            }
            let stats = f.close().unwrap();
            let after = cached_pages(&path);
            let peaks = sampler.finish().unwrap();
            eprintln!(
                "{} {backend}: peak {} MiB cached over {} samples, {after} pages after close; {stats:?}",
                t.name,
                peaks.max_cached * PAGE / MIB,
                peaks.samples
            );
            assert_eq!(total, stream);
            if t.pages_are_storage() {
                assert_eq!(
                    after,
                    stream / PAGE,
                    "{} {backend}: tmpfs lost pages",
                    t.name
                );
            } else if managed(backend) {
                assert!(
                    peaks.samples > 10,
                    "{} {backend}: too few samples ({}) to judge",
                    t.name,
                    peaks.samples
                );
                assert!(
                    peaks.max_cached * PAGE <= 64 * MIB,
                    "{} {backend}: peak {} pages",
                    t.name,
                    peaks.max_cached
                );
                assert_eq!(after, 0, "{} {backend}: pages left after close", t.name);
            } else {
                assert!(
                    peaks.max_cached * PAGE > stream / 4,
                    "{} control: buffered read cached only {} pages",
                    t.name,
                    peaks.max_cached
                );
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// Case 2: pages another user cached before the read are all still cached
/// after it (an aligned 32 MiB region and an unaligned few pages; at 100
/// and 700 MiB of a 1 GiB stream, in proportion in a smaller one).
#[test]
fn pages_cached_before_a_read_stay_cached() {
    let stream = stream_bytes();
    let at_mib = |mib: u64| stream / MIB * mib / 1024 * MIB;
    let regions = [(at_mib(100), 32 * MIB), (at_mib(700) + 3 * PAGE, 5 * PAGE)];
    for t in targets("precached_read", 3 * GIB) {
        let path = t.path("shared");
        make_cold_file(&path, 2, stream);
        for backend in all_backends().into_iter().filter(|b| managed(*b)) {
            with_damon_retries(&format!("{} {backend} precached read", t.name), || {
                evict(&path);
                for (off, len) in regions {
                    precache(&path, off, len);
                }
                // The other user's reads brought their own readahead: all of it is theirs.
                let before = cached_pages(&path);
                let Some(mut f) =
                    open_or_refused(ubio::OpenOptions::new().read(true), backend, &path, &t)
                else {
                    return Ok(());
                };
                let mut buf = vec![0u8; IO as usize];
                while f.read(&mut buf).unwrap() > 0 {}
                let stats = f.close().unwrap();
                for (off, len) in regions {
                    check_kept(&path, off, len)?;
                }
                let total = cached_pages(&path);
                eprintln!(
                    "{} {backend}: {total} pages cached after, {before} before; {stats:?}",
                    t.name
                );
                if !t.pages_are_storage() {
                    // Only what was cached before (and folio neighbours of it) remains.
                    assert!(
                        total <= before + 2 * 512,
                        "{} {backend}: {total} pages left, {before} before",
                        t.name
                    );
                    assert!(
                        stats.pages_preserved + 2 * 512 >= before,
                        "{} {backend}: stats: {stats:?}",
                        t.name
                    );
                }
                Ok(())
            });
        }
        std::fs::remove_file(&path).unwrap();
    }
}

/// Case 3: writing 1 GiB keeps dirty + writeback within twice the window plus
/// one I/O, leaves no cached page shortly after close, and reads back intact.
#[test]
fn write_footprint_is_bounded_and_data_reads_back() {
    let window = ubio::DEFAULT_WINDOW;
    let stream = stream_bytes();
    for t in targets("write", 3 * GIB) {
        for backend in all_backends() {
            let path = t.path(&format!("written-{backend}"));
            let mut opts = ubio::OpenOptions::new();
            opts.write(true).create(true).truncate(true).window(window);
            let Some(mut f) = open_or_refused(&mut opts, backend, &path, &t) else {
                let _ = std::fs::remove_file(&path);
                continue;
            };
            let sampler = ResidencySampler::start(&path, SAMPLE_EVERY).unwrap();
            let mut buf = vec![0u8; IO as usize];
            let mut off = 0;
            while off < stream {
                fill_pattern(3, off, &mut buf);
                f.write_all(&buf).unwrap();
                off += IO;
            }
            let stats = f.close().unwrap();
            let mut after = cached_pages(&path);
            for _ in 0..200 {
                if after == 0 || t.pages_are_storage() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
                after = cached_pages(&path);
            }
            let peaks = sampler.finish().unwrap();
            eprintln!(
                "{} {backend}: peak dirty+wb {} KiB, peak cached {} KiB, {after} pages after close; {stats:?}",
                t.name,
                peaks.max_dirty_writeback * 4,
                peaks.max_cached * 4
            );
            if t.pages_are_storage() {
                assert_eq!(
                    after,
                    stream / PAGE,
                    "{} {backend}: tmpfs lost pages",
                    t.name
                );
            } else if managed(backend) {
                let bound = 2 * window + IO;
                assert!(
                    peaks.max_dirty_writeback * PAGE <= bound,
                    "{} {backend}: dirty+wb peak {} pages > {}",
                    t.name,
                    peaks.max_dirty_writeback,
                    bound / PAGE
                );
                assert_eq!(after, 0, "{} {backend}: pages left after close", t.name);
            }
            std::fs::File::open(&path).unwrap().sync_all().unwrap();
            evict(&path);
            verify_pattern(&path, 3, stream);
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// Case 4: overwriting pages that were cached before leaves them cached;
/// the rest of the overwritten file is dropped; the data is the new data.
#[test]
fn overwriting_cached_pages_leaves_them_cached() {
    let size = 64 * MIB;
    let (off, len) = (8 * MIB, 16 * MIB);
    for t in targets("overwrite", GIB) {
        let path = t.path("overwritten");
        for backend in all_backends().into_iter().filter(|b| managed(*b)) {
            with_damon_retries(&format!("{} {backend} overwrite", t.name), || {
                make_cold_file(&path, 4, size);
                precache(&path, off, len);
                // Including the readahead of that other user: all of it is theirs.
                let before = cached_pages(&path);
                let mut opts = ubio::OpenOptions::new();
                opts.write(true);
                let Some(mut f) = open_or_refused(&mut opts, backend, &path, &t) else {
                    return Ok(());
                };
                let mut buf = vec![0u8; IO as usize];
                let mut at = 0;
                while at < size {
                    fill_pattern(5, at, &mut buf);
                    f.write_all(&buf).unwrap();
                    at += IO;
                }
                let stats = f.close().unwrap();
                let kept = resident_in(&path, off, len);
                let total = cached_pages(&path);
                eprintln!("{} {backend}: kept {kept} of {} precached pages, {total} cached in all; {stats:?}", t.name, len / PAGE);
                check_kept(&path, off, len)?;
                if !t.pages_are_storage() {
                    assert!(
                        total <= before + 2 * 512,
                        "{} {backend}: {total} pages left, {before} before",
                        t.name
                    );
                }
                std::fs::File::open(&path).unwrap().sync_all().unwrap();
                evict(&path);
                verify_pattern(&path, 5, size);
                Ok(())
            });
        }
        std::fs::remove_file(&path).unwrap();
    }
}
