//! The fixtures make and remove what they promise: scratch filesystems of each
//! kind, memory cgroups, the fault devices; and they clean up after a panic and
//! on SIGTERM/SIGINT.
//!
//! Needs root and mkfs.{ext4,xfs,btrfs} (scripts/install-deps.sh); otherwise a
//! test prints `SKIP <name>: <reason>` and returns. With UBIO_NO_SKIP=1 (set by
//! scripts/test.sh when run as root) a skip is a failure instead.
//!
//! Run serially (`--test-threads=1`): the tests use loop devices and the page
//! cache, and the signal tests count on a quiet machine.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ubio_testenv::cgroup::{own_memory_cgroup, MemCgroup};
use ubio_testenv::scratchfs::{is_mounted, FsKind, ScratchFs, ScratchOpts, BTRFS_MIXED_BELOW};
use ubio_testenv::{is_root, require_tool, skip};

const MIB: u64 = 1 << 20;

/// Whether `name` can run here; prints `SKIP` (or panics under
/// UBIO_NO_SKIP=1) when root, a tool or the memory cgroup is missing.
fn can_run(name: &str, tools: &[&str], needs_cgroup: bool) -> bool {
    let reason = if !is_root() {
        Some("needs root (loop devices, mounts, cgroups)".to_owned())
    } else if let Some(e) = tools.iter().find_map(|t| require_tool(t).err()) {
        Some(e.to_string())
    } else if needs_cgroup {
        own_memory_cgroup().err().map(|e| e.to_string())
    } else {
        None
    };
    let Some(reason) = reason else { return true };
    skip(name, &reason);
    false
}

/// Every loop device's backing file (`losetup --list`), one per line.
fn all_loop_backing_files() -> String {
    let out = Command::new(require_tool("losetup").unwrap())
        .args(["--list", "--noheadings", "--output", "BACK-FILE"])
        .output()
        .expect("run losetup --list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn losetup_j(file: &Path) -> String {
    let out = Command::new(require_tool("losetup").unwrap())
        .arg("-j")
        .arg(file)
        .output()
        .expect("run losetup -j");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The filesystem type mounted at `mp`, from /proc/self/mountinfo.
fn mounted_type(mp: &Path) -> Option<String> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (left.split(' ').nth(4)? == mp.to_str()?)
            .then(|| right.split(' ').next().unwrap().to_owned())
    })
}

/// What a scratch filesystem leaves to check once it is gone.
struct Traces {
    mount_point: PathBuf,
    backing_file: Option<PathBuf>,
    /// The loop device and what /sys said it was attached to.
    loop_dev: Option<(PathBuf, String)>,
    container: Option<PathBuf>,
}

/// /sys/block/loopN/loop/backing_file, or "" once detached.
fn sys_backing_file(dev: &Path) -> String {
    let name = dev.file_name().unwrap().to_str().unwrap();
    fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).unwrap_or_default()
}

impl Traces {
    fn of(fs: &ScratchFs) -> Traces {
        Traces {
            mount_point: fs.mount_point().to_owned(),
            backing_file: fs.backing_file().map(Path::to_owned),
            loop_dev: fs
                .loop_device()
                .map(|d| (d.to_owned(), sys_backing_file(d))),
            container: fs
                .backing_file()
                .and_then(|f| f.parent())
                .map(Path::to_owned),
        }
    }

    fn assert_gone(&self) {
        assert!(
            !is_mounted(&self.mount_point),
            "{} still mounted",
            self.mount_point.display()
        );
        assert!(
            !self.mount_point.exists(),
            "{} still exists",
            self.mount_point.display()
        );
        if let Some(file) = &self.backing_file {
            assert_eq!(
                losetup_j(file),
                "",
                "loop device still attached to {}",
                file.display()
            );
            let all = all_loop_backing_files();
            assert!(
                !all.lines().any(|l| Path::new(l.trim()) == file),
                "{} still backs a loop device:\n{all}",
                file.display()
            );
            assert!(!file.exists(), "{} still exists", file.display());
        }
        if let Some(dir) = &self.container {
            assert!(!dir.exists(), "{} still exists", dir.display());
        }
        if let Some((dev, was)) = &self.loop_dev {
            assert!(!was.is_empty(), "{} had no backing file", dev.display());
            // The number may already serve another test's device; ours is gone
            // if it no longer names our backing file.
            assert_ne!(
                &sys_backing_file(dev),
                was,
                "{} still attached",
                dev.display()
            );
        }
    }
}

