//! `ubio cp` as a user runs it: GNU cp's flags, holes, clones, errors, and
//! the page cache after a copy (checked with cachestat(), never timing).

mod common;
use common::*;
use ubio_testenv::kept_pages::with_damon_retries;

use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use ubio_testenv::scratchfs::{FsKind, ScratchFs};

const MIB: usize = 1 << 20;

fn cp(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = ubio();
    c.arg("cp");
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

fn assert_ok(out: &Output) {
    assert!(out.status.success(), "ubio cp failed: {}", stderr(out));
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

#[test]
fn recursive_copy_keeps_the_tree_symlinks_and_fifos() {
    let dir = workdir();
    let src = dir.path().join("tree");
    std::fs::create_dir_all(src.join("a/b/c")).unwrap();
    std::fs::create_dir(src.join("empty")).unwrap();
    write_cold(&src.join("a/b/c/deep"), &data(3 * MIB + 7, 1));
    write_cold(&src.join("top"), b"top\n");
    std::os::unix::fs::symlink("a/b/c/deep", src.join("link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", src.join("dangling")).unwrap();
    ubio::sys::mkfifo(&src.join("fifo"), 0o640).unwrap();
    let dst = dir.path().join("copy");
    assert_ok(&cp(&[&"-r", &src, &dst]));
    assert!(std::fs::read(dst.join("a/b/c/deep")).unwrap() == data(3 * MIB + 7, 1));
    assert_eq!(std::fs::read(dst.join("top")).unwrap(), b"top\n");
    assert!(dst.join("empty").is_dir());
    assert_eq!(
        std::fs::read_link(dst.join("link")).unwrap(),
        Path::new("a/b/c/deep")
    );
    assert_eq!(
        std::fs::read_link(dst.join("dangling")).unwrap(),
        Path::new("/nonexistent/target")
    );
    let fifo = dst.join("fifo").symlink_metadata().unwrap();
    assert!(fifo.file_type().is_fifo(), "fifo not recreated");
}

#[test]
fn recursive_copy_into_an_existing_directory_uses_the_source_name() {
    let dir = workdir();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    write_cold(&src.join("f"), b"f");
    let into = dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    assert_ok(&cp(&[&"-r", &src, &into]));
    assert_eq!(std::fs::read(into.join("tree/f")).unwrap(), b"f");
}

/// As GNU cp -r: fifos, sockets and (as root) devices are made anew
/// (mknod) with their type, permissions and device number, not read.
#[test]
fn sockets_fifos_and_devices_are_made_anew() {
    let dir = workdir();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    write_cold(&src.join("f"), b"f");
    let _listener = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
    ubio::sys::mkfifo(&src.join("fifo"), 0o640).unwrap();
    let root = ubio::sys::geteuid() == 0;
    let null = std::fs::metadata("/dev/null").unwrap().rdev();
    if root {
        ubio::sys::mknod(&src.join("null"), libc::S_IFCHR | 0o620, null).unwrap();
    }
    let dst = dir.path().join("copy");
    assert_ok(&cp(&[&"-r", &src, &dst]));
    assert_eq!(std::fs::read(dst.join("f")).unwrap(), b"f");
    let meta = |n: &str| dst.join(n).symlink_metadata().unwrap();
    assert!(meta("sock").file_type().is_socket());
    assert!(meta("fifo").file_type().is_fifo());
    if root {
        let m = meta("null");
        assert!(m.file_type().is_char_device());
        let src_mode = std::fs::symlink_metadata(src.join("null")).unwrap().mode();
        assert_eq!((m.rdev(), m.mode() & 0o777), (null, src_mode & 0o777));
    }
}

#[test]
fn a_directory_without_r_is_omitted() {
    let dir = workdir();
    let src = dir.path().join("d");
    std::fs::create_dir(&src).unwrap();
    let out = cp(&[&src, &dir.path().join("e")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("-r not specified; omitting directory"));
    assert!(!dir.path().join("e").exists());
}

/// Known gap of issue 24 (see known_gap): a directory into itself: refused as GNU, but GNU first makes the new directory and copies into it what comes before it.
#[test]
fn a_directory_is_not_copied_into_itself() {
    let dir = workdir();
    let src = dir.path().join("d");
    std::fs::create_dir(&src).unwrap();
    write_cold(&src.join("f"), b"f");
    let out = cp(&[&"-r", &src, &src.join("sub")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("into itself"), "{}", stderr(&out));
    // As GNU's: the new directory is made, what comes before it in inode
    // order is copied into it, and the copy stops when it meets it.
    assert!(src.join("sub").is_dir());
    assert!(!src.join("sub/sub").exists());
}

/// Holes are found with SEEK_DATA/SEEK_HOLE and left unwritten.
#[test]
fn sparse_files_keep_their_holes() {
    let dir = workdir();
    let src = dir.path().join("sparse");
    {
        let f = std::fs::File::create(&src).unwrap();
        f.set_len(64 * MIB as u64).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(&data(MIB, 2), 0).unwrap();
        f.write_all_at(&data(MIB, 3), 32 * MIB as u64).unwrap();
        f.sync_all().unwrap();
    }
    let dst = dir.path().join("copy");
    assert_ok(&cp(&[&src, &dst]));
    let meta = dst.metadata().unwrap();
    assert_eq!(meta.len(), 64 * MIB as u64);
    assert!(
        meta.blocks() * 512 <= 4 * MIB as u64,
        "holes filled: {} bytes allocated",
        meta.blocks() * 512
    );
    let f = std::fs::File::open(&dst).unwrap();
    assert_eq!(
        ubio::sys::seek_hole(f.as_fd(), 0).unwrap(),
        MIB as u64,
        "first hole moved"
    );
    assert_eq!(
        ubio::sys::seek_data(f.as_fd(), MIB as u64).unwrap(),
        Some(32 * MIB as u64)
    );
    assert!(std::fs::read(&dst).unwrap() == std::fs::read(&src).unwrap());
}

#[test]
fn sparse_always_turns_zero_blocks_into_holes_and_never_writes_them() {
    let dir = workdir();
    let src = dir.path().join("zeros");
    let mut bytes = vec![0u8; 16 * MIB];
    bytes[..MIB].copy_from_slice(&data(MIB, 4));
    write_cold(&src, &bytes);
    let always = dir.path().join("always");
    assert_ok(&cp(&[&"--sparse=always", &src, &always]));
    assert!(always.metadata().unwrap().blocks() * 512 <= 2 * MIB as u64);
    let never = dir.path().join("never");
    assert_ok(&cp(&[&"--sparse=never", &src, &never]));
    assert!(never.metadata().unwrap().blocks() * 512 >= 16 * MIB as u64);
    for copy in [&always, &never] {
        assert!(std::fs::read(copy).unwrap() == bytes, "{copy:?} differs");
    }
}

#[test]
fn p_keeps_mode_ownership_and_timestamps() {
    let dir = workdir();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    let file = src.join("f");
    write_cold(&file, b"keep");
    std::fs::set_permissions(&file, PermissionsExt::from_mode(0o604)).unwrap();
    std::fs::set_permissions(&src, PermissionsExt::from_mode(0o751)).unwrap();
    let old = std::time::UNIX_EPOCH + std::time::Duration::new(1_000_000_000, 123_456_789);
    let times = std::fs::FileTimes::new()
        .set_accessed(old)
        .set_modified(old);
    std::fs::File::open(&file)
        .unwrap()
        .set_times(times)
        .unwrap();
    let root = ubio_testenv::is_root();
    if root {
        std::os::unix::fs::chown(&file, Some(1234), Some(4321)).unwrap();
    }
    std::fs::File::open(&src).unwrap().set_times(times).unwrap();
    let dst = dir.path().join("copy");
    assert_ok(&cp(&[&"-r", &"-p", &src, &dst]));
    let m = dst.join("f").metadata().unwrap();
    assert_eq!(m.mode() & 0o7777, 0o604);
    assert_eq!((m.mtime(), m.mtime_nsec()), (1_000_000_000, 123_456_789));
    assert_eq!((m.atime(), m.atime_nsec()), (1_000_000_000, 123_456_789));
    if root {
        assert_eq!((m.uid(), m.gid()), (1234, 4321));
    }
    let d = dst.metadata().unwrap();
    assert_eq!(d.mode() & 0o7777, 0o751);
    assert_eq!(d.mtime(), 1_000_000_000, "directory mtime not kept");
}

#[test]
fn n_does_not_overwrite() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    write_cold(&src, b"new");
    write_cold(&dst, b"old");
    assert_ok(&cp(&[&"-n", &src, &dst]));
    assert_eq!(std::fs::read(&dst).unwrap(), b"old");
}

/// A destination that cannot be opened (here a symlink into a missing
/// directory) is removed and replaced with -f, and an error without it.
/// -f removes a destination that cannot be opened (here a symlink loop)
/// and tries again; a dangling symlink is never written through, -f or not.
#[test]
fn f_replaces_a_destination_that_cannot_be_opened() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    write_cold(&src, b"data");
    std::os::unix::fs::symlink("dst", &dst).unwrap();
    let out = cp(&[&src, &dst]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&format!(
        "cannot stat '{}': Too many levels of symbolic links",
        dst.display()
    )));
    assert_ok(&cp(&[&"-f", &src, &dst]));
    assert!(!dst.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&dst).unwrap(), b"data");
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink("/nonexistent/dir/file", &dangling).unwrap();
    for args in [
        &[&src as &dyn AsRef<std::ffi::OsStr>, &dangling][..],
        &[&"-f", &src, &dangling],
    ] {
        let out = cp(args);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("not writing through dangling symlink"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_hard_link_to_the_source_is_the_same_file() {
    let dir = workdir();
    let (src, link) = (dir.path().join("src"), dir.path().join("link"));
    write_cold(&src, b"keep me");
    std::fs::hard_link(&src, &link).unwrap();
    let out = cp(&[&src, &link]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("are the same file"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&src).unwrap(), b"keep me");
}

#[test]
fn a_missing_source_among_several_fails_at_the_end_and_the_others_are_copied() {
    let dir = workdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_cold(&a, b"a");
    write_cold(&b, b"b");
    let into = dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    let missing = dir.path().join("missing");
    let out = cp(&[&a, &missing, &b, &into]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "ubio cp: cannot stat '{}': No such file or directory",
            missing.display()
        )),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(into.join("a")).unwrap(), b"a");
    assert_eq!(std::fs::read(into.join("b")).unwrap(), b"b");
}

#[test]
fn several_sources_need_a_directory() {
    let dir = workdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_cold(&a, b"a");
    write_cold(&b, b"b");
    let out = cp(&[&a, &b, &dir.path().join("nodir")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "ubio cp: target '{}': No such file or directory",
            dir.path().join("nodir").display()
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn v_prints_each_copy() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    write_cold(&src, b"x");
    let out = cp(&[&"-v", &src, &dst]);
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("'{}' -> '{}'\n", src.display(), dst.display())
    );
}

/// No progress bar (nor anything else) on stderr when it is not a terminal.
#[test]
fn no_progress_bar_when_stderr_is_not_a_terminal() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    write_cold(&src, &data(8 * MIB, 5));
    let out = cp(&[&"--sync", &src, &dst]);
    assert_ok(&out);
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn json_summary_shape() {
    let dir = workdir();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    write_cold(&src.join("a"), &data(2 * MIB, 6));
    write_cold(&src.join("b"), b"bb");
    // The summary alone: nothing in it grows with the tree.
    let out = cp(&[&"-r", &"--json", &src, &dir.path().join("copy")]);
    assert_ok(&out);
    let v = json(&out);
    assert_eq!(v["files"], 2);
    assert_eq!(v["bytes"], 2 * MIB as u64 + 2);
    assert_eq!(v["failed"], 0);
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["mb_per_s"].as_f64().is_some());
    assert_eq!(
        v["methods"],
        serde_json::json!([{"method": "copy_file_range", "files": 2, "bytes": 2 * MIB as u64 + 2}])
    );
    assert!(v.get("copied").is_none(), "{v}");
    // --json=files: every file's copy too.
    let out = cp(&[&"-r", &"--json=files", &src, &dir.path().join("copy2")]);
    assert_ok(&out);
    let v = json(&out);
    assert_eq!(v["files"], 2);
    assert_eq!(v["copied"].as_array().unwrap().len(), 2);
    let first = &v["copied"][0];
    for key in ["src", "dst", "bytes", "method", "hole_bytes", "seconds"] {
        assert!(first.get(key).is_some(), "no {key} in {first}");
    }
    assert_eq!(first["method"], "copy_file_range");
    assert!(first["src_stats"]["backend"].is_string());
    assert!(first["dst_stats"]["bytes_written"].as_u64() == Some(2 * MIB as u64));
    assert!(v["errors"].as_array().unwrap().is_empty());
}

/// Pages of the source cached before a copy, as another user of the file
/// would cache them, and after it: the first `hot` bytes, and the whole file.
struct HotSource {
    hot_before: u64,
    hot_after: u64,
    all_before: u64,
    all_after: u64,
}

/// Evict `src`, read its first `hot` bytes as another user would, copy it
/// with `ubio cp ARGS` (which must succeed, returning its output) and
/// count the source's pages before and after.
fn copy_beside_hot_source(
    src: &Path,
    hot: u64,
    args: &[&dyn AsRef<std::ffi::OsStr>],
) -> (Output, HotSource) {
    let f = std::fs::File::open(src).unwrap();
    ubio::sys::fadvise(f.as_fd(), 0, 0, ubio::sys::Advice::DontNeed).unwrap();
    let mut buf = vec![0u8; hot as usize];
    use std::os::unix::fs::FileExt;
    f.read_exact_at(&mut buf, 0).unwrap();
    let hot_cached = || ubio::sys::cachestat(f.as_fd(), 0..hot).unwrap().nr_cache;
    let all_cached = || {
        ubio::sys::cachestat(f.as_fd(), ubio::sys::FileRange::WHOLE)
            .unwrap()
            .nr_cache
    };
    // Readahead cached some pages past the hot range too: those count as
    // cached before the copy.
    let (hot_before, all_before) = (hot_cached(), all_cached());
    let out = cp(args);
    assert_ok(&out);
    let pages = HotSource {
        hot_before,
        hot_after: hot_cached(),
        all_before,
        all_after: all_cached(),
    };
    (out, pages)
}

/// The destination is not left in the cache; source pages that were cached
/// before the copy stay cached. DAMON may reclaim a few of them on its own:
/// retried, as in the library's contract tests.
#[test]
fn destination_uncached_and_source_pages_cached_before_stay() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    write_cold(&src, &data(48 * MIB, 7));
    let hot = 8 * MIB as u64;
    with_damon_retries(
        "destination_uncached_and_source_pages_cached_before_stay",
        || {
            let (_, p) = copy_beside_hot_source(&src, hot, &[&src, &dst]);
            assert_eq!(
                p.hot_before,
                hot / 4096,
                "setup: the hot range is not cached"
            );
            assert_eq!(count(&dst).cached, 0, "destination left cached");
            assert!(
                p.all_after <= p.all_before,
                "source pages the copy brought in stayed: {} cached, {} before",
                p.all_after,
                p.all_before
            );
            if p.hot_after == p.hot_before {
                return Ok(());
            }
            Err(format!(
                "{} of {} hot pages stayed",
                p.hot_after, p.hot_before
            ))
        },
    );
}

/// A large file whose destination may be written through O_DIRECT is
/// copied by the pipeline, whose streams race the page cache against
/// O_DIRECT (copy_file_range only goes through the cache); with direct
/// writes off, by copy_file_range. Either way the copy is exact, the
/// destination uncached, and the source's pages cached before stay.
#[test]
fn a_large_copy_races_o_direct_and_keeps_the_contract() {
    let dir = workdir();
    let src = dir.path().join("src");
    let size = ubio::copy::PIPELINE_FROM as usize + 32 * MIB;
    let bytes = data(size, 9);
    write_cold(&src, &bytes);
    let hot = 8 * MIB as u64;
    for (i, (direct_writes, method)) in [("when-faster", "stream"), ("never", "copy_file_range")]
        .into_iter()
        .enumerate()
    {
        let dst = dir.path().join(format!("dst{i}"));
        with_damon_retries("a_large_copy_races_o_direct_and_keeps_the_contract", || {
            let _ = std::fs::remove_file(&dst);
            let args: [&dyn AsRef<std::ffi::OsStr>; 5] = [
                &"--json=files",
                &"--direct-writes",
                &direct_writes,
                &src,
                &dst,
            ];
            let (out, p) = copy_beside_hot_source(&src, hot, &args);
            let v = json(&out);
            assert_eq!(v["copied"][0]["method"], method, "{direct_writes}: {v}");
            assert_eq!(
                count(&dst).cached,
                0,
                "{direct_writes}: destination left cached"
            );
            assert!(
                p.all_after <= p.all_before,
                "{direct_writes}: source pages the copy brought in stayed: {} cached, {} before",
                p.all_after,
                p.all_before
            );
            assert!(
                std::fs::read(&dst).unwrap() == bytes,
                "{direct_writes}: the copy differs"
            );
            match p.hot_after == p.hot_before {
                true => Ok(()),
                false => Err(format!(
                    "{direct_writes}: {} of {} hot pages stayed",
                    p.hot_after, p.hot_before
                )),
            }
        });
    }
}

/// A copy onto a full filesystem names the destination as incomplete with
/// the byte counts, exits 1, and leaves the source intact.
#[test]
fn a_full_destination_is_reported_incomplete_with_counts() {
    if !root_or_skip("a_full_destination_is_reported_incomplete_with_counts") {
        return;
    }
    let small = ScratchFs::create(FsKind::Ext4, 32 << 20, &Default::default()).unwrap();
    let dir = workdir();
    let src = dir.path().join("big");
    let bytes = data(64 * MIB, 8);
    write_cold(&src, &bytes);
    let dst: PathBuf = small.mount_point().join("copy");
    let out = cp(&[&"--json", &src, &dst]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains(&format!("{} is incomplete (failed after ", dst.display()))
            && err.contains(&format!(" of {} bytes)", bytes.len())),
        "{err}"
    );
    let v = json(&out);
    assert_eq!(v["failed"], 1);
    assert!(std::fs::read(&src).unwrap() == bytes, "source changed");
}

/// Where the filesystem shares extents the copy is a clone: no data moves,
/// neither file is cached; on ext4 the data is streamed.
#[test]
fn clones_on_btrfs_and_xfs() {
    if !root_or_skip("clones_on_btrfs_and_xfs") {
        return;
    }
    for kind in [FsKind::Btrfs, FsKind::Xfs] {
        let fs = ScratchFs::create(kind, 320 << 20, &Default::default()).unwrap();
        let src = fs.mount_point().join("src");
        let bytes = data(32 * MIB, 9);
        write_cold(&src, &bytes);
        let dst = fs.mount_point().join("dst");
        let out = cp(&[&"--json=files", &src, &dst]);
        assert_ok(&out);
        let v = json(&out);
        assert_eq!(v["copied"][0]["method"], "clone", "{kind}: {v}");
        assert_eq!(count(&dst).cached, 0, "{kind}: destination cached");
        assert_eq!(count(&src).cached, 0, "{kind}: source cached");
        assert!(
            std::fs::read(&dst).unwrap() == bytes,
            "{kind}: clone differs"
        );
    }
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    write_cold(&src, b"ext4");
    let v = json(&cp(&[&"--json=files", &src, &dst]));
    assert_eq!(v["copied"][0]["method"], "copy_file_range");
    let out = cp(&[&"--reflink=always", &src, &dir.path().join("dst2")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "failed to clone '{}' from '{}': Operation not supported",
            dir.path().join("dst2").display(),
            src.display()
        )),
        "{}",
        stderr(&out)
    );
}

