//! `ubio stat` and `ubio evict` against cachestat() on the same files.

mod common;
use common::*;
use ubio_testenv::kept_pages::with_damon_retries;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

const MIB: usize = 1 << 20;
const PAGE: u64 = 4096;

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = ubio();
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn read_prefix(path: &Path, len: usize) {
    let mut buf = vec![0u8; len];
    std::fs::File::open(path)
        .unwrap()
        .read_exact(&mut buf)
        .unwrap();
}

#[test]
fn stat_reports_what_cachestat_reports() {
    let dir = workdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_cold(&a, &vec![0x5a; 16 * MIB]);
    write_cold(&b, &vec![0x5a; 3 * MIB + 1]);
    with_damon_retries("stat_reports_what_cachestat_reports", || {
        read_prefix(&a, 4 * MIB);
        read_prefix(&b, 3 * MIB + 1);
        let (ca, cb) = (count(&a), count(&b));
        let v = json(&run(&[&"stat", &"--json", &a, &b]));
        let (fa, fb) = (&v["files"][0], &v["files"][1]);
        let got = (fa["cached"].as_u64(), fb["cached"].as_u64());
        if got != (Some(ca.cached), Some(cb.cached)) {
            return Err(format!("stat {got:?}, cachestat {ca:?} {cb:?}"));
        }
        assert_eq!(fa["source"], "cachestat");
        assert_eq!(fa["size_bytes"], 16 * MIB as u64);
        assert_eq!(fa["pages"], 16 * MIB as u64 / PAGE);
        assert_eq!(fb["pages"], (3 * MIB as u64 + 1).div_ceil(PAGE));
        assert_eq!(fa["evicted"], ca.evicted.unwrap());
        assert_eq!(fa["dirty"], 0);
        assert_eq!(v["total"]["files"], 2);
        assert_eq!(v["total"]["cached"], ca.cached + cb.cached);
        assert_eq!(v["page_size"], PAGE);
        Ok(())
    });
}

#[test]
fn stat_counts_dirty_pages() {
    let dir = workdir();
    let path = dir.path().join("dirty");
    std::fs::write(&path, vec![1u8; 2 * MIB]).unwrap();
    let v = json(&run(&[&"stat", &"--json", &path]));
    let cs = count(&path);
    // Writeback may start between the two looks; dirty + writeback cannot grow.
    let seen =
        v["files"][0]["dirty"].as_u64().unwrap() + v["files"][0]["writeback"].as_u64().unwrap();
    assert!(seen >= cs.dirty.unwrap() + cs.writeback.unwrap(), "{v}");
    assert!(seen > 0, "fresh writes not seen as dirty: {v}");
}

