//! One handle shared by threads: `read_at`/`write_at` take `&self`.

mod common;

use common::*;
use std::time::Duration;
use ubio::BackendKind;
use ubio_testenv::residency_sampler::ResidencySampler;

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

const REGION: u64 = 4 * MIB;
/// The other process's range: its own residency chunk past the threads'.
const OTHER_AT: u64 = THREADS * REGION;
const OTHER_LEN: u64 = 2 * MIB;
/// Operations each thread makes at least (and goes on while the other
/// process still writes).
const MIN_OPS: u64 = 400;

/// After flush: nothing dirty or under writeback where the handle wrote;
/// after close: nothing cached there (managed backends, not tmpfs).
fn check_cache(
    t: &Target,
    backend: BackendKind,
    f: ubio::File,
    path: &std::path::Path,
    ubio_ranges: &[(u64, u64)],
) {
    use std::os::fd::AsFd;
    let managed = f.choice().managed;
    f.flush_writeback().unwrap();
    if managed {
        for &(off, len) in ubio_ranges {
            let cs = ubio::sys::cachestat(f.as_fd(), ubio::sys::FileRange::at(off, len)).unwrap();
            assert_eq!(
                cs.nr_dirty + cs.nr_writeback,
                0,
                "{} {backend}: dirty/writeback pages in {off:#x}+{len:#x} after flush: {cs:?}",
                t.name
            );
        }
    }
    f.close().unwrap();
    if managed {
        for &(off, len) in ubio_ranges {
            let n = resident_in(path, off, len);
            assert_eq!(
                n, 0,
                "{} {backend}: {n} pages cached in {off:#x}+{len:#x} after close",
                t.name
            );
        }
    }
}

/// Another process writing `src` over [OTHER_AT, OTHER_AT + OTHER_LEN) with
/// plain buffered writes (dd, 4 KiB at a time), pass after pass.
fn other_writer(src: &std::path::Path, dst: &std::path::Path) -> std::process::Child {
    let script = format!(
        "for i in $(seq 1 40); do dd if=\"$0\" of=\"$1\" bs=4096 seek={} count={} conv=notrunc status=none || exit 1; done",
        OTHER_AT / 4096,
        OTHER_LEN / 4096
    );
    std::process::Command::new("sh")
        .args(["-c", &script])
        .arg(src)
        .arg(dst)
        .spawn()
        .expect("sh and dd")
}