/// Writes `len` bytes of a pattern to `path`, fsyncs, reads them back.
fn write_and_verify(path: &Path, len: usize) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut f = File::create(path).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    let mut back = Vec::new();
    File::open(path).unwrap().read_to_end(&mut back).unwrap();
    assert!(
        back == data,
        "data read back from {} differs",
        path.display()
    );
}

fn scratch_round_trip(name: &str, kind: FsKind, size: u64) {
    if !can_run(name, &[kind.mkfs_tool(), "losetup"], false) {
        return;
    }
    let fs = ScratchFs::create(kind, size, &ScratchOpts::default()).unwrap();
    let traces = Traces::of(&fs);
    assert!(is_mounted(fs.mount_point()));
    assert_eq!(mounted_type(fs.mount_point()).as_deref(), Some(kind.name()));
    let backing = fs.backing_file().unwrap();
    assert!(backing.exists());
    let dev = fs.loop_device().unwrap();
    assert!(
        losetup_j(backing).contains(dev.to_str().unwrap()),
        "losetup -j {}",
        backing.display()
    );
    let (major, _) = fs.dev_numbers().unwrap();
    assert_eq!(major, 7, "loop devices have major 7");
    eprintln!(
        "{name}: {} on {} (direct I/O {:?})",
        kind,
        dev.display(),
        fs.direct_io()
    );
    write_and_verify(&fs.mount_point().join("data"), 3 * MIB as usize + 123);
    drop(fs);
    traces.assert_gone();
}

#[test]
fn ext4_scratch_is_created_and_removed() {
    scratch_round_trip(
        "ext4_scratch_is_created_and_removed",
        FsKind::Ext4,
        64 * MIB,
    );
}

#[test]
fn xfs_scratch_is_created_and_removed() {
    scratch_round_trip(
        "xfs_scratch_is_created_and_removed",
        FsKind::Xfs,
        FsKind::Xfs.min_size_bytes(),
    );
}

#[test]
fn btrfs_scratch_is_created_and_removed() {
    scratch_round_trip(
        "btrfs_scratch_is_created_and_removed",
        FsKind::Btrfs,
        BTRFS_MIXED_BELOW,
    );
}

#[test]
fn small_btrfs_uses_mixed_mode() {
    scratch_round_trip(
        "small_btrfs_uses_mixed_mode",
        FsKind::Btrfs,
        FsKind::Btrfs.min_size_bytes(),
    );
}

#[test]
fn scratch_in_shm_is_created_and_removed() {
    let name = "scratch_in_shm_is_created_and_removed";
    if !can_run(name, &["mkfs.ext4", "losetup"], false) {
        return;
    }
    let fs = ScratchFs::create(FsKind::Ext4, 32 * MIB, &ScratchOpts::in_shm()).unwrap();
    let traces = Traces::of(&fs);
    assert!(fs.backing_file().unwrap().starts_with("/dev/shm"));
    write_and_verify(&fs.mount_point().join("data"), MIB as usize);
    drop(fs);
    traces.assert_gone();
}

#[test]
fn tmpfs_scratch_is_created_and_removed() {
    if !can_run("tmpfs_scratch_is_created_and_removed", &["mount"], false) {
        return;
    }
    let fs = ScratchFs::tmpfs(16 * MIB).unwrap();
    let traces = Traces::of(&fs);
    assert_eq!(mounted_type(fs.mount_point()).as_deref(), Some("tmpfs"));
    assert!(fs.loop_device().is_none() && fs.dev_numbers().is_none());
    write_and_verify(&fs.mount_point().join("data"), MIB as usize);
    // The size limit holds: 17 MiB does not fit.
    let mut f = File::create(fs.mount_point().join("big")).unwrap();
    let err = f.write_all(&vec![1u8; 17 * MIB as usize]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    drop(f);
    drop(fs);
    traces.assert_gone();
}

#[test]
fn too_small_xfs_is_refused_with_the_minimum() {
    if !can_run(
        "too_small_xfs_is_refused_with_the_minimum",
        &["mkfs.xfs"],
        false,
    ) {
        return;
    }
    let err = ScratchFs::create(FsKind::Xfs, 100 * MIB, &ScratchOpts::default()).unwrap_err();
    assert!(err.to_string().contains("at least 300 MiB"), "{err}");
}

/// Writes `len` bytes to a new file under `dir` and fsyncs; the first error.
fn write_fsync(path: &Path, len: usize) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let chunk = vec![0x5au8; MIB as usize];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len());
        f.write_all(&chunk[..n])?;
        left -= n;
    }
    f.sync_all()
}

