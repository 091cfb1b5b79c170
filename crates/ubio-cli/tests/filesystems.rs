//! The commands on stacked filesystems: the LD_PRELOAD shim through
//! overlayfs, and FUSE (bindfs). Every assertion is made with cachestat()
//! on the file that really holds the pages: the overlay's lower or upper
//! file, the FUSE file itself and the daemon's backing file, each against a
//! plain (buffered) control run. Files are 128 MiB.

mod common;

use common::*;
use std::path::Path;
use ubio_testenv::kept_pages::{check_kept, with_damon_retries};
use ubio_testenv::stackfs::{Bindfs, Overlay};

const MIB: usize = 1 << 20;
const SIZE: usize = 128 * MIB;
const PAGE: u64 = 4096;

fn parent() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"))
}

fn run_ok(cmd: &mut std::process::Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
}

fn half(pages: u64) -> bool {
    pages * PAGE >= SIZE as u64 / 2
}

/// `ubio run -- cp` through an overlay: neither the lower source nor the
/// upper destination stays cached; a plain cp leaves the upper copy cached.
#[test]
fn shim_cp_through_overlay_leaves_neither_real_file_cached() {
    if !root_or_skip("shim_cp_through_overlay") {
        return;
    }
    let o = Overlay::mount(parent()).unwrap();
    let (src, lower) = (o.mnt.join("src"), o.lower.join("src"));
    write_cold(&lower, &data(SIZE, 1));
    run_ok(
        std::process::Command::new("cp")
            .arg(&src)
            .arg(o.mnt.join("plain")),
    );
    run_ok(&mut std::process::Command::new("sync"));
    let plain = count(&o.upper.join("plain")).cached;
    assert!(
        half(plain),
        "control: plain cp left only {plain} pages of the upper copy cached"
    );
    run_ok(ubio().arg("evict").arg(&lower));
    run_ok(
        ubio()
            .args(["run", "--", "cp"])
            .arg(&src)
            .arg(o.mnt.join("dst")),
    );
    let (s, d) = (count(&lower).cached, count(&o.upper.join("dst")).cached);
    eprintln!("plain cp: upper copy {plain} pages; ubio run -- cp: lower {s}, upper {d} pages");
    assert_eq!(s, 0, "lower source left cached");
    assert_eq!(d, 0, "upper destination left cached");
    assert_eq!(std::fs::read(o.upper.join("dst")).unwrap(), data(SIZE, 1));
}

fn bindfs(test: &str, wrapper: &[&std::ffi::OsStr]) -> Option<Bindfs> {
    if !root_or_skip(test) {
        return None;
    }
    match Bindfs::mount(parent(), wrapper) {
        Ok(b) => Some(b),
        Err(e) => {
            skip(test, &format!("bindfs: {e}"));
            None
        }
    }
}

/// `ubio probe` on a FUSE mount works (it failed with EOPNOTSUPP: no
/// O_TMPFILE there) and reports what it verified.
#[test]
fn probe_on_fuse_reports_what_it_found() {
    let Some(b) = bindfs("probe_on_fuse", &[]) else {
        return;
    };
    let out = ubio()
        .args(["probe", "--json"])
        .arg(&b.mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fs"]["fs_type"], "fuse", "{v}");
    assert_eq!(v["verified"]["sees_reads"]["available"], true, "{v}");
    assert_eq!(v["verified"]["drop_works"]["available"], true, "{v}");
    assert!(
        v["verified"]["writeback_works"]["detail"].is_string(),
        "{v}"
    );
    assert_eq!(
        std::fs::read_dir(&b.backing).unwrap().count(),
        0,
        "probe left a file"
    );
}

/// On FUSE the mount's own page cache is managed: `ubio cat` and `ubio cp`
/// leave the FUSE files uncached and keep a region cached before. The
/// passthrough daemon's own reads cache its backing file, unless the
/// daemon itself runs under `ubio run`.
#[test]
fn fuse_files_are_managed_and_the_daemon_needs_ubio_run() {
    for under_ubio in [false, true] {
        let ubio_exe = std::ffi::OsString::from(UBIO);
        let wrapper: Vec<&std::ffi::OsStr> = if under_ubio {
            vec![&ubio_exe, "run".as_ref(), "--".as_ref()]
        } else {
            vec![]
        };
        let Some(b) = bindfs("fuse_contract", &wrapper) else {
            return;
        };
        let (file, backing) = (b.mnt.join("f"), b.backing.join("f"));
        write_cold(&backing, &data(SIZE, 2));
        // Control: a plain read caches the FUSE file.
        run_ok(
            std::process::Command::new("cat")
                .arg(&file)
                .stdout(std::process::Stdio::null()),
        );
        let control = count(&file).cached;
        assert!(
            half(control),
            "control: cat left {control} pages of the FUSE file cached"
        );
        run_ok(ubio().arg("evict").arg(&file).arg(&backing));
        with_damon_retries("fuse_contract", || {
            let region = (40 * MIB) as u64..(48 * MIB) as u64;
            // Someone else's region of the FUSE file, cached before the
            // stream (with the plain daemon only: through a daemon under
            // ubio run, that reader's own stream in the daemon overlaps
            // cat's, and cat's then keeps the region in the backing file).
            if !under_ubio {
                let f = std::fs::File::open(&file).unwrap();
                let mut buf = vec![0u8; region.end as usize - region.start as usize];
                std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, region.start).unwrap();
            }
            run_ok(
                ubio()
                    .arg("cat")
                    .arg(&file)
                    .stdout(std::process::Stdio::null()),
            );
            let fuse = count(&file).cached;
            // The daemon closes its backing file when the kernel's release
            // reaches it, after cat exits: its shim drops the rest then.
            let mut back = count(&backing).cached;
            for _ in 0..50 {
                if !under_ubio || back <= 512 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
                back = count(&backing).cached;
            }
            eprintln!("daemon under ubio run: {under_ubio}; after ubio cat: FUSE file {fuse}, backing {back} pages");
            if !under_ubio {
                check_kept(&file, region.start, region.end - region.start)?;
            }
            assert!(
                fuse <= 2048 + 512,
                "FUSE file left with {fuse} pages cached"
            );
            if under_ubio {
                // The daemon's shim drops what its reads brought in (the
                // region read before it is kept in the FUSE file, not here).
                assert!(
                    back <= 2048 + 512,
                    "backing file left with {back} pages under ubio run"
                );
            } else {
                assert!(
                    half(back),
                    "the daemon's reads cached only {back} pages of the backing file"
                );
            }
            Ok(())
        });
        // Writes: ubio cp into the mount leaves the FUSE copy uncached.
        run_ok(ubio().arg("evict").arg(&backing));
        run_ok(ubio().arg("cp").arg(&backing).arg(b.mnt.join("copy")));
        let (fuse, back) = (
            count(&b.mnt.join("copy")).cached,
            count(&b.backing.join("copy")).cached,
        );
        eprintln!("after ubio cp into FUSE: FUSE copy {fuse}, backing copy {back} pages");
        assert_eq!(fuse, 0, "FUSE copy left cached");
        if under_ubio {
            assert_eq!(
                back, 0,
                "backing copy left cached by the daemon under ubio run"
            );
        }
        assert_eq!(
            std::fs::read(b.backing.join("copy")).unwrap(),
            data(SIZE, 2)
        );
    }
}