/// Each of four threads reads and writes random, unaligned ranges of its
/// own region through one shared handle, checking every read against its
/// own model, while another process writes its range with buffered I/O:
/// the final file is exactly the threads' models and the other's data.
#[test]
fn threads_disjoint_ranges_with_another_process() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for t in targets("threads_disjoint", GIB) {
        let src = t.path("other-src");
        let mut data = vec![0u8; OTHER_LEN as usize];
        fill_pattern(77, 0, &mut data);
        std::fs::write(&src, &data).unwrap();
        for backend in all_backends() {
            let path = t.path(&format!("disjoint-{backend}"));
            let mut opts = ubio::OpenOptions::new();
            opts.read(true).write(true).create(true).truncate(true);
            let Some(f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            f.get_ref().set_len(OTHER_AT + OTHER_LEN).unwrap();
            let mut other = other_writer(&src, &path);
            let done = AtomicBool::new(false);
            let models: Vec<Vec<u8>> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..THREADS)
                    .map(|id| {
                        let (f, done) = (&f, &done);
                        s.spawn(move || {
                            let base = id * REGION;
                            let mut model = vec![0u8; REGION as usize];
                            let mut rng = splitmix(id + 100);
                            let mut got = vec![0u8; 64 * KIB as usize];
                            let mut ops = 0;
                            while ops < MIN_OPS || !done.load(Ordering::Relaxed) {
                                rng = splitmix(rng);
                                let off = rng % REGION;
                                let len = 1 + (rng >> 24) % (64 * KIB).min(REGION - off);
                                let (o, l) = (off as usize, len as usize);
                                if rng >> 60 < 7 {
                                    fill_pattern(rng, base + off, &mut model[o..o + l]);
                                    f.write_all_at(&model[o..o + l], base + off).unwrap();
                                } else {
                                    f.read_exact_at(&mut got[..l], base + off).unwrap();
                                    assert!(
                                        got[..l] == model[o..o + l],
                                        "{} {backend}: thread {id} read {:#x}+{len:#x} differs",
                                        t.name,
                                        base + off
                                    );
                                }
                                ops += 1;
                            }
                            model
                        })
                    })
                    .collect();
                assert!(other.wait().unwrap().success(), "the other writer failed");
                done.store(true, Ordering::Relaxed);
                workers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            check_cache(&t, backend, f, &path, &[(0, OTHER_AT)]);
            let file = std::fs::read(&path).unwrap();
            assert_eq!(
                file.len() as u64,
                OTHER_AT + OTHER_LEN,
                "{} {backend}: size",
                t.name
            );
            for (id, model) in models.iter().enumerate() {
                let at = id * REGION as usize;
                assert!(
                    file[at..at + REGION as usize] == model[..],
                    "{} {backend}: thread {id}'s region differs",
                    t.name
                );
            }
            assert!(
                file[OTHER_AT as usize..] == data[..],
                "{} {backend}: the other process's range differs",
                t.name
            );
            eprintln!(
                "{} {backend}: disjoint threads and another process: intact",
                t.name
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}

const BLOCK: u64 = 4096;
const SHARED_BLOCKS: u64 = 1024;

/// Block `b` as written by `thread` in its write number `seq`: a header
/// naming them, then bytes derived from them.
fn block_image(thread: u64, seq: u64, b: u64, out: &mut [u8]) {
    fill_pattern(splitmix(thread << 48 | seq << 20 | b), 0, out);
    out[..8].copy_from_slice(&thread.to_le_bytes());
    out[8..16].copy_from_slice(&seq.to_le_bytes());
    out[16..24].copy_from_slice(&b.to_le_bytes());
}

/// Four threads write runs of whole 4 KiB blocks, each block marked with
/// the writer and its write number, over the same 4 MiB through one handle,
/// and read it back meanwhile: each final block is one write's image of
/// that block, made by a write that covered it (no torn or foreign block),
/// or zeros where no thread wrote.
#[test]
fn threads_overlapping_ranges_keep_whole_blocks() {
    use std::collections::HashSet;
    for t in targets("threads_overlap", GIB) {
        for backend in all_backends() {
            let path = t.path(&format!("overlap-{backend}"));
            let mut opts = ubio::OpenOptions::new();
            opts.read(true).write(true).create(true).truncate(true);
            let Some(f) = open_or_refused(&mut opts, backend, &path, &t) else {
                continue;
            };
            let size = SHARED_BLOCKS * BLOCK;
            f.get_ref().set_len(size).unwrap();
            // Per thread: the (write number, block) pairs it wrote.
            let written: Vec<HashSet<(u64, u64)>> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..THREADS)
                    .map(|id| {
                        let f = &f;
                        s.spawn(move || {
                            let mut mine = HashSet::new();
                            let mut rng = splitmix(id + 200);
                            let mut buf = vec![0u8; 8 * BLOCK as usize];
                            for seq in 0..MIN_OPS {
                                rng = splitmix(rng);
                                let first = rng % SHARED_BLOCKS;
                                let n = (1 + (rng >> 32) % 8).min(SHARED_BLOCKS - first);
                                if (rng >> 60) < 12 {
                                    for (i, b) in (first..first + n).enumerate() {
                                        let at = i * BLOCK as usize;
                                        block_image(id, seq, b, &mut buf[at..at + BLOCK as usize]);
                                        mine.insert((seq, b));
                                    }
                                    let len = (n * BLOCK) as usize;
                                    f.write_all_at(&buf[..len], first * BLOCK).unwrap();
                                } else {
                                    let len = (n * BLOCK) as usize;
                                    f.read_exact_at(&mut buf[..len], first * BLOCK).unwrap();
                                }
                            }
                            mine
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            check_cache(&t, backend, f, &path, &[(0, size)]);
            let file = std::fs::read(&path).unwrap();
            assert_eq!(file.len() as u64, size);
            let mut want = vec![0u8; BLOCK as usize];
            let mut zero_blocks = 0;
            for b in 0..SHARED_BLOCKS {
                let got = &file[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize];
                let word = |i: usize| u64::from_le_bytes(got[i * 8..i * 8 + 8].try_into().unwrap());
                let (thread, seq, blk) = (word(0), word(1), word(2));
                if got.iter().all(|&x| x == 0) {
                    assert!(
                        written.iter().all(|w| !w.iter().any(|&(_, wb)| wb == b)),
                        "{} {backend}: block {b} is zeros but was written",
                        t.name
                    );
                    zero_blocks += 1;
                    continue;
                }
                assert!(
                    thread < THREADS && blk == b && written[thread as usize].contains(&(seq, b)),
                    "{} {backend}: block {b} holds no write of it (header {thread} {seq} {blk})",
                    t.name
                );
                block_image(thread, seq, b, &mut want);
                assert!(got == &want[..], "{} {backend}: block {b} is torn", t.name);
            }
            eprintln!(
                "{} {backend}: overlapping threads: {} blocks each one write's, {zero_blocks} never written",
                t.name,
                SHARED_BLOCKS - zero_blocks
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}