/// An EIO fixture of `kind` with 1 MiB fsynced in `before`, then writes
/// made to fail: the error of the fsync of 4 MiB more in `after`.
fn failed_eio_fs(kind: FsKind) -> (ScratchFs, Traces, io::Error) {
    let fs = ScratchFs::create_eio(kind, kind.min_size_bytes().max(64 * MIB)).unwrap();
    let traces = Traces::of(&fs);
    write_fsync(&fs.mount_point().join("before"), MIB as usize)
        .expect("writes work before fail_writes");
    fs.fail_writes().unwrap();
    let err = write_fsync(&fs.mount_point().join("after"), 4 * MIB as usize)
        .expect_err("fsync after fail_writes");
    (fs, traces, err)
}

fn eio_after_fail_writes(name: &str, kind: FsKind) {
    if !can_run(name, &[kind.mkfs_tool(), "losetup"], false) {
        return;
    }
    let (fs, traces, err) = failed_eio_fs(kind);
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EIO),
        "{kind}: expected EIO, got {err}"
    );
    drop(fs);
    traces.assert_gone();
}

#[test]
fn eio_fixture_fails_ext4_fsync_with_eio() {
    eio_after_fail_writes("eio_fixture_fails_ext4_fsync_with_eio", FsKind::Ext4);
}

#[test]
fn eio_fixture_fails_xfs_fsync_with_eio() {
    eio_after_fail_writes("eio_fixture_fails_xfs_fsync_with_eio", FsKind::Xfs);
}

#[test]
fn eio_fixture_fails_btrfs_fsync_with_eio() {
    eio_after_fail_writes("eio_fixture_fails_btrfs_fsync_with_eio", FsKind::Btrfs);
}

/// After the fault the filesystem may refuse to read (ext4 from 6.12 shuts
/// down once its journal aborted: every open fails with EIO); a copy of its
/// device, mounted, still has what was fsynced before.
fn copy_of_failed_disk_has_the_synced_data(name: &str, kind: FsKind) {
    if !can_run(name, &[kind.mkfs_tool(), "losetup"], false) {
        return;
    }
    let (fs, traces, _) = failed_eio_fs(kind);
    // The journal's commit fails too (ext4 aborts it).
    let _ = Command::new("sync")
        .arg("-f")
        .arg(fs.mount_point())
        .status();
    match fs::read(fs.mount_point().join("before")) {
        Ok(_) => eprintln!("{name}: {kind} still reads after the fault"),
        Err(e) => eprintln!("{name}: {kind} no longer reads after the fault: {e}"),
    }
    let copy = fs.copy_of_disk().unwrap();
    let copy_traces = Traces::of(&copy);
    assert_eq!(
        fs::read(copy.mount_point().join("before")).unwrap(),
        vec![0x5au8; MIB as usize],
        "{kind}: the copy of the disk holds the fsynced file"
    );
    drop(copy);
    copy_traces.assert_gone();
    drop(fs);
    traces.assert_gone();
}

#[test]
fn copy_of_failed_ext4_disk_has_the_synced_data() {
    copy_of_failed_disk_has_the_synced_data(
        "copy_of_failed_ext4_disk_has_the_synced_data",
        FsKind::Ext4,
    );
}

#[test]
fn copy_of_failed_xfs_disk_has_the_synced_data() {
    copy_of_failed_disk_has_the_synced_data(
        "copy_of_failed_xfs_disk_has_the_synced_data",
        FsKind::Xfs,
    );
}

#[test]
fn copy_of_disk_is_refused_for_btrfs_and_other_fixtures() {
    let name = "copy_of_disk_is_refused_for_btrfs_and_other_fixtures";
    if !can_run(name, &["mkfs.btrfs", "mkfs.ext4", "losetup"], false) {
        return;
    }
    let btrfs = ScratchFs::create_eio(FsKind::Btrfs, FsKind::Btrfs.min_size_bytes()).unwrap();
    let err = btrfs.copy_of_disk().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("btrfs"), "{err}");
    let plain = ScratchFs::create(FsKind::Ext4, 32 * MIB, &ScratchOpts::default()).unwrap();
    let err = plain.copy_of_disk().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err}");
}

#[test]
fn fail_writes_needs_the_eio_fixture() {
    if !can_run("fail_writes_needs_the_eio_fixture", &["mount"], false) {
        return;
    }
    let fs = ScratchFs::tmpfs(MIB).unwrap();
    assert_eq!(
        fs.fail_writes().unwrap_err().kind(),
        io::ErrorKind::Unsupported
    );
}

