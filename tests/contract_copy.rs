//! The copy engine (`ubio::copy`): a reader and a writer overlapped keep the
//! uncached contract on every filesystem and copy every byte; a failure on
//! either side names the file and how far the destination is complete; a
//! source that shrinks, grows or is written during the copy is reported, and
//! the destination ends at what was read. Cache claims are checked with
//! cachestat()/mincore() samples of both files, never with timing.

mod common;
use common::*;

use std::io;
use std::path::Path;
use std::time::Duration;
use ubio::copy::{Change, CopyError, CopyOptions, Method, Reflink, SourceChanged};
use ubio::{BackendKind, DirectWrites};
use ubio_testenv::residency_sampler::ResidencySampler;

const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// Peak cache a managed copy may hold per file: the contract's bound.
const BOUND: u64 = 64 * MIB;

fn open_pair(src: &Path, dst: &Path, backend: BackendKind) -> (ubio::File, ubio::File) {
    open_pair_writing(src, dst, backend, DirectWrites::default())
}

/// The same with the destination's O_DIRECT writes as `direct_writes`.
fn open_pair_writing(
    src: &Path,
    dst: &Path,
    backend: BackendKind,
    direct_writes: DirectWrites,
) -> (ubio::File, ubio::File) {
    let input = ubio::OpenOptions::new()
        .read(true)
        .backend(backend)
        .open(src)
        .unwrap();
    let output = ubio::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .backend(backend)
        .direct_writes(direct_writes)
        .open(dst)
        .unwrap();
    (input, output)
}

/// The data copy itself (no clone), so every filesystem runs the pipeline.
fn streamed() -> CopyOptions {
    CopyOptions {
        reflink: Reflink::Never,
        ..Default::default()
    }
}

/// A cold file of 256 MiB copied with the default (auto) backend on ext4,
/// xfs, btrfs and tmpfs, through the reader/writer pipeline and with the
/// default options (a clone on xfs and btrfs; else, where the destination
/// may be written through O_DIRECT, the pipeline, whose streams race it,
/// and copy_file_range in pieces where not: tmpfs, or direct writes off):
/// identical bytes; on block filesystems each file's cached pages stay
/// under the bound during the copy and none are left after close. Control:
/// the pipeline through the buffered backend leaves the destination
/// cached, so the samples can see a copy that fills the cache.
#[test]
fn copies_keep_the_contract_on_every_filesystem() {
    use DirectWrites::{Never, WhenFaster};
    let size = 256 * MIB;
    for t in targets("copies_keep_the_contract", 3 * GIB) {
        let src = t.path("src");
        let dst = t.path("dst");
        make_cold_file(&src, 31, size);
        let clones = matches!(t.name, "xfs" | "btrfs");
        let by_default = |otherwise| if clones { Method::Clone } else { otherwise };
        // None: the pipeline where the destination may be written through
        // O_DIRECT, else copy_file_range.
        let mut cases = vec![
            (
                BackendKind::Auto,
                WhenFaster,
                streamed(),
                Some(Method::Stream),
            ),
            (BackendKind::Auto, WhenFaster, CopyOptions::default(), None),
            (
                BackendKind::Auto,
                Never,
                CopyOptions::default(),
                Some(by_default(Method::CopyFileRange)),
            ),
            // O_DIRECT descriptors: the pipeline, not copy_file_range.
            (
                BackendKind::Direct,
                WhenFaster,
                CopyOptions::default(),
                Some(by_default(Method::Stream)),
            ),
        ];
        if t.name == "ext4" {
            cases.push((
                BackendKind::Buffered,
                WhenFaster,
                streamed(),
                Some(Method::Stream),
            ));
        }
        if t.name == "tmpfs" {
            cases.retain(|c| c.0 != BackendKind::Direct); // no O_DIRECT on tmpfs
        }
        for (backend, direct_writes, opts, method) in cases {
            evict(&src);
            let (input, output) = open_pair_writing(&src, &dst, backend, direct_writes);
            if t.name == "ext4" && backend == BackendKind::Auto {
                assert_eq!(output.may_write_direct(), direct_writes != Never, "ext4");
            }
            let method = method.unwrap_or(by_default(match output.may_write_direct() {
                true => Method::Stream,
                false => Method::CopyFileRange,
            }));
            let src_samples = ResidencySampler::start(&src, SAMPLE_EVERY).unwrap();
            let dst_samples = ResidencySampler::start(&dst, SAMPLE_EVERY).unwrap();
            let mut seen = 0;
            let copied = ubio::copy::copy(&input, &output, &opts, &mut |n| seen += n)
                .unwrap_or_else(|e| panic!("{} {backend}: {e}", t.name));
            output.close().unwrap();
            input.close().unwrap();
            let (src_peak, dst_peak) =
                (src_samples.finish().unwrap(), dst_samples.finish().unwrap());
            eprintln!(
                "{} {backend} (direct writes {}) {:?}: peak cached src {} MiB, dst {} MiB, dst dirty+writeback {} MiB ({} samples); after close src {} dst {} pages",
                t.name,
                direct_writes.name(),
                copied.method,
                src_peak.max_cached * PAGE / MIB,
                dst_peak.max_cached * PAGE / MIB,
                dst_peak.max_dirty_writeback * PAGE / MIB,
                dst_peak.samples,
                cached_pages(&src),
                cached_pages(&dst),
            );
            assert_eq!((copied.bytes, copied.method, seen), (size, method, size));
            // The cache first: verifying reads the copy into it.
            let left = (cached_pages(&src), cached_pages(&dst));
            verify_pattern(&dst, 31, size);
            if t.pages_are_storage() {
                continue; // tmpfs: the pages are the file
            }
            if backend == BackendKind::Buffered {
                assert!(
                    left.1 * PAGE >= size / 2,
                    "{}: control: a buffered copy should leave the destination cached",
                    t.name
                );
                continue;
            }
            assert!(
                src_peak.max_cached * PAGE <= BOUND,
                "{}: source peak {src_peak:?}",
                t.name
            );
            assert!(
                dst_peak.max_cached * PAGE <= BOUND,
                "{}: destination peak {dst_peak:?}",
                t.name
            );
            assert!(
                dst_peak.max_dirty_writeback * PAGE <= BOUND,
                "{}: dirty+writeback peak {dst_peak:?}",
                t.name
            );
            assert_eq!(left, (0, 0), "{}: pages left (source, destination)", t.name);
        }
    }
}

