//! The page-cache contract through overlayfs (every container's root): the
//! pages live in the real lower or upper file, so every assertion is made
//! with cachestat() on that file, never on the overlay's (always empty).
//! Files are 128 MiB: twice the 64 MiB read bound.

mod common;

use common::*;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;
use ubio_testenv::kept_pages::{check_kept, with_damon_retries};
use ubio_testenv::residency_sampler::ResidencySampler;
use ubio_testenv::stackfs::Overlay;

const SIZE: u64 = 128 * MIB;
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// An overlay on the working filesystem (ext4 here), or a SKIP.
fn overlay(test: &str) -> Option<Overlay> {
    mount(test, Overlay::mount)
}

/// An overlay whose layers cannot be found from mountinfo, or a SKIP.
fn hidden_overlay(test: &str) -> Option<Overlay> {
    mount(test, Overlay::mount_hidden)
}

fn mount(test: &str, how: fn(&Path) -> std::io::Result<Overlay>) -> Option<Overlay> {
    if ubio::sys::geteuid() != 0 {
        skip(test, "mounting overlayfs needs root");
        return None;
    }
    match how(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/target"))) {
        Ok(o) => Some(o),
        Err(e) => {
            skip(test, &format!("mount -t overlay: {e}"));
            None
        }
    }
}

fn read_all(f: &mut ubio::File) -> u64 {
    let mut buf = vec![0u8; MIB as usize];
    let mut total = 0;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return total;
        }
        total += n as u64;
    }
}

fn write_pattern(f: &mut ubio::File, size: u64) {
    let mut buf = vec![0u8; MIB as usize];
    let mut off = 0;
    while off < size {
        fill_pattern(7, off, &mut buf);
        f.write_all(&buf).unwrap();
        off += MIB;
    }
}

#[test]
fn probe_on_overlay_names_the_real_file_and_verifies_it() {
    let Some(o) = overlay("probe_on_overlay") else {
        return;
    };
    make_cold_file(&o.lower.join("f"), 1, 4 * MIB);
    let p = ubio::probe_path(&o.mnt.join("f")).unwrap();
    let real = p.real_file.expect("an overlay file names its real file");
    assert!(real.available, "{real:?}");
    assert!(
        real.detail.contains(&*o.lower.join("f").to_string_lossy())
            && real.detail.contains("lower"),
        "{real:?}"
    );
    let seen = p.verified.sees_reads.expect("a cold page was read");
    assert!(seen.available, "{seen:?}");
    assert!(p.verified.drop_works.is_some_and(|d| d.available));
    // The directory: a scratch file in the upper layer, written back too.
    let p = ubio::probe_path(&o.mnt).unwrap();
    assert!(
        p.real_file
            .as_ref()
            .is_some_and(|r| r.available && r.detail.contains("upper")),
        "{p:?}"
    );
    assert!(
        p.verified
            .writeback_works
            .as_ref()
            .is_some_and(|w| w.available),
        "{:?}",
        p.verified
    );
    let left: Vec<_> = std::fs::read_dir(&o.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".ubio-probe"))
        .collect();
    assert!(left.is_empty(), "probe left its scratch file: {left:?}");
}

/// Where the real file cannot be found, the probe says so and what it falls
/// back to, and verifies the fallback on the file: mincore() of the
/// overlay's mapping sees a read's page, fadvise drops it (checked on the
/// real lower file too), and fdatasync writes a page back.
#[test]
fn probe_through_hidden_layers_reports_and_verifies_the_fallback() {
    let Some(o) = hidden_overlay("probe_overlay_fallback") else {
        return;
    };
    let lower = o.lower.join("f");
    make_cold_file(&lower, 1, 4 * MIB);
    let p = ubio::probe_path(&o.mnt.join("f")).unwrap();
    let real = p
        .real_file
        .as_ref()
        .expect("an overlay file says where its pages are");
    assert!(
        !real.available && real.detail.contains("falling back"),
        "{real:?}"
    );
    assert!(!p.cachestat.available, "{:?}", p.cachestat);
    let seen = p
        .verified
        .sees_reads
        .as_ref()
        .expect("a cold page was read");
    assert!(
        seen.available && seen.detail.contains("mincore"),
        "{seen:?}"
    );
    assert!(
        p.verified.drop_works.as_ref().is_some_and(|d| d.available),
        "{p:?}"
    );
    assert_eq!(
        cached_pages(&lower),
        0,
        "the probe left the lower file's page cached"
    );
    assert!(
        p.auto_reason.contains("through the overlay"),
        "{}",
        p.auto_reason
    );
    let p = ubio::probe_path(&o.mnt).unwrap();
    let wb = p
        .verified
        .writeback_works
        .as_ref()
        .expect("the scratch file was written");
    assert!(wb.available && wb.detail.contains("fdatasync"), "{wb:?}");
}