/// Start `cmd` (copying `src` to `dst`), SIGKILL it once `dst` holds
/// `kill_at` bytes, and check what a crash leaves: the source unchanged and
/// the destination shorter than the source (ubio cp writes in place, in
/// order, and sets the final size last, so a short file is the sign of an
/// interrupted copy). Returns the size the destination was left at.
fn kill_mid_copy(
    mut cmd: std::process::Command,
    src_bytes: &[u8],
    src: &Path,
    dst: &Path,
    kill_at: u64,
) -> u64 {
    use std::time::{Duration, Instant};
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{cmd:?} ended before it could be killed: {status}");
        }
        if dst.metadata().is_ok_and(|m| m.len() >= kill_at) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{cmd:?}: {} never reached {kill_at} bytes",
            dst.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{cmd:?}");
    assert!(
        std::fs::read(src).unwrap() == src_bytes,
        "{cmd:?}: source changed"
    );
    let left = dst.metadata().unwrap().len();
    assert!(
        left < src_bytes.len() as u64,
        "{cmd:?}: killed copy looks complete ({left} bytes)"
    );
    left
}

/// `ubio cp` killed with SIGKILL mid-copy (writes throttled to 16 MiB/s so
/// it is caught in the middle), with every backend: the source is intact,
/// the destination is visibly short, and a rerun makes an identical copy.
/// Also a plain `cp` under `ubio run` (the shim) killed the same way.
#[test]
fn killed_mid_copy_leaves_the_source_intact_and_a_rerun_completes() {
    if !root_or_skip("killed_mid_copy_leaves_the_source_intact_and_a_rerun_completes") {
        return;
    }
    let fs = ScratchFs::create(FsKind::Ext4, 256 << 20, &Default::default()).unwrap();
    let dir = workdir();
    let src = dir.path().join("src");
    let bytes = data(96 * MIB, 21);
    write_cold(&src, &bytes);
    let dst = fs.mount_point().join("dst");
    let mut kills = 0;
    let mut commands: Vec<(String, std::process::Command)> = Vec::new();
    for backend in ubio::BackendKind::ALL {
        let mut c = ubio();
        c.args(["cp", "--backend", backend.name()])
            .arg(&src)
            .arg(&dst);
        commands.push((format!("ubio cp --backend {backend}"), c));
    }
    let mut c = ubio();
    c.args(["run", "--", "cp"]).arg(&src).arg(&dst);
    commands.push(("ubio run -- cp".into(), c));
    for (name, cmd) in commands {
        let _ = std::fs::remove_file(&dst);
        fs.set_write_bps(16 << 20).unwrap();
        let left = kill_mid_copy(cmd, &bytes, &src, &dst, 24 << 20);
        kills += 1;
        fs.set_write_bps(0).unwrap();
        eprintln!("{name}: killed with {} MiB of 96 written", left >> 20);
        let rerun = cp(&[&src, &dst]);
        assert_ok(&rerun);
        assert!(
            std::fs::read(&dst).unwrap() == bytes,
            "{name}: rerun copy differs"
        );
    }
    println!("FAULTS sigkill_mid_copy={kills}");
}

