//! `ubio-diskfault`: the disk fails below the filesystem in the middle of a
//! stream, and the error must reach the caller with the file named, while
//! what was flushed before stays intact once the disk is healed.
//!
//! The filesystem lives on a device-mapper device whose table is swapped
//! under it: `linear` (healthy), `linear` with an `error` segment over
//! blocks in the middle of a file (reads of them fail: a bad sector), or
//! `flakey` with `error_writes` (every write fails, reads work: a disk that
//! went bad). For each backend:
//! - read: a file's blocks in the middle fail; a `ubio::File` reading it
//!   (this program: the library), `ubio cat` and `ubio cp` (a copy of it
//!   elsewhere) each get EIO from the read that reaches them, with the file
//!   named, after the correct bytes before them; healed, it reads back whole;
//! - write: a `ubio::File` writes and fsyncs 16 MiB, writes on, the disk
//!   starts failing writes; the error comes back from a write, the flush or
//!   the close (the buffered backend, which manages nothing: from fsync),
//!   with the file named; `ubio cp` onto the failing disk fails naming its
//!   destination. Then healed, unmounted, mounted again (journal recovery),
//!   the fsynced 16 MiB read back intact, the copy holds nothing but its
//!   source's bytes (or zeroes where its blocks never got written), and the
//!   filesystem's checker runs.
//!
//! Linux with device-mapper (dm-flakey), root: the QEMU guest of
//! scripts/guest/run.sh (`UBIO_GUEST_DISKFAULT`). Prints one line per case,
//! `DISKFAULT <fs> <backend> <case>: ok|FAILED ...`.

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};
use ubio::BackendKind;
use ubio_fsx::guest::{self, check_fs, fs_bytes, mkfs, mount, pattern, Dm, Loop, SuiteArgs};
use ubio_testenv::faults;

#[derive(Parser)]
#[command(
    name = "ubio-diskfault",
    about = "disk read and write errors below the filesystem, mid-stream, for every backend"
)]
struct Args {
    #[command(flatten)]
    suite: SuiteArgs,
    /// MiB of each stream (at least 24: a write case fsyncs 16 MiB, writes
    /// 4 more, then fails).
    #[arg(long, default_value_t = 24)]
    mib: u64,
    #[arg(long, default_value_t = 31)]
    seed: u64,
}

const DEV: &str = "ubio-diskfault";
const MIB: u64 = 1 << 20;
/// What a write case writes and fsyncs before the disk fails.
const FLUSHED: u64 = 16 * MIB;

/// The faulty device with a filesystem on it, mounted; all of it undone
/// when dropped.
struct Disk {
    fs: String,
    sectors: u64,
    mnt: PathBuf,
    // Dropped in this order: unmounted (by Drop), the dm device, the loop.
    dm: Dm,
    lo: Loop,
    image: PathBuf,
}

impl Disk {
    fn new(a: &Args) -> Result<Disk> {
        let image = a.suite.work.join("disk.img");
        let size = fs_bytes(&a.suite.fs).max(2 * a.mib * MIB + 64 * MIB);
        let _ = std::fs::remove_file(&image);
        File::create(&image)?.set_len(size)?;
        let lo = Loop::attach(&image)?;
        let sectors = size / 512;
        let dm = Dm::create(DEV, &format!("0 {sectors} linear {} 0", lo.0))?;
        let mnt = a.suite.work.join("mnt");
        mkfs(&a.suite.fs, &dm.path())?;
        mount(&a.suite.fs, &dm.path(), &mnt)?;
        Ok(Disk {
            fs: a.suite.fs.clone(),
            sectors,
            mnt,
            dm,
            lo,
            image,
        })
    }

    fn healthy(&self) -> String {
        format!("0 {} linear {} 0", self.sectors, self.lo.0)
    }

    fn heal(&self) -> Result<()> {
        Ok(self.dm.swap(&self.healthy())?)
    }

    /// Reads of sectors `bad` fail (EIO); everything else works.
    fn bad_sectors(&self, bad: std::ops::Range<u64>) -> Result<()> {
        let lo = &self.lo.0;
        let table = format!(
            "0 {} linear {lo} 0\n{} {} error\n{} {} linear {lo} {}",
            bad.start,
            bad.start,
            bad.end - bad.start,
            bad.end,
            self.sectors - bad.end,
            bad.end
        );
        Ok(self.dm.swap(&table)?)
    }

    /// Every write fails (EIO), reads work.
    fn failing_writes(&self) -> Result<()> {
        let table = format!(
            "0 {} flakey {} 0 0 3600 1 error_writes",
            self.sectors, self.lo.0
        );
        Ok(self.dm.swap(&table)?)
    }