/// Holes stay holes through the pipeline; a trailing hole counts in the size.
#[test]
fn holes_are_kept_and_a_trailing_hole_counts() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = dir.path().join("sparse");
    let f = std::fs::File::create(&src).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&[7u8; 4096 * 4], 8 * MIB).unwrap();
    f.set_len(32 * MIB).unwrap();
    let dst = dir.path().join("copy");
    let (input, output) = open_pair(&src, &dst, BackendKind::Auto);
    let copied = ubio::copy::copy(&input, &output, &streamed(), &mut |_| {}).unwrap();
    output.close().unwrap();
    assert_eq!(copied.bytes, 32 * MIB);
    assert_eq!(copied.hole_bytes, 32 * MIB - 4096 * 4);
    assert!(std::fs::read(&dst).unwrap() == std::fs::read(&src).unwrap());
    use std::os::unix::fs::MetadataExt;
    assert!(
        dst.metadata().unwrap().blocks() * 512 <= MIB,
        "holes were written"
    );
}

/// The destination ends where the source does: one opened without
/// truncation and longer than the source is cut to the source's length
/// (the copy truncates only where the length differs: see `copy`).
#[test]
fn a_longer_destination_ends_where_the_source_does() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = dir.path().join("short");
    std::fs::write(&src, [3u8; 5000]).unwrap();
    let dst = dir.path().join("long");
    std::fs::write(&dst, [9u8; 3 * 4096]).unwrap();
    for backend in [
        BackendKind::Auto,
        BackendKind::Buffered,
        BackendKind::Direct,
    ] {
        let input = ubio::OpenOptions::new()
            .read(true)
            .backend(backend)
            .open(&src)
            .unwrap();
        let output = ubio::OpenOptions::new()
            .write(true)
            .backend(backend)
            .open(&dst)
            .unwrap();
        let copied = ubio::copy::copy(&input, &output, &streamed(), &mut |_| {}).unwrap();
        output.close().unwrap();
        assert_eq!(copied.bytes, 5000, "{backend:?}");
        assert_eq!(std::fs::read(&dst).unwrap(), [3u8; 5000], "{backend:?}");
        std::fs::write(&dst, [9u8; 3 * 4096]).unwrap();
    }
}

/// A read error in the reader thread (reading /proc/self/mem at address 0
/// fails with EIO) ends the copy with that error, naming the file; nothing
/// is complete.
#[test]
fn a_failing_reader_is_reported() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = Path::new("/proc/self/mem");
    let dst = dir.path().join("copy");
    let (input, output) = open_pair(src, &dst, BackendKind::Auto);
    let err = ubio::copy::copy(&input, &output, &streamed(), &mut |_| {}).unwrap_err();
    assert_eq!(
        ubio::error::raw_os_error(&err.error),
        Some(libc::EIO),
        "{err}"
    );
    assert!(err.to_string().contains("/proc/self/mem"), "{err}");
    assert_eq!(err.complete, 0);
}