/// Run `cmd`, call `change` once `dst` holds 8 MiB, and return what it printed.
/// Reads from `fs` are throttled meanwhile so that the change lands mid-copy.
fn change_mid_copy(
    fs: &ScratchFs,
    mut cmd: std::process::Command,
    dst: &Path,
    change: impl FnOnce(),
) -> Output {
    use std::time::{Duration, Instant};
    fs.set_read_bps(32 << 20).unwrap();
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dst.metadata().is_ok_and(|m| m.len() >= 8 << 20) {
        assert!(
            Instant::now() < deadline,
            "{} never reached 8 MiB",
            dst.display()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    change();
    let out = child.wait_with_output().unwrap();
    fs.set_read_bps(0).unwrap();
    out
}

/// A source that changes under the copy never becomes a plausible wrong
/// copy. The issue's case scaled down: a cold 64 MiB file truncated to 4 MiB
/// while `ubio cp -r` copies the tree holding it, and one appended to while
/// `ubio cp` copies it. Both exit 1 saying "file changed as we read it" and
/// name the destination incomplete; the destination ends at what was read
/// and holds only bytes the source held, no zeros past the truncation.
#[test]
fn a_source_changed_mid_copy_fails_and_the_destination_is_named_incomplete() {
    let name = "a_source_changed_mid_copy_fails_and_the_destination_is_named_incomplete";
    if !root_or_skip(name) {
        return;
    }
    let fs = ScratchFs::create(FsKind::Ext4, 320 << 20, &Default::default()).unwrap();
    let tree = fs.mount_point().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let src = tree.join("f");
    let bytes = data(64 * MIB, 23);

    write_cold(&src, &bytes);
    let out_dir = fs.mount_point().join("out");
    let mut c = ubio();
    c.args(["cp", "-r"]).arg(&tree).arg(&out_dir);
    let dst = out_dir.join("f");
    let out = change_mid_copy(&fs, c, &dst, || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&src)
            .unwrap()
            .set_len(4 << 20)
            .unwrap();
    });
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("file changed as we read it (it shrank"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{} is incomplete", dst.display())),
        "{err}"
    );
    let copy = std::fs::read(&dst).unwrap();
    assert!(
        copy.len() >= 8 * MIB && copy.len() < bytes.len(),
        "destination of {} bytes",
        copy.len()
    );
    assert!(
        copy[..] == bytes[..copy.len()],
        "the copy holds bytes the source never held"
    );

    write_cold(&src, &bytes);
    let dst = fs.mount_point().join("grown");
    let mut c = ubio();
    c.arg("cp").arg(&src).arg(&dst);
    let out = change_mid_copy(&fs, c, &dst, || {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&src).unwrap();
        f.write_all(&[9u8; MIB]).unwrap();
    });
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("file changed as we read it (it grew"), "{err}");
    assert!(
        err.contains(&format!("{} is incomplete", dst.display())),
        "{err}"
    );
    let copy = std::fs::read(&dst).unwrap();
    assert_eq!(copy.len(), bytes.len() + MIB);
    assert!(copy[..bytes.len()] == bytes[..]);
}