/// Reading a lower file through the overlay: the lower file's cache stays
/// under 64 MiB and is empty after close, except a region cached before,
/// which stays. Control: a plain read leaves the lower file cached.
#[test]
fn read_of_a_lower_file_drops_behind_on_the_lower_file() {
    let Some(o) = overlay("overlay_read") else {
        return;
    };
    read_drops_behind(&o, "overlay_read", |stats| {
        assert!(
            stats
                .real_file
                .as_deref()
                .is_some_and(|r| r.contains("lower")),
            "{stats:?}"
        );
        assert_eq!(stats.overlay_fallback, None, "{stats:?}");
    });
}

/// The same where the real file cannot be found (the layers' paths in
/// mountinfo name empty directories): the stream falls back to the overlay
/// descriptor (mincore of its mapping, fadvise) and says so, and the lower
/// file's pages are still dropped behind and a precached region kept.
#[test]
fn read_through_hidden_layers_falls_back_and_drops_behind() {
    let Some(o) = hidden_overlay("overlay_read_fallback") else {
        return;
    };
    read_drops_behind(&o, "overlay_read_fallback", |stats| {
        assert_eq!(stats.real_file, None, "{stats:?}");
        assert!(
            stats
                .overlay_fallback
                .as_deref()
                .is_some_and(|f| f.contains("falling back")),
            "{stats:?}"
        );
    });
}

fn read_drops_behind(o: &Overlay, test: &str, check_stats: impl Fn(&ubio::Stats)) {
    let lower = o.lower.join("r");
    make_cold_file(&lower, 2, SIZE);
    let path = o.mnt.join("r");
    // Control: buffered reading through the overlay caches the lower file.
    let mut f = ubio::OpenOptions::new()
        .read(true)
        .backend(ubio::BackendKind::Buffered)
        .open(&path)
        .unwrap();
    read_all(&mut f);
    f.close().unwrap();
    let control = cached_pages(&lower);
    eprintln!("buffered: {control} pages of the lower file cached");
    assert!(
        control * PAGE >= SIZE / 2,
        "the control read cached only {control} pages"
    );
    with_damon_retries(test, || {
        evict(&lower);
        precache(&lower, 40 * MIB, 8 * MIB);
        let sampler = ResidencySampler::start(&lower, SAMPLE_EVERY).unwrap();
        let mut f = ubio::File::open(&path).unwrap();
        assert_eq!(read_all(&mut f), SIZE);
        let stats = f.close().unwrap();
        let peaks = sampler.finish().unwrap();
        let after = cached_pages(&lower);
        eprintln!(
            "ubio: peak {} MiB, {after} pages after; {stats:?}",
            peaks.max_cached * PAGE / MIB
        );
        check_stats(&stats);
        assert!(
            peaks.max_cached * PAGE < 64 * MIB,
            "peak {} pages",
            peaks.max_cached
        );
        assert_eq!(stats.drops_without_effect, 0, "{stats:?}");
        check_kept(&lower, 40 * MIB, 8 * MIB)?;
        // Only the kept region (and at most a readahead window at its edge).
        assert!(
            after <= 2048 + 512,
            "{after} pages of the lower file left cached"
        );
        Ok(())
    });
}

/// Writing a new file through the overlay: the upper file's dirty and
/// writeback pages stay bounded by the window and nothing stays cached.
#[test]
fn write_into_the_upper_is_written_behind_and_dropped() {
    let Some(o) = overlay("overlay_write") else {
        return;
    };
    write_behind(&o, |stats| {
        assert!(
            stats
                .real_file
                .as_deref()
                .is_some_and(|r| r.contains("upper")),
            "{stats:?}"
        );
    });
}