#[test]
fn enospc_fixture_fails_fsync_once_the_room_is_used() {
    let name = "enospc_fixture_fails_fsync_once_the_room_is_used";
    if !can_run(name, &["mkfs.ext4", "losetup"], false) {
        return;
    }
    let fs = ScratchFs::create_enospc(FsKind::Ext4, 256 * MIB, 32 * MIB).unwrap();
    let traces = Traces::of(&fs);
    write_fsync(&fs.mount_point().join("small"), MIB as usize).expect("1 MiB fits in the room");
    let err = write_fsync(&fs.mount_point().join("big"), 64 * MIB as usize)
        .expect_err("64 MiB exceeds a 32 MiB room");
    // The loop device reports the backing tmpfs's ENOSPC as BLK_STS_NOSPC,
    // which ext4 passes on unchanged (see scratchfs's module docs).
    assert_eq!(
        err.raw_os_error(),
        Some(libc::ENOSPC),
        "expected ENOSPC, got {err}"
    );
    drop(fs);
    traces.assert_gone();
}

#[test]
fn a_full_device_recovers_with_its_synced_data() {
    let name = "a_full_device_recovers_with_its_synced_data";
    if !can_run(name, &["mkfs.btrfs", "losetup"], false) {
        return;
    }
    let fs = ScratchFs::create_enospc(FsKind::Btrfs, 256 * MIB, 64 * MIB).unwrap();
    let traces = Traces::of(&fs);
    let kept = fs.mount_point().join("kept");
    write_fsync(&kept, 4 * MIB as usize).expect("4 MiB fits in the room");
    write_fsync(&fs.mount_point().join("big"), 128 * MIB as usize)
        .expect_err("128 MiB exceeds a 64 MiB room");
    fs.recover().unwrap();
    // Mounted again, with room: the synced file is there, and writes work.
    assert_eq!(fs::read(&kept).unwrap().len(), 4 * MIB as usize);
    write_fsync(&fs.mount_point().join("after"), 64 * MIB as usize)
        .expect("the device has room again");
    drop(fs);
    traces.assert_gone();
}

#[test]
fn write_throttle_is_set_and_reset() {
    let name = "write_throttle_is_set_and_reset";
    if !can_run(name, &["mkfs.ext4", "losetup"], false) {
        return;
    }
    let rules = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";
    if !Path::new(rules).exists() {
        skip(name, &format!("{rules} not found (needs cgroup v1 blkio)"));
        return;
    }
    let fs = ScratchFs::create(FsKind::Ext4, 32 * MIB, &ScratchOpts::default()).unwrap();
    let (maj, min) = fs.dev_numbers().unwrap();
    let rule = format!("{maj}:{min} {}", 8 * MIB);
    fs.set_write_bps(8 * MIB).unwrap();
    assert!(
        fs::read_to_string(rules)
            .unwrap()
            .lines()
            .any(|l| l == rule),
        "{rule} not in {rules}"
    );
    drop(fs);
    let after = fs::read_to_string(rules).unwrap();
    assert!(
        !after
            .lines()
            .any(|l| l.starts_with(&format!("{maj}:{min} "))),
        "rule left behind: {after}"
    );
}

#[test]
fn memory_cgroup_is_made_under_ours_and_removed() {
    if !can_run("memory_cgroup_is_made_under_ours_and_removed", &[], true) {
        return;
    }
    let own = own_memory_cgroup().unwrap();
    let cg = MemCgroup::create("ubio-test", 64 * MIB).unwrap();
    let path = cg.path().to_owned();
    assert_eq!(path.parent(), Some(own.as_path()));
    assert!(path.is_dir());
    assert_eq!(cg.limit_bytes(), 64 * MIB);
    let limit_file = match cg.version() {
        ubio_testenv::cgroup::CgroupVersion::V1 => "memory.limit_in_bytes",
        ubio_testenv::cgroup::CgroupVersion::V2 => "memory.max",
    };
    assert_eq!(
        fs::read_to_string(path.join(limit_file)).unwrap().trim(),
        (64 * MIB).to_string()
    );
    assert!(cg.procs().unwrap().is_empty());
    cg.usage_bytes().unwrap();
    let stat = cg.memory_stat().unwrap();
    assert!(
        stat.contains_key("cache") || stat.contains_key("file"),
        "memory.stat: {stat:?}"
    );
    drop(cg);
    assert!(!path.exists(), "{} still exists", path.display());
}