/// A tree of many small files and two large ones copied with -a, 8 files
/// in flight: every byte, mode and time as in the source, directories'
/// times too (each is set after the files copied into it, or writing them
/// would have moved it), and the large files' pages not left cached.
#[test]
fn a_tree_copies_in_parallel_keeping_metadata_and_the_contract() {
    use std::os::unix::fs::MetadataExt;
    let dir = workdir();
    let src = dir.path().join("tree");
    for d in 0..8 {
        let sub = src.join(format!("d{d}")).join("deeper");
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..60 {
            let at = if f % 2 == 0 {
                sub.clone()
            } else {
                sub.parent().unwrap().to_path_buf()
            };
            std::fs::write(
                at.join(format!("f{f}")),
                data(100 + f * 97, (d * 60 + f) as u8),
            )
            .unwrap();
        }
    }
    write_cold(&src.join("d0/big1"), &data(40 * MIB, 1));
    write_cold(&src.join("d5/deeper/big2"), &data(24 * MIB, 2));
    // Old times on every directory, so a late write into one would show.
    for entry in walk(&src) {
        if entry.is_dir() {
            let old =
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
            std::fs::File::open(&entry)
                .unwrap()
                .set_times(
                    std::fs::FileTimes::new()
                        .set_modified(old)
                        .set_accessed(old),
                )
                .unwrap();
        }
    }
    let dst = dir.path().join("copy");
    let out = cp(&[&"-a", &"--jobs", &"8", &"--json", &src, &dst]);
    assert_ok(&out);
    assert_eq!(json(&out)["files"], 8 * 60 + 2);
    // Before reading the copies back, which caches them. The small files'
    // closes are deferred by the workers: none may be left cached either.
    for big in ["d0/big1", "d5/deeper/big2"] {
        assert_eq!(count(&src.join(big)).cached, 0, "{big}: source left cached");
    }
    let left: Vec<_> = walk(&dst)
        .into_iter()
        .filter(|p| p.is_file() && count(p).cached > 0)
        .collect();
    assert!(left.is_empty(), "copies left cached: {left:?}");
    for path in walk(&src) {
        let rel = path.strip_prefix(&src).unwrap();
        let (a, b) = (path.metadata().unwrap(), dst.join(rel).metadata().unwrap());
        assert_eq!(
            (a.mode(), a.mtime(), a.mtime_nsec()),
            (b.mode(), b.mtime(), b.mtime_nsec()),
            "{}",
            rel.display()
        );
        if a.is_file() {
            assert!(
                std::fs::read(&path).unwrap() == std::fs::read(dst.join(rel)).unwrap(),
                "{}",
                rel.display()
            );
        }
    }
}