    /// Healed, unmounted and mounted again (journal recovery, as after a
    /// reboot), then `f` on the mount; then unmounted and checked.
    fn recover<T>(&self, f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
        self.heal()?;
        guest::umount(&self.mnt).context("unmount after the fault")?;
        mount(&self.fs, &self.dm.path(), &self.mnt).context("mount after healing")?;
        let out = f(&self.mnt);
        guest::umount(&self.mnt)?;
        check_fs(&self.fs, &self.dm.path()).context("the checker after recovery")?;
        mount(&self.fs, &self.dm.path(), &self.mnt)?;
        out
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = self.dm.swap(&self.healthy());
        let _ = guest::umount(&self.mnt);
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Drop the page cache (clean pages, and the buffer cache of the device):
/// the next read of the file goes to the disk.
fn drop_caches() -> Result<()> {
    Ok(std::fs::write("/proc/sys/vm/drop_caches", "3")?)
}

/// The error names `path` and is EIO (or EROFS: a journal that aborted
/// made the filesystem read-only).
fn check_error(e: &io::Error, path: &Path) -> Result<()> {
    ensure!(
        matches!(
            ubio::error::raw_os_error(e),
            Some(libc::EIO) | Some(libc::EROFS)
        ),
        "expected EIO, got: {e}"
    );
    ensure!(
        e.to_string().contains(&path.display().to_string()),
        "the error does not name the file: {e}"
    );
    Ok(())
}

/// A program's stderr on one line, for the case's verdict.
fn one_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr).trim().replace('\n', " | ")
}

/// A stderr message (of `ubio cat` / `ubio cp`) that names `path` and says
/// I/O error.
fn check_message(stderr: &str, path: &Path) -> Result<()> {
    ensure!(
        stderr.contains(&path.display().to_string()),
        "the message does not name {}: {stderr:?}",
        path.display()
    );
    ensure!(
        stderr.contains("Input/output error") || stderr.contains("Read-only file system"),
        "the message does not say I/O error: {stderr:?}"
    );
    Ok(())
}

/// A file of `len` bytes of `data` on the disk, durable, and the device
/// sectors holding its bytes `at..at + 64 KiB` (in one extent).
fn file_with_bad_middle(
    disk: &Disk,
    name: &str,
    data: &[u8],
) -> Result<(PathBuf, std::ops::Range<u64>, u64)> {
    let path = disk.mnt.join(name);
    let mut f = File::create(&path)?;
    f.write_all(data)?;
    f.sync_all()?;
    let extents = ubio::sys::fiemap(f.as_fd(), true)?;
    let at = (data.len() as u64 / 2) & !(MIB - 1);
    let len = 64 << 10;
    let e = extents
        .iter()
        .find(|e| e.logical <= at && at + len <= e.logical + e.length)
        .with_context(|| {
            format!(
                "no extent holds bytes {at}..{} of {}: {extents:?}",
                at + len,
                path.display()
            )
        })?;
    let start = (e.physical + (at - e.logical)) / 512;
    Ok((path, start..start + len / 512, at))
}