#[test]
fn child_runs_inside_the_memory_cgroup() {
    if !can_run("child_runs_inside_the_memory_cgroup", &["cat"], true) {
        return;
    }
    let cg = MemCgroup::create("ubio-test", 64 * MIB).unwrap();
    let own = own_memory_cgroup().unwrap();
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/self/cgroup").stdout(Stdio::piped());
    let out = cg.spawn(&mut cmd).unwrap().wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let name = cg.path().file_name().unwrap().to_str().unwrap();
    let line = text
        .lines()
        .find(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "memory"))
                || l.starts_with("0::")
        })
        .unwrap_or_else(|| panic!("no memory line in {text}"));
    assert!(
        line.ends_with(&format!("/{name}")),
        "child's cgroup line {line:?} is not {name}"
    );
    // And we ourselves did not move.
    assert_eq!(own_memory_cgroup().unwrap(), own);
}

/// `mib` MiB of `byte`, durable and dropped from the page cache.
fn write_cold(path: &Path, mib: usize, byte: u8) {
    use std::os::fd::AsFd;
    let f = File::create(path).unwrap();
    let mut w = std::io::BufWriter::new(&f);
    for _ in 0..mib {
        w.write_all(&[byte; MIB as usize]).unwrap();
    }
    drop(w);
    f.sync_all().unwrap();
    ubio::sys::fadvise(f.as_fd(), 0, 0, ubio::sys::Advice::DontNeed).unwrap();
}

/// Reads `file` with dd inside a new 32 MiB memory cgroup; the cgroup, for
/// its figures.
fn dd_in_a_32m_cgroup(file: &Path) -> MemCgroup {
    let cg = MemCgroup::create("ubio-test", 32 * MIB).unwrap();
    let mut cmd = Command::new("dd");
    cmd.args(["of=/dev/null", "bs=1M", "status=none"])
        .arg(format!("if={}", file.display()));
    let status = cg.spawn(&mut cmd).unwrap().wait().unwrap();
    assert!(status.success(), "dd in a 32 MiB cgroup: {status}");
    cg
}

#[test]
fn memory_limit_caps_a_childs_page_cache() {
    if !can_run(
        "memory_limit_caps_a_childs_page_cache",
        &["dd", "mkfs.ext4"],
        true,
    ) {
        return;
    }
    let fs = ScratchFs::create(FsKind::Ext4, 128 * MIB, &ScratchOpts::default()).unwrap();
    // The file is written here, outside the cgroup, and read cold inside it:
    // clean page cache is reclaimed at the limit. (Writing 64 MiB of dirty
    // pages inside a 32 MiB cgroup v1 can end in the OOM killer instead:
    // v1 throttles dirty pages per cgroup poorly.)
    let file = fs.mount_point().join("f");
    write_cold(&file, 64, 7);
    let cg = dd_in_a_32m_cgroup(&file);
    let peak = cg.peak_bytes().unwrap();
    assert!(peak <= 32 * MIB, "peak {peak} above the 32 MiB limit");
    assert!(
        peak >= 8 * MIB,
        "peak {peak}: the page cache was not charged here"
    );
}