/// Every path below `root`, directories included (root too).
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() {
            let mut names: Vec<_> = std::fs::read_dir(&out[i])
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            out.extend(names);
        }
        i += 1;
    }
    out
}

/// The GNU options keep the uncached contract: -a, -u and a backup copy
/// data through the streams (neither file left cached), -l and -s copy no
/// data (nothing read: the cold source stays uncached). With
/// --preserve=links the tree's other names of big (a hard link, a symlink
/// followed by -L) are links to its one copy, into a new tree and into the
/// one -a made.
#[test]
fn gnu_options_copy_uncached_and_links_read_nothing() {
    let dir = workdir();
    let p = |name: &str| dir.path().join(name);
    let src = p("tree");
    std::fs::create_dir(&src).unwrap();
    let big = src.join("big");
    let bytes = || {
        // Blocks of zeros between data, for --sparse=always's 4 KiB blocks.
        let mut b = data(6 * MIB + 11, 4);
        b[MIB..2 * MIB + 4096].fill(0);
        b
    };
    write_cold(&big, &bytes());
    std::fs::hard_link(&big, src.join("big-hard")).unwrap();
    std::os::unix::fs::symlink("big", src.join("big-sym")).unwrap();
    std::fs::write(p("outside"), b"old").unwrap();
    let fifo = p("fifo");
    ubio::sys::mkfifo(&fifo, 0o600).unwrap();
    // Each run: what it tests, cp's arguments.
    let args = |v: &[&dyn AsRef<std::ffi::OsStr>]| -> Vec<std::ffi::OsString> {
        v.iter().map(|a| a.as_ref().to_os_string()).collect()
    };
    let runs = [
        ("-a", args(&[&"-a", &src, &p("archive")])),
        ("-u", args(&[&"-u", &big, &p("updated")])),
        (
            "--backup",
            args(&[&"--backup=numbered", &big, &p("outside")]),
        ),
        ("-l", args(&[&"-l", &big, &p("hard")])),
        ("-s", args(&[&"-s", &big, &p("soft")])),
        (
            "--sparse=always",
            args(&[&"--sparse=always", &big, &p("sparse")]),
        ),
        (
            "-p --parents",
            args(&[&"-p", &"--parents", &big, &p("parents")]),
        ),
        // -au into the tree -a made: the source is newer, it is copied again.
        ("-au", args(&[&"-au", &src.join("."), &p("archive")])),
        (
            "-H --preserve=links",
            args(&[&"-H", &"--preserve=links", &big, &p("linked")]),
        ),
        (
            "-RL --preserve=links",
            args(&[&"-RL", &"--preserve=links", &src, &p("followed")]),
        ),
        ("a pipe", args(&[&big, &fifo])),
    ];
    std::fs::create_dir(p("parents")).unwrap();
    for (what, args) in runs {
        write_cold(&big, &bytes());
        // A reader at the other end of the pipe.
        let reader = (what == "a pipe").then(|| {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        });
        let refs: Vec<&dyn AsRef<std::ffi::OsStr>> = args
            .iter()
            .map(|a| a as &dyn AsRef<std::ffi::OsStr>)
            .collect();
        assert_ok(&cp(&refs));
        if let Some(reader) = reader {
            assert!(
                reader.join().unwrap() == bytes(),
                "{what}: the pipe's reader got other bytes"
            );
        }
        assert_eq!(count(&big).cached, 0, "{what}: source left cached");
    }
    let parents = p("parents").join(big.strip_prefix("/").unwrap());
    let copies = [
        p("archive/big"),
        p("updated"),
        p("outside"),
        p("sparse"),
        parents.clone(),
        p("linked"),
        p("followed/big"),
    ];
    // Cache checks before anything reads the copies.
    for copy in &copies {
        assert_eq!(count(copy).cached, 0, "{} left cached", copy.display());
    }
    for copy in copies
        .iter()
        .chain([&p("hard"), &p("soft"), &p("tree/big")])
    {
        let got = std::fs::read(copy).unwrap();
        assert!(got == bytes(), "{} differs", copy.display());
    }
    assert!(
        p("sparse").metadata().unwrap().blocks() * 512 < big.metadata().unwrap().len() - MIB as u64
    );
    let backup = std::fs::read(p("outside.~1~")).unwrap();
    assert_eq!(backup, b"old");
    let ino = |p: &Path| p.metadata().unwrap().ino();
    assert_eq!(ino(&p("hard")), ino(&big));
    for (tree, names) in [
        ("archive", &["big-hard"][..]),
        ("followed", &["big-hard", "big-sym"]),
    ] {
        let copy = ino(&p(tree).join("big"));
        assert_ne!(copy, ino(&big), "{tree}/big is the source");
        for name in names {
            assert_eq!(
                ino(&p(tree).join(name)),
                copy,
                "{tree}/{name}: not a link to {tree}/big"
            );
        }
    }
    let target = std::fs::read_link(p("soft")).unwrap();
    assert_eq!(target, big);
}