#[test]
fn stat_table_shows_human_sizes_percent_and_the_source() {
    let dir = workdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_cold(&a, &vec![0x5a; 8 * MIB]);
    write_cold(&b, &vec![0x5a; MIB]);
    let out = run(&[&"stat", &a, &b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "SIZE",
        "CACHED",
        "%",
        "DIRTY",
        "EVICTED",
        "8.0 MiB",
        "total (2 files)",
        "cachestat()",
    ] {
        assert!(text.contains(want), "no {want:?} in\n{text}");
    }
}

#[test]
fn stat_r_walks_a_tree_without_following_symlinks() {
    let dir = workdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("x/y")).unwrap();
    write_cold(&tree.join("one"), &vec![0x5a; MIB]);
    write_cold(&tree.join("x/y/two"), &vec![0x5a; 2 * MIB]);
    let outside = dir.path().join("outside");
    write_cold(&outside, &vec![0x5a; 4 * MIB]);
    std::os::unix::fs::symlink(&outside, tree.join("link")).unwrap();
    ubio::sys::mkfifo(&tree.join("fifo"), 0o600).unwrap();
    let v = json(&run(&[&"stat", &"-r", &"--json", &tree]));
    assert_eq!(v["total"]["files"], 2, "{v}");
    assert_eq!(v["total"]["size_bytes"], 3 * MIB as u64);
    let out = run(&[&"stat", &tree]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is a directory (use -r)"));
}

/// As an unprivileged user cachestat() says EPERM for a file that user cannot
/// write: stat falls back to mincore() and says its count is an upper bound.
#[test]
fn stat_of_an_unwritable_file_says_mincore_and_why() {
    if !root_or_skip("stat_of_an_unwritable_file_says_mincore_and_why") {
        return;
    }
    let dir = workdir();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let path = dir.path().join("ro");
    write_cold(&path, &vec![0x5a; MIB]);
    std::fs::set_permissions(&path, PermissionsExt::from_mode(0o644)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = ubio()
        .args(["stat", "--json"])
        .arg(&path)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let v = json(&out);
    let f = &v["files"][0];
    assert_eq!(f["source"], "mincore", "{v}");
    assert!(f["dirty"].is_null());
    assert!(
        f["note"].as_str().unwrap().contains("every page resident"),
        "{v}"
    );
}

#[test]
fn evict_drops_clean_pages_and_prints_before_and_after() {
    let dir = workdir();
    let path = dir.path().join("f");
    write_cold(&path, &vec![0x5a; 8 * MIB]);
    read_prefix(&path, 8 * MIB);
    let before = count(&path).cached;
    assert!(before > 0);
    let v = json(&run(&[&"evict", &"--json", &path]));
    let f = &v["files"][0];
    assert!(f["before"]["cached"].as_u64().unwrap() <= before, "{v}");
    assert!(f["before"]["cached"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(f["after"]["cached"], 0, "{v}");
    assert_eq!(count(&path).cached, 0);
    assert_eq!(v["total_after"]["cached"], 0);
    read_prefix(&path, MIB);
    let out = run(&[&"evict", &path]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("BEFORE") && text.contains("AFTER"), "{text}");
}

/// Freshly written pages are dirty and cannot be dropped; --sync writes them
/// back first, so they go.
#[test]
fn evict_sync_drops_a_freshly_written_file() {
    let dir = workdir();
    let path = dir.path().join("fresh");
    std::fs::write(&path, vec![7u8; 16 * MIB]).unwrap();
    let v = json(&run(&[&"evict", &"--sync", &"--json", &path]));
    let f = &v["files"][0];
    assert!(f["before"]["cached"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(f["after"]["cached"], 0, "{v}");
    assert_eq!(f["after"]["dirty"], 0, "{v}");
    assert_eq!(count(&path).cached, 0);
}

#[test]
fn evict_r_empties_a_tree() {
    let dir = workdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    for (name, len) in [("a", MIB), ("sub/b", 2 * MIB)] {
        write_cold(&tree.join(name), &vec![0x5a; len]);
        read_prefix(&tree.join(name), len);
    }
    let v = json(&run(&[&"evict", &"-r", &"--json", &tree]));
    assert_eq!(v["total_before"]["files"], 2);
    assert_eq!(v["total_after"]["cached"], 0, "{v}");
}

/// On tmpfs the cached pages are the file: evict says so and fails.
#[test]
fn evict_on_tmpfs_says_the_pages_are_storage() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"in memory").unwrap();
    let out = run(&[&"evict", &path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("on tmpfs the cached pages are the file's storage"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(&path).cached, 1);
}

#[test]
fn a_missing_path_is_named_and_the_others_go_on() {
    let dir = workdir();
    let path = dir.path().join("here");
    write_cold(&path, &vec![0x5a; MIB]);
    let missing = dir.path().join("missing");
    for cmd in ["stat", "evict"] {
        let out = run(&[&cmd, &"--json", &missing, &path]);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        assert!(
            stderr(&out).contains(&format!(
                "ubio {cmd}: cannot stat '{}': No such file or directory",
                missing.display()
            )),
            "{cmd}: {}",
            stderr(&out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["files"].as_array().unwrap().len(), 1, "{cmd}: {v}");
    }
}

/// `ubio stat -r ... | head`: a closed pipe ends the output quietly.
#[test]
fn stat_into_a_closed_pipe_exits_zero() {
    let dir = workdir();
    for i in 0..2000 {
        std::fs::write(dir.path().join(format!("f{i}")), b"x").unwrap();
    }
    let (_, out) = head_then_close(ubio().args(["stat", "-r"]).arg(dir.path()), 0);
    assert_quiet_success(&out);
}

/// Through an overlay, stat counts and evict drops the pages of the real
/// file (the lower one after a read, the upper one after a write): the
/// overlay inode's own mapping is always empty.
#[test]
fn stat_and_evict_through_overlay_act_on_the_real_file() {
    if !root_or_skip("stat_and_evict_through_overlay") {
        return;
    }
    let parent = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"));
    let o = ubio_testenv::stackfs::Overlay::mount(parent).unwrap();
    let (merged, lower) = (o.mnt.join("f"), o.lower.join("f"));
    write_cold(&lower, &data(16 * MIB, 3));
    with_damon_retries("stat through overlay", || {
        read_prefix(&merged, 16 * MIB);
        let cached = count(&lower).cached;
        let v = json(&run(&[&"stat", &"--json", &merged]));
        let f = &v["files"][0];
        assert_eq!(f["real_file"].as_str(), Some(lower.to_str().unwrap()));
        let reported = f["cached"].as_u64().unwrap();
        // The reader left the whole lower file cached; stat saw it, not 0.
        if cached < 4096 || reported.abs_diff(cached) > 64 {
            return Err(format!(
                "lower file: {cached} pages cached, stat said {reported}"
            ));
        }
        Ok(())
    });
    json(&run(&[&"evict", &"--json", &merged]));
    assert_eq!(count(&lower).cached, 0, "evict left the lower file cached");

    // A write goes to the upper file (dirty): evict --sync writes it back and drops it.
    std::fs::write(o.mnt.join("w"), data(8 * MIB, 4)).unwrap();
    let upper = o.upper.join("w");
    assert!(
        count(&upper).cached >= 2048,
        "control: the write is not cached"
    );
    let v = json(&run(&[&"evict", &"--sync", &"--json", &o.mnt.join("w")]));
    assert_eq!(v["files"][0]["after"]["real_file"].as_str(), upper.to_str());
    assert_eq!(
        count(&upper).cached,
        0,
        "evict --sync left the upper file cached"
    );
}

/// Through an overlay whose layers cannot be found (hidden from this mount
/// namespace), stat and evict take the stream's fallback: mincore() of the
/// overlay's mapping sees the real file's pages and fadvise is forwarded.
#[test]
fn stat_and_evict_through_a_hidden_overlay_use_the_fallback() {
    if !root_or_skip("stat_and_evict_through_a_hidden_overlay") {
        return;
    }
    let parent = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"));
    let o = ubio_testenv::stackfs::Overlay::mount_hidden(parent).unwrap();
    let merged = o.mnt.join("f");
    std::fs::write(&merged, data(16 * MIB, 5)).unwrap();
    with_damon_retries("stat through a hidden overlay", || {
        read_prefix(&merged, 16 * MIB);
        let v = json(&run(&[&"stat", &"--json", &merged]));
        let f = &v["files"][0];
        assert_eq!(f["source"], "mincore", "{f}");
        assert!(f["real_file"].is_null(), "{f}");
        match f["cached"].as_u64().unwrap() {
            c if c >= 4096 - 64 => Ok(()),
            c => Err(format!("stat said {c} pages cached after a full read")),
        }
    });
    let v = json(&run(&[&"evict", &"--sync", &"--json", &merged]));
    let after = &v["files"][0]["after"];
    assert_eq!(after["cached"].as_u64(), Some(0), "{v}");
}