/// The cgroup limit's reclaim, invisible in /proc/vmstat, is counted by
/// the tracepoint, and the trace instance goes away afterwards.
#[test]
fn memcg_reclaim_is_traced_and_the_instance_removed() {
    if !can_run(
        "memcg_reclaim_is_traced_and_the_instance_removed",
        &["dd"],
        true,
    ) {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("f");
    write_cold(&file, 128, 3);
    // The instance a killed benchmark left (its pid gone: above pid_max),
    // made through the system's tracefs place (mounted for the test where
    // nothing is: every tracefs mount shows the same instances).
    let system = ubio_testenv::tracefs::system().unwrap();
    let orphan = Path::new(ubio_testenv::tracefs::SYSTEM).join("instances/ubio-bench-4294967295-0");
    std::fs::create_dir(&orphan).unwrap();
    let trace = ubio_testenv::reclaim_trace::MemcgReclaimTrace::start().unwrap();
    let instance = trace.instance().to_path_buf();
    assert!(instance.is_dir(), "{}", instance.display());
    assert!(
        !orphan.exists(),
        "the orphan instance {} stayed",
        orphan.display()
    );
    drop(system);
    let _cg = dd_in_a_32m_cgroup(&file);
    std::thread::sleep(std::time::Duration::from_millis(100));
    // 128 MiB through a 32 MiB limit: at least 64 MiB must have been reclaimed.
    let pages = trace.reclaimed_pages();
    assert!(
        pages >= 64 * MIB / 4096,
        "{pages} pages reclaimed, {} passes",
        trace.events()
    );
    drop(trace);
    assert!(!instance.exists(), "{} left behind", instance.display());
}

#[test]
fn drop_kills_a_spawned_child_still_inside() {
    if !can_run("drop_kills_a_spawned_child_still_inside", &["sleep"], true) {
        return;
    }
    let cg = MemCgroup::create("ubio-test", 64 * MIB).unwrap();
    let path = cg.path().to_owned();
    let mut child = cg.spawn(Command::new("sleep").arg("30")).unwrap();
    assert_eq!(cg.procs().unwrap(), vec![child.id()]);
    drop(cg);
    assert!(!path.exists());
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
}

#[test]
fn panic_inside_a_scope_still_cleans_up() {
    let name = "panic_inside_a_scope_still_cleans_up";
    if !can_run(name, &["mkfs.ext4", "losetup"], true) {
        return;
    }
    let seen = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let fs = ScratchFs::create(FsKind::Ext4, 32 * MIB, &ScratchOpts::default()).unwrap();
        let cg = MemCgroup::create("ubio-test", 64 * MIB).unwrap();
        *seen.lock().unwrap() = Some((Traces::of(&fs), cg.path().to_owned()));
        panic!("deliberate panic with a scratch filesystem and a cgroup alive");
    });
    assert!(result.is_err());
    let (traces, cg_path) = seen.into_inner().unwrap().expect("fixtures were made");
    traces.assert_gone();
    assert!(!cg_path.exists(), "{} still exists", cg_path.display());
}

/// Not a test: the process the signal tests start and kill. It makes an ext4
/// scratch filesystem, a tmpfs and a memory cgroup, says where, and waits.
#[test]
#[ignore = "helper process for the signal tests"]
fn signal_helper() {
    if std::env::var_os("UBIO_SIGNAL_HELPER").is_none() {
        return;
    }
    let fs = ScratchFs::create(FsKind::Ext4, 32 * MIB, &ScratchOpts::default()).unwrap();
    let tmp = ScratchFs::tmpfs(MIB).unwrap();
    let cg = MemCgroup::create("ubio-test", 64 * MIB).unwrap();
    println!(
        "\nREADY {} {} {} {}",
        fs.mount_point().display(),
        fs.backing_file().unwrap().display(),
        tmp.mount_point().display(),
        cg.path().display()
    );
    io::stdout().flush().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
    panic!("signal_helper was not killed within 60 s");
}

fn signal_cleans_up(name: &str, signal: i32) {
    if !can_run(name, &["mkfs.ext4", "losetup"], true) {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "signal_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("UBIO_SIGNAL_HELPER", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("READY ") {
            ready = Some(rest.split(' ').map(PathBuf::from).collect::<Vec<_>>());
            break;
        }
    }
    let Some(paths) = ready else {
        let status = child.wait().unwrap();
        panic!("signal_helper exited ({status}) without saying READY");
    };
    let [mount_point, backing, tmpfs, cgroup] = &paths[..] else {
        panic!("READY line: {paths:?}")
    };
    assert!(is_mounted(mount_point) && is_mounted(tmpfs) && cgroup.exists());
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let status = child.wait().unwrap();
    // The cleanup re-raises the signal once the fixtures are gone, so the
    // process dies of it as it would have without a handler.
    assert_eq!(
        status.signal(),
        Some(signal),
        "exit status after signal {signal}: {status}"
    );
    Traces {
        mount_point: mount_point.clone(),
        backing_file: Some(backing.clone()),
        loop_dev: None,
        container: backing.parent().map(Path::to_owned),
    }
    .assert_gone();
    assert!(
        !is_mounted(tmpfs) && !tmpfs.exists(),
        "{} left behind",
        tmpfs.display()
    );
    assert!(!cgroup.exists(), "{} left behind", cgroup.display());
}

#[test]
fn sigterm_removes_fixtures_and_dies_of_it() {
    signal_cleans_up("sigterm_removes_fixtures_and_dies_of_it", libc::SIGTERM);
}

#[test]
fn sigint_removes_fixtures_and_dies_of_it() {
    signal_cleans_up("sigint_removes_fixtures_and_dies_of_it", libc::SIGINT);
}