/// A thread that cannot be started means fewer workers, not a failure:
/// the copy of a tree runs as a user allowed one or three threads in all
/// (RLIMIT_NPROC), so the workers, and the reader thread of a copy through
/// buffers (--sparse=always), cannot all start.
#[test]
fn threads_that_cannot_start_mean_fewer_workers() {
    if !root_or_skip("threads_that_cannot_start_mean_fewer_workers") {
        return;
    }
    let dir = workdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    for i in 0..40 {
        std::fs::write(src.join(format!("f{i}")), data(50_000 + i, i as u8)).unwrap();
    }
    let mut big = data(5 * MIB, 7);
    big[MIB..3 * MIB].fill(0);
    std::fs::write(src.join("big"), &big).unwrap();
    for threads in [1, 3] {
        let dst = dir.path().join(format!("copy{threads}"));
        // nobody, allowed `threads` tasks (this process included).
        let out = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "prlimit",
            ])
            .arg(format!("--nproc={threads}:{threads}"))
            .args([UBIO, "cp", "-r", "--jobs", "16", "--sparse=always"])
            .args([&src, &dst])
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{threads} thread(s): {:?} {}",
            out.status,
            stderr(&out)
        );
        for i in 0..40 {
            let name = format!("f{i}");
            assert!(
                std::fs::read(dst.join(&name)).unwrap() == data(50_000 + i, i as u8),
                "{name}"
            );
        }
        assert!(
            std::fs::read(dst.join("big")).unwrap() == big,
            "{threads} thread(s): big differs"
        );
    }
}

/// `cmd` run under `ulimit -v KIB` (RLIMIT_AS, as GNU's tests set it).
fn under_ulimit_v(kib: u64, cmd: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$@\""))
        .arg("sh");
    for a in cmd {
        c.arg(a);
    }
    c.output().unwrap()
}

/// `cmd` succeeds quietly under `ulimit -v KIB`.
fn runs_under_ulimit_v(kib: u64, cmd: &[&dyn AsRef<std::ffi::OsStr>]) {
    let out = under_ulimit_v(kib, cmd);
    let line: Vec<_> = cmd.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{} under ulimit -v {kib}: {:?} {}",
        line.join(" "),
        out.status,
        stderr(&out)
    );
}

/// The least `ulimit -v` (KiB, to 256) under which `ubio cp -al --jobs 1 f
/// f2`, a copy of nothing much, runs: what ubio itself needs (as GNU's
/// get_min_ulimit_v_), no worker included.
fn least_ulimit_v(dir: &Path) -> u64 {
    let f = dir.join("one");
    std::fs::write(&f, b"1").unwrap();
    let f2 = dir.join("one-copy");
    least_kib("ubio cp -al --jobs 1 f f2", |kib| {
        let _ = std::fs::remove_file(&f2);
        under_ulimit_v(kib, &[&UBIO, &"cp", &"-al", &"--jobs", &"1", &f, &f2])
            .status
            .success()
    })
}