/// The read cases: a file whose middle blocks fail to read.
fn read_cases(a: &Args, disk: &Disk, backend: BackendKind, report: &mut Report) -> Result<()> {
    let data = pattern(a.seed, (a.mib * MIB) as usize + 333);
    let (path, bad, bad_at) = file_with_bad_middle(disk, &format!("read-{backend}"), &data)?;
    disk.bad_sectors(bad)?;

    report.case(&a.suite.fs, backend, "read (library)", || {
        drop_caches()?;
        let mut f = a.suite.open_options(backend).read(true).open(&path)?;
        let mut buf = vec![0u8; MIB as usize];
        let mut got = 0u64;
        let err = loop {
            match f.read(&mut buf) {
                Ok(0) => bail!("read all {got} bytes: the bad blocks at {bad_at} went unnoticed"),
                Ok(n) => {
                    ensure!(
                        buf[..n] == data[got as usize..got as usize + n],
                        "wrong bytes at {got}..{}",
                        got as usize + n
                    );
                    got += n as u64;
                }
                Err(e) => break e,
            }
        };
        check_error(&err, &path)?;
        // The direct backend reads in chunks of up to 8 MiB; the others
        // fail at the page.
        ensure!(
            got <= bad_at && got + 8 * MIB >= bad_at,
            "the error came at byte {got}, the bad blocks are at {bad_at}"
        );
        Ok(format!(
            "EIO from the read at byte {got} (bad blocks at {bad_at}): {err}"
        ))
    });

    report.case(&a.suite.fs, backend, "read (ubio cat)", || {
        drop_caches()?;
        let out_path = a.suite.work.join("cat.out");
        let out = a
            .suite
            .ubio_command()
            .args(["cat", "--backend", backend.name()])
            .arg(&path)
            .stdout(File::create(&out_path)?)
            .stderr(Stdio::piped())
            .output()?;
        let stderr = one_line(&out.stderr);
        let printed = std::fs::read(&out_path)?;
        std::fs::remove_file(&out_path)?;
        ensure!(
            !out.status.success(),
            "ubio cat exited 0 (printed {} bytes)",
            printed.len()
        );
        check_message(&stderr, &path)?;
        ensure!(
            data.starts_with(&printed) && printed.len() as u64 <= bad_at,
            "printed {} bytes, not a prefix of the file before byte {bad_at}",
            printed.len()
        );
        Ok(format!(
            "{}, {} correct bytes printed: {stderr}",
            out.status,
            printed.len()
        ))
    });

    report.case(&a.suite.fs, backend, "read (ubio cp)", || {
        drop_caches()?;
        let dst = a.suite.work.join("cp-from-bad.out");
        let out = a
            .suite
            .ubio_command()
            .args(["cp", "--backend", backend.name()])
            .arg(&path)
            .arg(&dst)
            .output()?;
        let stderr = one_line(&out.stderr);
        let copied = std::fs::read(&dst).unwrap_or_default();
        let _ = std::fs::remove_file(&dst);
        ensure!(!out.status.success(), "ubio cp exited 0");
        check_message(&stderr, &path)?;
        ensure!(
            copied.iter().zip(&data).all(|(c, d)| c == d || *c == 0) && copied.len() <= data.len(),
            "the copy ({} bytes) holds bytes its source does not",
            copied.len()
        );
        Ok(format!("{}: {stderr}", out.status))
    });

    report.case(&a.suite.fs, backend, "read (healed)", || {
        disk.heal()?;
        drop_caches()?;
        ensure!(std::fs::read(&path)? == data, "the file changed");
        Ok("the whole file reads back".into())
    });
    std::fs::remove_file(&path)?;
    Ok(())
}

fn write_case(a: &Args, disk: &Disk, backend: BackendKind) -> Result<String> {
    let data = pattern(a.seed + 1, (a.mib * MIB) as usize + 555);
    let path = disk.mnt.join(format!("write-{backend}"));
    let mut f = a
        .suite
        .open_options(backend)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    f.write_all(&data[..FLUSHED as usize])?;
    f.sync_all()?;
    // Some written and not flushed when the disk goes bad.
    f.write_all(&data[FLUSHED as usize..(FLUSHED + 4 * MIB) as usize])?;
    disk.failing_writes()?;
    let from = FLUSHED + 4 * MIB;
    let (err, call, at) = faults::write_until_error(f, from, data.len() as u64, |off, piece| {
        piece.copy_from_slice(&data[off as usize..off as usize + piece.len()])
    })
    .err()
    .with_context(|| format!("no error after writing {} bytes", data.len()))?;
    check_error(&err, &path)?;
    let name = path.file_name().unwrap().to_owned();
    let kept = disk.recover(|mnt| {
        let got = std::fs::read(mnt.join(&name))?;
        ensure!(
            got.len() >= FLUSHED as usize && got[..FLUSHED as usize] == data[..FLUSHED as usize],
            "the fsynced 16 MiB changed (the file holds {} bytes)",
            got.len()
        );
        ensure!(
            got.len() <= data.len() && got.iter().zip(&data).all(|(g, d)| g == d || *g == 0),
            "after the fsynced 16 MiB the file ({} bytes) holds bytes that were never written",
            got.len()
        );
        Ok(got.len())
    })?;
    Ok(format!(
        "{call} returned it after {} MiB: {err}; after recovery the file holds {} bytes: the fsynced 16 MiB intact, the rest data or zeroes; the checker clean",
        at / MIB, kept
    ))
}