/// A write error in the writer (a full filesystem) ends the copy with that
/// error and stops the reader; the destination's first `complete` bytes are
/// the source's.
#[test]
fn a_failing_writer_is_reported_with_the_complete_prefix() {
    if !ubio_testenv::is_root() {
        skip(
            "a_failing_writer_is_reported_with_the_complete_prefix",
            "needs root to mount a small tmpfs",
        );
        return;
    }
    let small = ubio_testenv::scratchfs::ScratchFs::tmpfs(16 * MIB).unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = dir.path().join("big");
    make_cold_file(&src, 32, 48 * MIB);
    let dst = small.mount_point().join("copy");
    let (input, output) = open_pair(&src, &dst, BackendKind::Auto);
    let err: CopyError = ubio::copy::copy(&input, &output, &streamed(), &mut |_| {}).unwrap_err();
    assert_eq!(
        ubio::error::raw_os_error(&err.error),
        Some(libc::ENOSPC),
        "{err}"
    );
    assert!(
        err.to_string().contains(&dst.display().to_string()),
        "{err}"
    );
    assert!(
        err.complete > 0 && err.complete <= 16 * MIB,
        "{}",
        err.complete
    );
    drop(output);
    let want = std::fs::read(&src).unwrap();
    let got = std::fs::read(&dst).unwrap();
    assert!(got.len() as u64 >= err.complete);
    assert!(got[..err.complete as usize] == want[..err.complete as usize]);
}

/// Copy an 8 MiB source in 64 KiB blocks, calling `change` on it once 1 MiB
/// is written (the reader is then at most three blocks ahead); returns the
/// copy's error and the destination's bytes.
fn copy_while(change: impl FnOnce(&Path)) -> (io::Error, u64, Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    make_cold_file(&src, 33, 8 * MIB);
    let original = std::fs::read(&src).unwrap();
    evict(&src);
    let (input, output) = open_pair(&src, &dst, BackendKind::Auto);
    let opts = CopyOptions {
        block: 64 * 1024,
        buffers: 2,
        ..streamed()
    };
    let mut done = 0;
    let mut change = Some(change);
    let err = ubio::copy::copy(&input, &output, &opts, &mut |n| {
        done += n;
        if done >= MIB {
            if let Some(change) = change.take() {
                change(&src);
            }
        }
    })
    .expect_err("a source that changed must fail the copy");
    output.close().unwrap();
    let copy = std::fs::read(&dst).unwrap();
    assert_eq!(
        copy.len() as u64,
        err.complete,
        "the destination ends at what was read"
    );
    (err.error, err.complete, original, copy)
}

fn change_of(err: &io::Error) -> SourceChanged {
    SourceChanged::of(err)
        .unwrap_or_else(|| panic!("not a SourceChanged: {err}"))
        .clone()
}

/// Truncated below what was already read, and truncated ahead of the reader:
/// both are "shrank", and the destination holds exactly what was read.
#[test]
fn a_source_that_shrinks_is_reported() {
    let (err, read, original, copy) = copy_while(|src| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(src)
            .unwrap()
            .set_len(512 * 1024)
            .unwrap()
    });
    let c = change_of(&err);
    assert_eq!(
        (c.change, c.size_before),
        (Change::Shrank, 8 * MIB),
        "{err}"
    );
    assert!((MIB..2 * MIB).contains(&read), "read {read}");
    assert!(copy[..] == original[..copy.len()], "what was read differs");
    assert!(
        err.to_string().contains("file changed as we read it"),
        "{err}"
    );

    let (err, read, original, copy) = copy_while(|src| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(src)
            .unwrap()
            .set_len(4 * MIB)
            .unwrap()
    });
    assert_eq!(change_of(&err).change, Change::Shrank, "{err}");
    assert_eq!(read, 4 * MIB);
    assert!(copy[..] == original[..copy.len()]);
}

/// Appended to during the copy: "grew"; what was read is all copied.
#[test]
fn a_source_that_grows_is_reported() {
    let (err, read, original, copy) = copy_while(|src| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(src).unwrap();
        f.write_all(&vec![5u8; MIB as usize]).unwrap();
    });
    let c = change_of(&err);
    assert_eq!((c.change, c.read), (Change::Grew, 9 * MIB), "{err}");
    assert_eq!(read, 9 * MIB);
    assert!(copy[..8 * MIB as usize] == original[..]);
}

/// Written in place (same size) where the copy had already passed: "was
/// written", caught by the modification time. The sleep lets a kernel with
/// coarse timestamps (before multigrain timestamps, 6.13) tick.
#[test]
fn a_source_written_in_place_is_reported() {
    let (err, read, _, _) = copy_while(|src| {
        std::thread::sleep(Duration::from_millis(20));
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(src).unwrap();
        f.write_all_at(b"changed", 0).unwrap();
    });
    assert_eq!(change_of(&err).change, Change::Modified, "{err}");
    assert_eq!(read, 8 * MIB);
}

/// /proc files say size 0 whatever they hold: copied whole, not "changed".
#[test]
fn a_proc_file_of_size_zero_is_copied_whole() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dst = dir.path().join("maps");
    let (input, output) = open_pair(Path::new("/proc/self/status"), &dst, BackendKind::Auto);
    let copied = ubio::copy::copy(&input, &output, &streamed(), &mut |_| {}).unwrap();
    output.close().unwrap();
    assert!(copied.bytes > 0);
    let text = std::fs::read_to_string(&dst).unwrap();
    assert!(text.starts_with("Name:"), "{text}");
}