/// `src/a` and `src/b`: 10,000 empty files in a, names of `len` digits,
/// each with a second name in b.
fn two_names_each(src: &Path, len: usize) -> (PathBuf, PathBuf) {
    let (a, b) = (src.join("a"), src.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    for i in 0..10_000 {
        let name = format!("{i:0len$}");
        std::fs::write(a.join(&name), b"").unwrap();
        std::fs::hard_link(a.join(&name), b.join(&name)).unwrap();
    }
    (a, b)
}

/// The least `ulimit -v` (KiB, to 256) under which `runs` (of `what`) succeeds.
fn least_kib(what: &str, mut runs: impl FnMut(u64) -> bool) -> u64 {
    let (mut lo, mut hi) = (1000, 1 << 20);
    assert!(runs(hi), "{what} fails even under ulimit -v {hi}");
    while hi - lo > 256 {
        let mid = (lo + hi) / 2;
        if runs(mid) {
            hi = mid
        } else {
            lo = mid
        }
    }
    hi
}

/// A tree of any size copies in bounded memory: as GNU's link-heap test,
/// `cp -al` of 20,000 entries (10,000 files, each with a second name, and
/// 10,000 directories) gets 4 MB of address space beyond what a copy of one
/// file needs, and `cp -r` of files with data (some larger than a copy
/// buffer) 8 MB; each copy is complete and correct. (Before: the whole
/// tree was planned first, about 370 bytes an entry, and 16 workers took 2
/// MiB of stack and 4 MiB of buffers each: aborted with "memory allocation
/// failed".)
#[test]
fn a_large_tree_copies_in_bounded_address_space() {
    let dir = workdir();
    let base = least_ulimit_v(dir.path());
    let src = dir.path().join("src");
    let (a, b) = two_names_each(&src, 31);
    for i in 0..10_000 {
        std::fs::create_dir(a.join(format!("d{i:030}"))).unwrap();
    }
    let dst = dir.path().join("links");
    runs_under_ulimit_v(base + 4000, &[&UBIO, &"cp", &"-al", &src, &dst]);
    let names = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&dst.join("a")), names(&a));
    assert_eq!(names(&dst.join("b")), names(&b));
    for name in names(&b) {
        let ino = |p: PathBuf| p.metadata().unwrap().ino();
        assert_eq!(ino(dst.join("b").join(&name)), ino(a.join(&name)));
    }

    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..300 {
        std::fs::write(tree.join(format!("f{i}")), data(i * 1000, i as u8)).unwrap();
    }
    let big = data(3 * MIB + 5, 9);
    std::fs::write(tree.join("big"), &big).unwrap();
    for jobs in ["16", "1"] {
        let dst = dir.path().join(format!("copy{jobs}"));
        let cmd: [&dyn AsRef<std::ffi::OsStr>; 7] =
            [&UBIO, &"cp", &"-r", &"--jobs", &jobs, &tree, &dst];
        runs_under_ulimit_v(base + 8000, &cmd);
        for i in 0..300 {
            let f = format!("f{i}");
            assert!(
                std::fs::read(dst.join(&f)).unwrap() == data(i * 1000, i as u8),
                "{f}"
            );
        }
        assert!(std::fs::read(dst.join("big")).unwrap() == big, "big");
    }
}

/// Under an address space too small for any worker or copy buffer of the
/// usual size, the files are copied one at a time with smaller buffers.
#[test]
fn a_tree_copies_in_an_address_space_too_small_for_the_usual_buffers() {
    let dir = workdir();
    let base = least_ulimit_v(dir.path());
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..20 {
        std::fs::write(tree.join(format!("f{i}")), data(200_000 * i + 1, i as u8)).unwrap();
    }
    // 1.5 MB beyond a copy of nothing: no room for one 1 MiB buffer beside
    // the reader's, let alone 16 workers.
    let dst = dir.path().join("copy");
    runs_under_ulimit_v(base + 1500, &[&UBIO, &"cp", &"-r", &tree, &dst]);
    for i in 0..20 {
        let f = format!("f{i}");
        assert!(
            std::fs::read(dst.join(&f)).unwrap() == data(200_000 * i + 1, i as u8),
            "{f}"
        );
    }
}

/// As in GNU's sequential copy (its parent-perm-race test), a directory is
/// made without group and other write permission (with --preserve=ownership
/// without any group or other access), with or without --parents, and gets
/// them only once every file below it is in, even while a worker still
/// copies one: here the copy of a fifo's contents waits for a writer.
#[test]
fn a_directory_opens_up_only_once_its_files_are_in() {
    // Under umask 002, so that the umask alone would let the group write.
    for (attr, closed, after) in [("mode", 0o022, 0o777), ("ownership", 0o077, 0o775)] {
        for parents in [false, true] {
            let (during, now) = dir_modes_while_filled(attr, parents);
            assert_eq!(
                during & closed,
                0,
                "--preserve={attr} (--parents {parents}): group or other had {closed:o} \
                 while a copy went on: {during:o}"
            );
            assert_eq!(now, after, "--preserve={attr} (--parents {parents}): after");
        }
    }
}

/// The modes the copy of a directory (mode 777) holding a fifo had while
/// the fifo's contents were copied (--copy-contents, -R,
/// --preserve=`attr`, under umask 002), or'ed, and after the copy.
fn dir_modes_while_filled(attr: &str, parents: bool) -> (u32, u32) {
    let dir = workdir();
    let src = dir.path().join("d");
    std::fs::create_dir(&src).unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o777)).unwrap();
    let fifo = src.join("fifo");
    ubio::sys::mkfifo(&fifo, 0o644).unwrap();
    std::fs::write(src.join("a"), b"a").unwrap();
    let into = dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    let (copy_of, dst) = if parents {
        ("d", into.join("d"))
    } else {
        (src.to_str().unwrap(), dir.path().join("copy"))
    };
    let target = if parents { &into } else { &dst };
    let mut child = std::process::Command::new("sh")
        .current_dir(dir.path())
        .arg("-c")
        .arg("umask 002 && exec \"$@\"")
        .args(["sh", UBIO, "cp", "-R", "--copy-contents", "--jobs", "4"])
        .arg(format!("--preserve={attr}"))
        .args(parents.then_some("--parents"))
        .arg(copy_of)
        .arg(target)
        .spawn()
        .unwrap();
    // Opening the fifo for writing waits for cp to open it for reading;
    // its copy then waits for data while cp goes on to the end of the
    // directory. Watched for a second: the mode must not open up meanwhile.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let mut during = 0;
    for _ in 0..100 {
        during |= dst.metadata().unwrap().mode() & 0o777;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    use std::io::Write;
    writer.write_all(b"through the fifo").unwrap();
    drop(writer);
    assert!(child.wait().unwrap().success());
    assert_eq!(
        std::fs::read(dst.join("fifo")).unwrap(),
        b"through the fifo"
    );
    (during, dst.metadata().unwrap().mode() & 0o777)
}

