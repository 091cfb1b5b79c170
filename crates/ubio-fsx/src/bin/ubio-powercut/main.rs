//! `ubio-powercut`: power cuts, replayed. For each workload and backend,
//! the workload runs on a filesystem made on a dm-log-writes device (which
//! records every write, flush and FUA in a log), with a mark in the log
//! after each commit (an fsync that returned, a `ubio cp --sync` that
//! exited 0). Then the log is replayed entry by entry onto a fresh image,
//! and at every flush or FUA point after the workload's setup a copy of the
//! image (a reflink) is mounted (journal recovery, as after a power cut),
//! its files compared with the workload's model and unmounted, and the
//! filesystem's checker run on it. A point passes when the checker is
//! clean, every byte a commit before that point acknowledged is there, and
//! no file holds a byte that neither its old nor its new content held
//! (zeroes where neither had them are counted apart, as a state, with what
//! the file's extents say holds them: a hole, an unwritten extent). The
//! device starts as the disk's old contents ([`guest::STALE`] in every
//! block, mkfs without discard), so a block a file shows without anything
//! having written it is seen, not hidden among zeroes. The
//! states found (per file: absent, a prefix, complete, old and new mixed,
//! with zeroes...) of every backend are then compared with the buffered
//! backend's on the same workload: no anomaly (zeroes, foreign bytes, a
//! file longer than its contents) the buffered backend did not show, new
//! data beside it or not ([`judge::anomaly_signature`]).
//!
//! Linux with device-mapper (dm-log-writes), root, losetup, dmsetup, mkfs
//! and the checker of the filesystem: the QEMU guest of
//! scripts/guest/run.sh (`UBIO_GUEST_POWERCUT`). Prints one line per cell,
//! `POWERCUT <fs> <workload> <backend>: ok|FAILED ...`, and per failure the
//! log entries before the point; the failing image and the excerpt are
//! kept in --keep.

mod cli;
mod judge;
mod model;
mod replay;
mod workloads;

use anyhow::Result;
use clap::Parser;
use cli::{mark, stale_path, Args, DEV};
use judge::{beyond_buffered, Cell};
use replay::{clone_image, replay_and_check};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::process::ExitCode;
use std::time::Instant;
use ubio::BackendKind;
use ubio_fsx::guest::{self, fs_bytes, mkfs, mount, Dm, Loop};
use workloads::workload;

/// One workload with one backend: record, then replay and check.
fn cell(a: &Args, name: &str, backend: BackendKind) -> Result<Option<Cell>> {
    let work = &a.suite.work;
    let size = fs_bytes(&a.suite.fs);
    let (data_img, log_img) = (work.join("data.img"), work.join("log.img"));
    drop(clone_image(&stale_path(a), &data_img, size)?);
    let _ = std::fs::remove_file(&log_img);
    File::create(&log_img)?.set_len(4 << 30)?;
    let result = (|| {
        let data = Loop::attach(&data_img)?;
        let log = Loop::attach(&log_img)?;
        let dm = Dm::create(
            DEV,
            &format!("0 {} log-writes {} {}", size / 512, data.0, log.0),
        )?;
        let mnt = work.join("mnt");
        mkfs(&a.suite.fs, &dm.path())?;
        mark("mkfs")?;
        mount(&a.suite.fs, &dm.path(), &mnt)?;
        let w = workload(a, name, backend, &mnt);
        let _ = guest::umount(&mnt);
        w
    })();
    let _ = std::fs::remove_file(&data_img);
    let Some(w) = result? else {
        let _ = std::fs::remove_file(&log_img);
        return Ok(None);
    };
    let tag = format!("{} {name} {backend}", a.suite.fs);
    let c = replay_and_check(a, &w, &log_img, work, &tag);
    let _ = std::fs::remove_file(&log_img);
    c.map(Some)
}

fn main() -> ExitCode {
    let a = Args::parse();
    if let Err(e) = guest::stale_image(&stale_path(&a), fs_bytes(&a.suite.fs)) {
        println!(
            "POWERCUT {}: FAILED (the disk's old contents: {e})",
            a.suite.fs
        );
        return ExitCode::FAILURE;
    }
    let mut failed = false;
    // Workload -> backend -> states, to compare with buffered.
    let mut states: BTreeMap<String, BTreeMap<&'static str, BTreeSet<String>>> = BTreeMap::new();
    for name in &a.workloads {
        for &backend in &a.suite.backends {
            let t = Instant::now();
            match cell(&a, name, backend) {
                Ok(None) => {}
                Ok(Some(c)) => {
                    let ok = c.failures.is_empty() && c.points > 0;
                    failed |= !ok;
                    println!(
                        "POWERCUT {} {name} {backend}: {} ({} replay points of {} log entries checked, {} failed; states: {}) ({}s)",
                        a.suite.fs,
                        if ok { "ok" } else { "FAILED" },
                        c.points,
                        c.entries,
                        c.failures.len(),
                        c.states.iter().map(|s| format!("[{s}]")).collect::<Vec<_>>().join(" "),
                        t.elapsed().as_secs()
                    );
                    states
                        .entry(name.clone())
                        .or_default()
                        .insert(backend.name(), c.states);
                }
                Err(e) => {
                    failed = true;
                    println!(
                        "POWERCUT {} {name} {backend}: FAILED ({e:#}) ({}s)",
                        a.suite.fs,
                        t.elapsed().as_secs()
                    );
                }
            }
        }
    }
    for f in beyond_buffered(&states) {
        match &f.buffered_elsewhere {
            None => {
                failed = true;
                println!(
                    "POWERCUT-WIDER {} {} {}: a state the buffered backend never showed on {}: {}",
                    a.suite.fs, f.workload, f.backend, a.suite.fs, f.signature
                );
            }
            Some(other) => println!(
                "POWERCUT-NOTE {} {} {}: {} not in this workload's buffered run; the buffered backend showed it on {} in `{other}` (the filesystem's state, reached by other timings)",
                a.suite.fs, f.workload, f.backend, f.signature, a.suite.fs
            ),
        }
    }
    let _ = std::fs::remove_file(stale_path(&a));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