/// Wait until every thread of process `pid` is stopped (a signal is
/// delivered when a thread next leaves the kernel: a write under way
/// completes first).
fn wait_stopped(pid: u32) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let stopped = |stat: &str| {
        // The state follows the command's closing parenthesis.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with(['T', 't']))
    };
    loop {
        let mut all = true;
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            let stat = std::fs::read_to_string(task?.path().join("stat")).unwrap_or_default();
            all &= stat.is_empty() || stopped(&stat);
        }
        if all {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "process {pid} not stopped after 30 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn cp_write_case(a: &Args, disk: &Disk, backend: BackendKind) -> Result<String> {
    let data = pattern(a.seed + 2, (a.mib * MIB) as usize + 777);
    let src = a.suite.work.join("cp-src");
    std::fs::write(&src, &data)?;
    let dst = disk.mnt.join(format!("cp-{backend}"));
    let mut child = a
        .suite
        .ubio_command()
        .args(["cp", "--backend", backend.name()])
        .arg(&src)
        .arg(&dst)
        .stderr(Stdio::piped())
        .spawn()?;
    // The disk fails once a quarter of the copy is written: the copy is
    // stopped (SIGSTOP) while the table changes, so that its remaining
    // writes all meet the failing disk (a direct copy otherwise ends while
    // dmsetup runs).
    let deadline = Instant::now() + Duration::from_secs(120);
    let written = || std::fs::metadata(&dst).map_or(0, |m| m.len());
    loop {
        if written() >= data.len() as u64 / 4 {
            break;
        }
        if child.try_wait()?.is_some() {
            bail!("ubio cp finished before a quarter of the copy was written: no fault injected");
        }
        ensure!(Instant::now() < deadline, "ubio cp wrote nothing for 120 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    ubio::sys::kill(child.id(), libc::SIGSTOP)?;
    wait_stopped(child.id())?;
    let stopped_at = written();
    let swapped = disk.failing_writes();
    ubio::sys::kill(child.id(), libc::SIGCONT)?;
    swapped?;
    ensure!(
        stopped_at < data.len() as u64,
        "ubio cp had written all {stopped_at} bytes when stopped: no write left to fail"
    );
    let out = child.wait_with_output()?;
    let stderr = one_line(&out.stderr);
    std::fs::remove_file(&src)?;
    let verdict = if out.status.success() {
        ensure!(
            backend == BackendKind::Buffered,
            "ubio cp exited 0 after its writes failed"
        );
        "exited 0: the buffered backend manages nothing and does not fsync (as GNU cp)".to_string()
    } else {
        check_message(&stderr, &dst)?;
        format!(
            "{} (stopped at {stopped_at} bytes, the disk then failed): {stderr}",
            out.status
        )
    };
    let name = dst.file_name().unwrap().to_owned();
    let state = disk.recover(|mnt| {
        let copied = std::fs::read(mnt.join(&name)).unwrap_or_default();
        ensure!(
            copied.len() <= data.len() && copied.iter().zip(&data).all(|(c, d)| c == d || *c == 0),
            "after recovery the copy ({} bytes) holds bytes its source does not",
            copied.len()
        );
        Ok(format!(
            "{} of {} bytes, {} zero",
            copied.len(),
            data.len(),
            copied.iter().filter(|&&b| b == 0).count()
        ))
    })?;
    Ok(format!(
        "{verdict}; after recovery the copy holds {state}, the checker clean"
    ))
}

#[derive(Default)]
struct Report {
    cases: u64,
    failed: u64,
}

impl Report {
    fn case(
        &mut self,
        fs: &str,
        backend: BackendKind,
        what: &str,
        f: impl FnOnce() -> Result<String>,
    ) {
        let t = Instant::now();
        self.cases += 1;
        match f() {
            Ok(how) => println!(
                "DISKFAULT {fs} {backend} {what}: ok ({how}) ({}s)",
                t.elapsed().as_secs()
            ),
            Err(e) => {
                self.failed += 1;
                println!(
                    "DISKFAULT {fs} {backend} {what}: FAILED ({e:#}) ({}s)",
                    t.elapsed().as_secs()
                );
            }
        }
    }
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.mib * MIB < FLUSHED + 8 * MIB {
        eprintln!("ubio-diskfault: --mib {} is too small: at least 24", a.mib);
        return ExitCode::FAILURE;
    }
    let mut report = Report::default();
    let start = Instant::now();
    for &backend in &a.suite.backends {
        // A fresh filesystem for the reads, and one for each write case: a
        // failed write may shut a filesystem down until it is mounted again.
        let disk = match Disk::new(&a) {
            Ok(d) => d,
            Err(e) => {
                report.case(&a.suite.fs, backend, "setup", || Err(e));
                continue;
            }
        };
        let refused = match guest::refusal(&disk.mnt, backend) {
            Err(e) => {
                report.case(&a.suite.fs, backend, "probe", || Err(e.into()));
                continue;
            }
            Ok(why) => why,
        };
        if let Some(why) = refused {
            println!(
                "DISKFAULT-NOTE {} {backend}: cannot run here: {why}",
                a.suite.fs
            );
            continue;
        }
        if let Err(e) = read_cases(&a, &disk, backend, &mut report) {
            report.case(&a.suite.fs, backend, "read", || Err(e));
        }
        drop(disk);
        report.case(&a.suite.fs, backend, "write (library)", || {
            write_case(&a, &Disk::new(&a)?, backend)
        });
        report.case(&a.suite.fs, backend, "write (ubio cp)", || {
            cp_write_case(&a, &Disk::new(&a)?, backend)
        });
    }
    println!(
        "DISKFAULT-DONE {}: {} cases, {} failed ({}s)",
        a.suite.fs,
        report.cases,
        report.failed,
        start.elapsed().as_secs()
    );
    if report.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