/// --attributes-only -p: the destination's data is kept, the source not read.
#[test]
fn attributes_only_copies_no_data_and_reads_nothing() {
    let dir = workdir();
    let (src, dst) = (dir.path().join("src"), dir.path().join("attrs"));
    write_cold(&src, &data(6 * MIB + 11, 4));
    std::fs::write(&dst, b"kept").unwrap();
    assert_ok(&cp(&[&"--attributes-only", &"-p", &src, &dst]));
    assert_eq!(count(&src).cached, 0, "source read");
    assert_eq!(std::fs::read(&dst).unwrap(), b"kept");
}

/// Several sources side by side (no target at or below another's) copy in
/// the address space that one source of the same tree needs: nothing they
/// made is remembered, as it is where one source's copy may meet another's.
/// (Before: every destination's path with several sources, about 3 MB more
/// for these 20,000 names of 200 bytes.)
#[test]
fn sources_side_by_side_copy_in_the_address_space_of_one() {
    let dir = workdir();
    let src = dir.path().join("src");
    let (a, b) = two_names_each(&src, 200);

    let one = dir.path().join("one");
    let kib = least_kib("ubio cp -al src one", |kib| {
        let _ = std::fs::remove_dir_all(&one);
        under_ulimit_v(kib, &[&UBIO, &"cp", &"-al", &src, &one])
            .status
            .success()
    });
    let two = dir.path().join("two");
    std::fs::create_dir(&two).unwrap();
    runs_under_ulimit_v(kib + 1024, &[&UBIO, &"cp", &"-al", &a, &b, &two]);
    assert_eq!(std::fs::read_dir(two.join("b")).unwrap().count(), 10_000);
}

/// A copy is truncated to its length only where it ends in a hole, as GNU's
/// cp: on ext4 a truncate commits the file's size at once, before delayed
/// allocation has placed the data, and a power cut then left a copy at its
/// full size over a hole (the 6.1 guest's power cuts, ubio-powercut's tree
/// workload). Seen with strace.
#[test]
fn a_copy_is_truncated_only_where_it_ends_in_a_hole() {
    if Command::new("strace").arg("-V").output().is_err() {
        skip(
            "a_copy_is_truncated_only_where_it_ends_in_a_hole",
            "strace is not installed (scripts/install-deps.sh)",
        );
        return;
    }
    let dir = workdir();
    std::fs::write(dir.path().join("small"), [5u8; 325]).unwrap();
    std::fs::write(dir.path().join("big"), data(3 * MIB + 100, 7)).unwrap();
    let holed = std::fs::File::create(dir.path().join("holed")).unwrap();
    holed.set_len(8 * MIB as u64).unwrap();
    use std::os::unix::fs::FileExt;
    holed.write_all_at(&data(MIB, 2), 0).unwrap();
    drop(holed);
    for (name, truncated) in [("small", false), ("big", false), ("holed", true)] {
        let trace = dir.path().join(format!("{name}.trace"));
        let out = Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=ftruncate", "-o"])
            .arg(&trace)
            .arg(UBIO)
            .args(["cp", name, &format!("{name}.copy")])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_ok(&out);
        let trace = std::fs::read_to_string(&trace).unwrap();
        assert_eq!(trace.contains("ftruncate("), truncated, "{name}: {trace}");
        assert!(
            std::fs::read(dir.path().join(name)).unwrap()
                == std::fs::read(dir.path().join(format!("{name}.copy"))).unwrap(),
            "{name}: the copy differs"
        );
    }
}

/// In a directory the copy just made nothing can be there: its files are
/// created exclusively (O_EXCL, as GNU's cp does) and not looked up first
/// (the lookup of each name waited on the directory's lock behind the
/// workers' creates). Into a directory that was there, each destination is
/// looked up and opened without O_EXCL. Seen with strace.
#[test]
fn files_in_a_directory_just_made_are_created_exclusively_unlooked() {
    if Command::new("strace").arg("-V").output().is_err() {
        skip(
            "files_in_a_directory_just_made_are_created_exclusively_unlooked",
            "strace is not installed (scripts/install-deps.sh)",
        );
        return;
    }
    let dir = workdir();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..40 {
        std::fs::write(src.join(format!("d/f{i:02}")), format!("{i}\n")).unwrap();
    }
    let traced = |args: &[&str], trace: &Path| {
        let out = Command::new("strace")
            .args([
                "-f",
                "-qq",
                "-e",
                "trace=openat,statx,newfstatat,lstat,stat",
                "-o",
            ])
            .arg(trace)
            .arg(UBIO)
            .arg("cp")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_ok(&out);
        std::fs::read_to_string(trace).unwrap()
    };
    let calls_on = |trace: &str, name: &str| -> Vec<String> {
        (trace.lines())
            .filter(|l| l.contains(&format!("\"{name}\"")))
            .map(str::to_owned)
            .collect()
    };
    // A new destination: dst/d is made by the copy.
    let trace = traced(&["-r", "src", "dst"], &dir.path().join("new.trace"));
    for i in 0..40 {
        let calls = calls_on(&trace, &format!("dst/d/f{i:02}"));
        assert_eq!(calls.len(), 1, "dst/d/f{i:02}: {calls:?}");
        assert!(
            calls[0].contains("openat(") && calls[0].contains("O_CREAT|O_EXCL"),
            "dst/d/f{i:02}: {calls:?}"
        );
        let copy = std::fs::read_to_string(dir.path().join(format!("dst/d/f{i:02}"))).unwrap();
        assert_eq!(copy, format!("{i}\n"));
    }
    // Into directories that are there: each name looked up, then opened
    // to be replaced.
    let trace = traced(&["-rT", "src", "dst"], &dir.path().join("existing.trace"));
    for i in 0..40 {
        let calls = calls_on(&trace, &format!("dst/d/f{i:02}"));
        assert!(
            calls.iter().any(|c| c.contains("stat")),
            "dst/d/f{i:02} not looked up: {calls:?}"
        );
        assert!(
            calls
                .iter()
                .any(|c| c.contains("openat(") && c.contains("O_TRUNC") && !c.contains("O_EXCL")),
            "dst/d/f{i:02}: {calls:?}"
        );
    }
}