/// The same where the real file cannot be found: writeback is started with
/// fadvise(DONTNEED) and waited for with fdatasync() through the overlay,
/// and the upper file's dirty pages stay bounded all the same.
#[test]
fn write_through_hidden_layers_falls_back_and_writes_behind() {
    let Some(o) = hidden_overlay("overlay_write_fallback") else {
        return;
    };
    write_behind(&o, |stats| {
        assert_eq!(stats.real_file, None, "{stats:?}");
        assert!(stats.overlay_fallback.is_some(), "{stats:?}");
    });
}

fn write_behind(o: &Overlay, check_stats: impl Fn(&ubio::Stats)) {
    let upper = o.upper.join("w");
    let sampler = ResidencySampler::follow_all(vec![upper.clone()], SAMPLE_EVERY);
    let mut f = ubio::File::create(o.mnt.join("w")).unwrap();
    write_pattern(&mut f, SIZE);
    let stats = f.close().unwrap();
    let peaks = sampler.finish().unwrap();
    let after = cached_pages(&upper);
    eprintln!(
        "ubio write: peak dirty+writeback {} MiB, peak cached {} MiB, {after} pages after; {stats:?}",
        peaks.max_dirty_writeback * PAGE / MIB,
        peaks.max_cached * PAGE / MIB
    );
    check_stats(&stats);
    assert!(
        peaks.max_dirty_writeback * PAGE <= 2 * ubio::DEFAULT_WINDOW + 16 * MIB,
        "dirty+writeback peaked at {} pages",
        peaks.max_dirty_writeback
    );
    assert_eq!(after, 0, "upper file left cached");
    verify_pattern_file(&upper);
}

fn verify_pattern_file(path: &Path) {
    let mut f = std::fs::File::open(path).unwrap();
    let (mut buf, mut want) = (vec![0u8; MIB as usize], vec![0u8; MIB as usize]);
    let mut off = 0;
    while off < SIZE {
        f.read_exact(&mut buf).unwrap();
        fill_pattern(7, off, &mut want);
        assert!(
            buf == want,
            "{} differs in the MiB at {off}",
            path.display()
        );
        off += MIB;
    }
    evict(path);
}

/// A lower file copied up while a stream reads it: from then on the reads
/// fill the upper file's cache, and the stream follows them there.
/// Without the switch the upper file keeps everything read after the copy-up.
#[test]
fn copy_up_in_the_middle_of_a_read_is_followed() {
    let Some(o) = overlay("overlay_copy_up") else {
        return;
    };
    let (lower, upper) = (o.lower.join("c"), o.upper.join("c"));
    make_cold_file(&lower, 3, SIZE);
    let path = o.mnt.join("c");
    let mut f = ubio::File::open(&path).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    for _ in 0..32 {
        f.read_exact(&mut buf).unwrap();
    }
    // Someone opens the file for writing: overlayfs copies it up.
    let w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    w.sync_all().unwrap();
    drop(w);
    assert!(upper.exists(), "no copy-up happened");
    evict(&upper);
    assert_eq!(cached_pages(&upper), 0);
    std::thread::sleep(Duration::from_millis(100));
    let sampler = ResidencySampler::start(&upper, SAMPLE_EVERY).unwrap();
    let rest = read_all(&mut f);
    let stats = f.close().unwrap();
    let peaks = sampler.finish().unwrap();
    let after = cached_pages(&upper);
    eprintln!(
        "after copy-up: read {} MiB, upper peak {} MiB, {after} pages after; {stats:?}",
        rest / MIB,
        peaks.max_cached * PAGE / MIB
    );
    assert_eq!(rest, SIZE - 32 * MIB);
    assert!(
        stats
            .real_file
            .as_deref()
            .is_some_and(|r| r.contains("upper")),
        "{stats:?}"
    );
    assert!(
        peaks.max_cached * PAGE < 64 * MIB,
        "upper peak {} pages",
        peaks.max_cached
    );
    assert_eq!(
        after, 0,
        "the upper file kept the pages read after the copy-up"
    );
}
