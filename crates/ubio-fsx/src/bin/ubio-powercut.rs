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
//! data beside it or not ([`anomaly_signature`]).
//!
//! Linux with device-mapper (dm-log-writes), root, losetup, dmsetup, mkfs
//! and the checker of the filesystem: the QEMU guest of
//! scripts/guest/run.sh (`UBIO_GUEST_POWERCUT`). Prints one line per cell,
//! `POWERCUT <fs> <workload> <backend>: ok|FAILED ...`, and per failure the
//! log entries before the point; the failing image and the excerpt are
//! kept in --keep.

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;
use ubio::BackendKind;
use ubio_fsx::guest::{
    self, check_fs, fs_bytes, mkfs, mount, pattern, sh, Dm, Loop, SuiteArgs, STALE,
};
use ubio_fsx::logwrites::{self, Log};
use ubio_testenv::rng::SplitMix64;

#[derive(Parser)]
#[command(
    name = "ubio-powercut",
    about = "power cuts replayed from a dm-log-writes log, checked against a model"
)]
struct Args {
    #[command(flatten)]
    suite: SuiteArgs,
    /// Workloads, comma separated: cp, tree, tails, libtails, fsync, overwrite, runcp
    /// (GNU cp -r under `ubio run`; with buffered, plain cp), unsynced (a
    /// plain program, buffered only: files left unsynced while others are
    /// fsynced).
    #[arg(long, value_delimiter = ',', default_value = "cp,tree,fsync,overwrite")]
    workloads: Vec<String>,
    /// MiB each workload writes.
    #[arg(long, default_value_t = 8)]
    mib: u64,
    /// Where failing images and log excerpts are kept.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// GNU cp (for the runcp workload).
    #[arg(long, default_value = "cp")]
    cp: PathBuf,
    /// Seed of the workloads' data and offsets.
    #[arg(long, default_value_t = 29)]
    seed: u64,
}

const DEV: &str = "ubio-powercut";

/// One file of a workload: what it held before and what it holds after;
/// the commits say which bytes of `new` were acknowledged.
#[derive(Clone)]
struct Model {
    path: PathBuf,
    old: Option<Vec<u8>>,
    new: Vec<u8>,
}

/// What a commit acknowledged: per file (index into the models), ranges of
/// its new content.
type Acked = BTreeMap<usize, Vec<Range<u64>>>;

struct Workload {
    models: Vec<Model>,
    /// Commit number (its mark is "c<N>") -> what was acknowledged by then.
    commits: Vec<Acked>,
}

fn mark(name: &str) -> Result<()> {
    sh("dmsetup", &["message", DEV, "0", "mark", name]).map(drop)?;
    Ok(())
}

/// `dst`, `len` bytes, sharing `src`'s blocks (a reflink on the work
/// directory's xfs): a device holding the disk's old contents, at once.
fn clone_image(src: &Path, dst: &Path, len: u64) -> Result<File> {
    let _ = std::fs::remove_file(dst);
    let f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dst)?;
    ubio::sys::ficlone(f.as_fd(), File::open(src)?.as_fd())
        .with_context(|| format!("FICLONE {} to {}", src.display(), dst.display()))?;
    f.set_len(len)?;
    Ok(f)
}

/// The tree's files: sizes of every kind, from under a block to a quarter
/// of the workload, in `src/` (durable before the setup mark); their copies
/// in `dst/` are the models.
fn tree_source(a: &Args, mnt: &Path, len: usize, one_file: bool) -> Result<Vec<Model>> {
    let sizes: Vec<usize> = if one_file {
        vec![len + 4321]
    } else {
        let mut r = SplitMix64::new(a.seed);
        (0..12)
            .map(|i| match i % 4 {
                0 => r.below(4096) as usize,
                1 => r.below(300_000) as usize,
                2 => (len / 4) + r.below(9999) as usize,
                _ => r.below(1 << 20) as usize,
            })
            .collect()
    };
    source_files(mnt, a.seed, &sizes)
}

/// Files `src/f<i>` of `sizes` bytes (the pattern of `seed + i`); their
/// copies in `dst/` are the models.
fn source_files(mnt: &Path, seed: u64, sizes: &[usize]) -> Result<Vec<Model>> {
    let src = mnt.join("src");
    std::fs::create_dir_all(&src)?;
    let mut models = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let data = pattern(seed + i as u64, *n);
        std::fs::write(src.join(format!("f{i}")), &data)?;
        models.push(Model {
            path: PathBuf::from(format!("dst/f{i}")),
            old: None,
            new: data,
        });
    }
    Ok(models)
}

/// `count` sizes whose 512-aligned part ends inside a 4 KiB block, with
/// the rest of that block past the end (the direct backend's tails), from
/// under a block to 40 blocks.
fn tail_sizes(seed: u64, count: usize) -> Vec<usize> {
    let mut r = SplitMix64::new(seed);
    (0..count)
        .map(|_| {
            4096 * r.below(40) as usize
                + 512 * (1 + r.below(7) as usize)
                + 1
                + r.below(511) as usize
        })
        .collect()
}

/// Every byte of every model, acknowledged.
fn all_of(models: &[Model]) -> Acked {
    models
        .iter()
        .enumerate()
        .map(|(i, m)| (i, first(m.new.len())))
        .collect()
}

/// The ranges of a file's first `len` bytes: one range.
fn first(len: usize) -> Vec<Range<u64>> {
    vec![Range {
        start: 0,
        end: len as u64,
    }]
}

/// Set up the workload's old files on `mnt` (made durable before the
/// "setup" mark), run it with `backend`, marking each commit; returns its
/// model, or None when the backend cannot run there (said why).
fn workload(a: &Args, name: &str, backend: BackendKind, mnt: &Path) -> Result<Option<Workload>> {
    let len = (a.mib << 20) as usize;
    if let Some(why) = guest::refusal(mnt, backend)? {
        println!(
            "POWERCUT-NOTE {} {name} {backend}: cannot run here: {why}",
            a.suite.fs
        );
        return Ok(None);
    }
    let mut commits = Vec::new();
    let mut commit = |acked: Acked| -> Result<()> {
        commits.push(acked);
        mark(&format!("c{}", commits.len() - 1))
    };
    if name == "unsynced" && backend != BackendKind::Buffered {
        println!(
            "POWERCUT-NOTE {} {name} {backend}: a plain program (std::fs, no ubio): buffered only",
            a.suite.fs
        );
        return Ok(None);
    }
    let models = match name {
        "cp" | "tree" | "tails" => {
            // tails: `ubio cp -r` of files that end inside a 4 KiB block.
            let models = match name {
                "tails" => source_files(mnt, a.seed + 600, &tail_sizes(a.seed + 600, 48))?,
                _ => tree_source(a, mnt, len, name == "cp")?,
            };
            let (src, dst) = (mnt.join("src"), mnt.join("dst"));
            sh("sync", &[])?;
            mark("setup")?;
            let mut cmd = a.suite.ubio_command();
            cmd.args(["cp", "--sync", "--backend", backend.name()]);
            if a.suite.direct_writes == ubio::DirectWrites::Always {
                // Through the copy's own buffers, whose aligned writes go
                // direct, not copy_file_range (no extents shared either).
                cmd.arg("--reflink=never");
            }
            if name == "cp" {
                std::fs::create_dir_all(&dst)?;
                cmd.arg(src.join("f0")).arg(dst.join("f0"));
            } else {
                cmd.arg("-r").arg(&src).arg(&dst);
            }
            guest::run(&mut cmd)?;
            commit(all_of(&models))?;
            disk_check(a, name, backend, mnt, &models)?;
            models
        }
        "libtails" => {
            // The library, two threads as `ubio cp -r`'s workers: each file
            // written in one call (its body ending inside a 4 KiB block),
            // every other one truncated to its own length (as `ubio cp`
            // did until f27acfa), its write-behind flushed, fsynced.
            let dir = mnt.join("lt");
            sh("sync", &[])?;
            mark("setup")?;
            std::fs::create_dir(&dir)?;
            let models: Vec<Model> = tail_sizes(a.seed + 700, 32)
                .into_iter()
                .enumerate()
                .map(|(i, n)| Model {
                    path: PathBuf::from(format!("lt/l{i}")),
                    old: None,
                    new: pattern(a.seed + 700 + i as u64, n),
                })
                .collect();
            std::thread::scope(|s| -> Result<()> {
                let workers: Vec<_> = (0..2)
                    .map(|w| {
                        let models = &models;
                        s.spawn(move || -> Result<()> {
                            for (i, m) in models.iter().enumerate().filter(|(i, _)| i % 2 == w) {
                                let f = a
                                    .suite
                                    .open_options(backend)
                                    .write(true)
                                    .create_new(true)
                                    .open(mnt.join(&m.path))?;
                                f.write_all_at(&m.new, 0)?;
                                if (i / 2) % 2 == 1 {
                                    f.get_ref().set_len(m.new.len() as u64)?;
                                }
                                f.sync_all()?;
                                f.close()?;
                            }
                            Ok(())
                        })
                    })
                    .collect();
                for w in workers {
                    w.join().expect("a worker does not panic")?;
                }
                Ok(())
            })?;
            commit(all_of(&models))?;
            disk_check(a, name, backend, mnt, &models)?;
            models
        }
        "runcp" => {
            // GNU cp, unmodified and dynamically linked, under `ubio run`
            // (the shim in it, the engine beside it); with buffered, plain
            // cp: what the user ran before. cp syncs nothing: the commit is
            // a sync(1) after it.
            let models = tree_source(a, mnt, len, false)?;
            sh("sync", &[])?;
            mark("setup")?;
            let mut cmd = if backend == BackendKind::Buffered {
                Command::new(&a.cp)
            } else {
                let mut c = a.suite.ubio_command();
                c.args(["run", "--backend", backend.name(), "--"])
                    .arg(&a.cp);
                c
            };
            cmd.arg("-r").arg(mnt.join("src")).arg(mnt.join("dst"));
            guest::run(&mut cmd)?;
            sh("sync", &[])?;
            commit(all_of(&models))?;
            models
        }
        "unsynced" => {
            // Files written and never synced (half of them with writeback
            // started, as the kernel's flusher starts it after 30 s or under
            // memory pressure) while other files in the same new directory
            // are written and fsynced one by one: what the filesystem itself
            // lets a cut leave of files nobody synced.
            let dir = mnt.join("u");
            sh("sync", &[])?;
            mark("setup")?;
            std::fs::create_dir(&dir)?;
            let sizes = [3000, 200_000, len / 4 + 77, 3000, 200_000, len / 4 + 99];
            let mut models = Vec::new();
            for (i, n) in sizes.iter().enumerate() {
                let data = pattern(a.seed + 400 + i as u64, *n);
                let path = PathBuf::from(format!("u/u{i}"));
                let mut f = File::create(mnt.join(&path))?;
                f.write_all(&data)?;
                if i >= 3 {
                    ubio::sys::sync_file_range(f.as_fd(), 0, 0, ubio::sys::SyncFlags::WRITE)?;
                }
                models.push(Model {
                    path,
                    old: None,
                    new: data,
                });
            }
            let mut acked = Acked::new();
            for i in 0..4 {
                let data = pattern(a.seed + 500 + i, 300_000);
                let path = PathBuf::from(format!("u/s{i}"));
                let mut f = File::create(mnt.join(&path))?;
                f.write_all(&data)?;
                f.sync_all()?;
                File::open(&dir)?.sync_all()?;
                acked.insert(models.len(), first(data.len()));
                models.push(Model {
                    path,
                    old: None,
                    new: data,
                });
                commit(acked.clone())?;
            }
            models
        }
        "fsync" => {
            let data = pattern(a.seed + 100, len + 777);
            sh("sync", &[])?;
            mark("setup")?;
            let path = mnt.join("journal.dat");
            let f = a
                .suite
                .open_options(backend)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            // Pieces of 256 KiB + 17 bytes (unaligned), fsync about every MiB.
            let piece = (256 << 10) + 17;
            let mut at = 0usize;
            let mut since = 0usize;
            while at < data.len() {
                let n = piece.min(data.len() - at);
                f.write_all_at(&data[at..at + n], at as u64)?;
                at += n;
                since += n;
                if since >= 1 << 20 || at == data.len() {
                    f.sync_all()?;
                    commit([(0, first(at))].into_iter().collect())?;
                    since = 0;
                }
            }
            f.close()?;
            vec![Model {
                path: PathBuf::from("journal.dat"),
                old: None,
                new: data,
            }]
        }
        "overwrite" => {
            let old = pattern(a.seed + 200, len + 555);
            let path = mnt.join("table.dat");
            std::fs::write(&path, &old)?;
            sh("sync", &[])?;
            mark("setup")?;
            // Disjoint ranges at unaligned offsets over about half the
            // file, in random order; fdatasync after every 8.
            let mut r = SplitMix64::new(a.seed + 300);
            let mut ranges = Vec::new();
            let mut at = r.below(5000);
            while at < old.len() as u64 {
                let n = 1 + r.below(200_000);
                let end = (at + n).min(old.len() as u64);
                ranges.push(at..end);
                at = end + r.below(200_000);
            }
            for i in (1..ranges.len()).rev() {
                ranges.swap(i, r.below(i as u64 + 1) as usize);
            }
            let newer = pattern(a.seed + 201, old.len());
            let mut new = old.clone();
            for rg in &ranges {
                new[rg.start as usize..rg.end as usize]
                    .copy_from_slice(&newer[rg.start as usize..rg.end as usize]);
            }
            let f = a.suite.open_options(backend).write(true).open(&path)?;
            let mut acked = Vec::new();
            for (i, rg) in ranges.iter().enumerate() {
                f.write_all_at(&new[rg.start as usize..rg.end as usize], rg.start)?;
                if i % 8 == 7 || i == ranges.len() - 1 {
                    f.sync_data()?;
                    acked.extend(ranges[acked.len()..=i].iter().cloned());
                    commit([(0, acked.clone())].into_iter().collect())?;
                }
            }
            f.close()?;
            vec![Model {
                path: PathBuf::from("table.dat"),
                old: Some(old),
                new,
            }]
        }
        _ => bail!("unknown workload {name}"),
    };
    Ok(Some(Workload { models, commits }))
}

/// A file's state at a replay point, as a few words: the states of two
/// backends are compared as sets of these. `zero_kinds`: what holds the
/// file's zero bytes, by its extents ([`guest::zero_kinds`]).
fn judge_file(
    m: &Model,
    acked: &[Range<u64>],
    got: Option<&[u8]>,
    zero_kinds: &[&str],
) -> (String, Vec<String>) {
    let mut bad = Vec::new();
    let Some(got) = got else {
        if !acked.is_empty() {
            bad.push(format!(
                "{}: absent, but {} acknowledged bytes",
                m.path.display(),
                total(acked)
            ));
        }
        return ("absent".into(), bad);
    };
    let old_len = m.old.as_ref().map_or(0, |o| o.len());
    if got.len() > old_len.max(m.new.len()) {
        bad.push(format!(
            "{}: {} bytes, longer than its old ({old_len}) and new ({}) content",
            m.path.display(),
            got.len(),
            m.new.len()
        ));
    }
    let (mut new, mut old, mut zero, mut stale, mut foreign) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut first_foreign, mut first_stale) = (None, None);
    for (i, &b) in got.iter().enumerate() {
        let is_new = m.new.get(i) == Some(&b);
        let is_old = m.old.as_ref().and_then(|o| o.get(i)) == Some(&b);
        match (is_new, is_old) {
            (true, false) => new += 1,
            (false, true) => old += 1,
            (true, true) => {}
            _ if b == 0 => zero += 1,
            _ if b == STALE => {
                stale += 1;
                first_stale.get_or_insert(i);
            }
            _ => {
                foreign += 1;
                first_foreign.get_or_insert(i);
            }
        }
    }
    if let Some(i) = first_foreign {
        bad.push(format!(
            "{}: {foreign} bytes that neither its old nor its new content held (first at {i})",
            m.path.display()
        ));
    }
    if let Some(i) = first_stale {
        bad.push(format!(
            "{}: {stale} bytes of the disk's old contents, from blocks nothing wrote (stale data; first at {i})",
            m.path.display()
        ));
    }
    for r in acked {
        let end = r.end.min(got.len() as u64);
        let missing = (r.end - r.start) - end.saturating_sub(r.start);
        let wrong = (r.start..end).find(|&i| m.new.get(i as usize) != Some(&got[i as usize]));
        if missing > 0 || wrong.is_some() {
            bad.push(format!(
                "{}: acknowledged bytes {}..{} not there ({} past the end, first wrong at {:?})",
                m.path.display(),
                r.start,
                r.end,
                missing,
                wrong
            ));
            break;
        }
    }
    let size = if got.is_empty() {
        "empty"
    } else if got.len() == m.new.len() {
        "full size"
    } else if got.len() < m.new.len() {
        "shorter"
    } else {
        "longer"
    };
    let mut what = vec![size.to_string()];
    if new > 0 {
        what.push("new".into());
    }
    if old > 0 {
        what.push("old".into());
    }
    if zero > 0 {
        what.push(format!("zeroes({})", zero_kinds.join(",")));
    }
    if stale > 0 {
        what.push("stale".into());
    }
    if foreign > 0 {
        what.push("foreign".into());
    }
    (what.join("+"), bad)
}

fn total(r: &[Range<u64>]) -> u64 {
    r.iter().map(|r| r.end - r.start).sum()
}

/// The outcome of one cell.
#[derive(Default)]
struct Cell {
    points: u64,
    entries: u64,
    states: BTreeSet<String>,
    /// Anomalous file states already shown with an example.
    examples: BTreeSet<String>,
    failures: Vec<String>,
}

/// A file state that is more than absent, a prefix, complete, or old and
/// new mixed: zeroes, stale or foreign bytes, a file longer than its data.
fn is_anomaly(state: &str) -> bool {
    ["zeroes", "stale", "foreign", "longer"]
        .iter()
        .any(|a| state.contains(a))
}

/// What an anomalous state is compared by with the buffered reference's:
/// the state without its new bytes. How much of a file's new data reached
/// the disk beside its zeroes depends on where writeback split the file
/// when the power went (buffered I/O writes a small file back at once, the
/// direct backend its body first and its tail block later), not on another
/// kind of byte: "full size+new+zeroes(unwritten)" is the anomaly of "full
/// size+zeroes(unwritten)" over less of the file. The old bytes stay in it:
/// zeroes beside old data are another anomaly than zeroes beside none.
fn anomaly_signature(state: &str) -> Option<String> {
    is_anomaly(state).then(|| {
        state
            .split('+')
            .filter(|part| *part != "new")
            .collect::<Vec<_>>()
            .join("+")
    })
}

/// An anomaly a backend showed that its workload's buffered run did not.
#[derive(Debug, PartialEq, Eq)]
struct BeyondBuffered {
    workload: String,
    backend: &'static str,
    signature: String,
    /// A workload whose buffered run showed it on this filesystem: then
    /// the state is the filesystem's, which buffered writes reach too, and
    /// only timing kept it out of this workload's buffered run (ext4, on
    /// 6.1 and 6.12, commits a size and unwritten extents before the data
    /// once writeback starts; ubio starts it earlier). None: buffered I/O
    /// never showed it here: wider than buffered.
    buffered_elsewhere: Option<String>,
}

/// Compare each backend's anomalies (by signature: zeroes, foreign bytes, a
/// file longer than its data) with the buffered backend's: in the same
/// workload, then in any workload on the filesystem. A shorter prefix of
/// the new data is not an anomaly: it is what the direct backend's writes,
/// which reach the disk without delayed allocation, leave.
fn beyond_buffered(
    states: &BTreeMap<String, BTreeMap<&'static str, BTreeSet<String>>>,
) -> Vec<BeyondBuffered> {
    let anomalies = |set: &BTreeSet<String>| -> BTreeSet<String> {
        set.iter()
            .flat_map(|s| s.split(", "))
            .filter_map(anomaly_signature)
            .collect()
    };
    let buffered: BTreeMap<&String, BTreeSet<String>> = states
        .iter()
        .filter_map(|(name, by)| Some((name, anomalies(by.get("buffered")?))))
        .collect();
    let mut out = Vec::new();
    for (name, by) in states {
        let Some(reference) = buffered.get(name) else {
            continue;
        };
        for (&backend, s) in by {
            for signature in anomalies(s).difference(reference) {
                let buffered_elsewhere = buffered
                    .iter()
                    .find(|(_, b)| b.contains(signature))
                    .map(|(other, _)| other.to_string());
                out.push(BeyondBuffered {
                    workload: name.clone(),
                    backend,
                    signature: signature.clone(),
                    buffered_elsewhere,
                });
            }
        }
    }
    out
}

/// The disk's old contents, which every device of the run starts from.
fn stale_path(a: &Args) -> PathBuf {
    a.suite.work.join("stale.img")
}

fn replay_and_check(
    a: &Args,
    w: &Workload,
    log_path: &Path,
    work: &Path,
    tag: &str,
) -> Result<Cell> {
    let image = work.join("replay.img");
    let target = clone_image(&stale_path(a), &image, fs_bytes(&a.suite.fs))?;
    let mut log = Log::open(File::open(log_path)?)?;
    let mut cell = Cell::default();
    let mut recent: std::collections::VecDeque<String> = Default::default();
    // Every write and mark so far (index, sectors, description): a failing
    // file's whole history is printed beside the excerpt.
    let mut history: Vec<(u64, Range<u64>, String)> = Vec::new();
    let mut after_setup = false;
    let mut acked: Acked = BTreeMap::new();
    let chk = work.join("check.img");
    let mnt = work.join("chk");
    while let Some(e) = log.next_entry()? {
        cell.entries += 1;
        logwrites::apply(&target, log.block, &e)?;
        recent.push_back(e.describe());
        history.push((e.index, e.sector..e.sector + e.nr_sectors, e.describe()));
        if recent.len() > 40 {
            recent.pop_front();
        }
        if let Some(m) = &e.mark {
            if m == "setup" {
                after_setup = true;
            } else if let Some(n) = m.strip_prefix('c').and_then(|n| n.parse::<usize>().ok()) {
                acked = w.commits[n].clone();
            }
        }
        if !(after_setup && e.is_durability_point()) {
            continue;
        }
        cell.points += 1;
        target.sync_data()?;
        let _ = std::fs::remove_file(&chk);
        {
            let c = File::create(&chk)?;
            ubio::sys::ficlone(c.as_fd(), target.as_fd())
                .context("FICLONE of the replayed image")?;
        }
        let lo = Loop::attach(&chk)?;
        let dev = lo.0.as_str();
        let mut bad = Vec::new();
        let mut file_logs: Vec<String> = Vec::new();
        match mount(&a.suite.fs, dev, &mnt) {
            Err(err) => bad.push(format!("mount after replay to entry {}: {err:#}", e.index)),
            Ok(()) => {
                let mut names = Vec::new();
                for (i, m) in w.models.iter().enumerate() {
                    let path = mnt.join(&m.path);
                    let got = std::fs::read(&path).ok();
                    let zeroes = got
                        .as_deref()
                        .map(|g| guest::runs_of(g, 0))
                        .unwrap_or_default();
                    let kinds = if zeroes.is_empty() {
                        Vec::new()
                    } else {
                        guest::zero_kinds(&path, &zeroes).unwrap_or_else(|err| {
                            bad.push(format!("{err}"));
                            vec!["unknown"]
                        })
                    };
                    let (state, why) = judge_file(
                        m,
                        acked.get(&i).map_or(&[][..], |v| v),
                        got.as_deref(),
                        &kinds,
                    );
                    if is_anomaly(&state) && cell.examples.insert(state.clone()) {
                        let shown: Vec<String> = zeroes
                            .iter()
                            .take(3)
                            .map(|r| format!("{}..{}", r.start, r.end))
                            .collect();
                        println!(
                            "POWERCUT-EXAMPLE {tag}: {state}, first at replay point {} (entry {}): {} holds {} of {} bytes, zeroes at {}{}",
                            cell.points,
                            e.index,
                            m.path.display(),
                            got.as_ref().map_or(0, |g| g.len()),
                            m.new.len(),
                            shown.join(" "),
                            if zeroes.len() > 3 { format!(" and {} more runs", zeroes.len() - 3) } else { String::new() },
                        );
                    }
                    names.push(state);
                    if !why.is_empty() {
                        file_logs.push(file_history(&path, log.block, &history));
                    }
                    bad.extend(why);
                }
                // The tree's files are many: its state is the set of theirs.
                names.sort();
                names.dedup();
                cell.states.insert(names.join(", "));
                if let Err(err) = guest::umount(&mnt) {
                    bad.push(format!("umount: {err:#}"));
                }
            }
        }
        if let Err(err) = check_fs(&a.suite.fs, dev) {
            bad.push(format!(
                "checker after replay to entry {}: {err:#}",
                e.index
            ));
        }
        drop(lo);
        if !bad.is_empty() {
            let msg = format!(
                "replay point {} (entry {}): {}",
                cell.points,
                e.index,
                bad.join("; ")
            );
            println!("POWERCUT-FAIL {tag}: {msg}");
            println!(
                "POWERCUT-LOG {tag}: the last {} entries up to the point:",
                recent.len()
            );
            for l in &recent {
                println!("  | {l}");
            }
            for l in &file_logs {
                println!("POWERCUT-FILELOG {tag}: {l}");
            }
            if let Some(keep) = &a.keep {
                let d = keep.join(format!("{}-entry{}", tag.replace(' ', "-"), e.index));
                std::fs::create_dir_all(&d)?;
                std::fs::copy(&chk, d.join("replayed.img"))?;
                let mut f = File::create(d.join("log-excerpt.txt"))?;
                writeln!(f, "{msg}")?;
                for l in &recent {
                    writeln!(f, "{l}")?;
                }
                println!("POWERCUT-KEPT {tag}: {}", d.display());
            }
            cell.failures.push(msg);
        }
        std::fs::remove_file(&chk)?;
    }
    drop(target);
    std::fs::remove_file(&image)?;
    Ok(cell)
}

/// Right after the workload's commit, with the machine up: each file's
/// bytes as the disk holds them (the page cache dropped, read with
/// O_DIRECT), against the model; a loss is said (the replays after the
/// commit fail on it).
fn disk_check(
    a: &Args,
    name: &str,
    backend: BackendKind,
    mnt: &Path,
    models: &[Model],
) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut lost = Vec::new();
    let mut dirty_uncounted = false;
    for m in models {
        let path = mnt.join(&m.path);
        let f = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)?;
        let size = f.metadata()?.len();
        // After fsync returned nothing of it may be dirty (counted where
        // the kernel has cachestat: 6.5 and later).
        match ubio::sys::cachestat(f.as_fd(), 0..size.max(1)) {
            Ok(c) if c.nr_dirty > 0 => lost.push(format!(
                "{} ({} pages still dirty)",
                m.path.display(),
                c.nr_dirty
            )),
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => dirty_uncounted = true,
            Err(e) => return Err(e).context(format!("cachestat {}", path.display())),
        }
        ubio::sys::fadvise(f.as_fd(), 0, 0, ubio::sys::Advice::DontNeed)?;
        let size = size as usize;
        let mut buf = ubio::AlignedBuf::new(size.div_ceil(4096) * 4096 + 4096, 4096);
        let n = ubio::sys::preadv2(
            f.as_fd(),
            &mut [std::io::IoSliceMut::new(buf.as_mut_slice())],
            Some(0),
            ubio::sys::RwFlags::NONE,
        )?;
        let got = &buf.as_slice()[..n];
        if got != &m.new[..] {
            let first = got.iter().zip(&m.new).position(|(x, y)| x != y);
            lost.push(format!(
                "{} ({} of {} bytes, first wrong at {first:?})",
                m.path.display(),
                n,
                m.new.len()
            ));
        }
    }
    println!(
        "POWERCUT-DISKCHECK {} {name} {backend}: {} of {} files not on the disk after the commit{}{}",
        a.suite.fs,
        lost.len(),
        models.len(),
        if lost.is_empty() {
            String::new()
        } else {
            format!(": {}", lost.join(", "))
        },
        if dirty_uncounted {
            " (dirty pages not counted: no cachestat before Linux 6.5)"
        } else {
            ""
        }
    );
    // Not a failure here: the replay after the commit fails on it, and
    // says the file's story in the log.
    Ok(())
}

/// Every entry of `history` that touches the blocks of the file at `path`
/// (by FIEMAP, in sectors of `block` bytes), and every mark: the file's
/// whole story in the log, for a failure's cause.
fn file_history(path: &Path, block: u64, history: &[(u64, Range<u64>, String)]) -> String {
    let extents = match File::open(path).and_then(|f| ubio::sys::fiemap(f.as_fd(), false)) {
        Ok(x) => x,
        Err(e) => return format!("{}: FIEMAP: {e}", path.display()),
    };
    let sectors: Vec<Range<u64>> = extents
        .iter()
        .map(|x| x.physical / block..(x.physical + x.length) / block)
        .collect();
    let mut out = format!("{} extents (sectors) {:?}:", path.display(), sectors);
    for (index, r, what) in history {
        let touches = sectors.iter().any(|s| r.start < s.end && s.start < r.end);
        if touches || what.contains("MARK") {
            out.push_str(&format!("\n  | #{index} {what}"));
        }
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::{anomaly_signature, beyond_buffered, BeyondBuffered};
    use std::collections::{BTreeMap, BTreeSet};

    /// As the 6.1 ext4 cells of bench/runs/2026-11-27-integrity: the
    /// unwritten zeroes of emulated's `tails` were shown by buffered's
    /// `tree`, not its `tails` (a note); zeroes in a hole, which no
    /// buffered run showed, are wider.
    #[test]
    fn anomalies_buffered_showed_in_another_workload_are_noted_not_wider() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let mut states = BTreeMap::new();
        states.insert(
            "tree".to_string(),
            BTreeMap::from([
                (
                    "buffered",
                    set(&["absent", "full size+zeroes(unwritten), full size+new"]),
                ),
                ("emulated", set(&["absent", "full size+new"])),
            ]),
        );
        states.insert(
            "tails".to_string(),
            BTreeMap::from([
                ("buffered", set(&["absent", "full size+new"])),
                (
                    "emulated",
                    set(&["full size+zeroes(unwritten)", "full size+zeroes(hole)"]),
                ),
            ]),
        );
        assert_eq!(
            beyond_buffered(&states),
            vec![
                BeyondBuffered {
                    workload: "tails".into(),
                    backend: "emulated",
                    signature: "full size+zeroes(hole)".into(),
                    buffered_elsewhere: None,
                },
                BeyondBuffered {
                    workload: "tails".into(),
                    backend: "emulated",
                    signature: "full size+zeroes(unwritten)".into(),
                    buffered_elsewhere: Some("tree".into()),
                },
            ]
        );
    }

    #[test]
    fn anomalies_compare_without_their_new_bytes() {
        assert_eq!(anomaly_signature("full size+new"), None);
        assert_eq!(anomaly_signature("shorter+new"), None);
        assert_eq!(anomaly_signature("full size+new+old"), None);
        assert_eq!(
            anomaly_signature("full size+new+zeroes(unwritten)").as_deref(),
            Some("full size+zeroes(unwritten)")
        );
        // Old data beside zeroes, stale and foreign bytes, and the size
        // stay apart.
        assert_eq!(
            anomaly_signature("full size+new+old+zeroes(unwritten)").as_deref(),
            Some("full size+old+zeroes(unwritten)")
        );
        assert_eq!(
            anomaly_signature("shorter+new+zeroes(hole)").as_deref(),
            Some("shorter+zeroes(hole)")
        );
        assert_eq!(
            anomaly_signature("full size+new+stale").as_deref(),
            Some("full size+stale")
        );
        assert_eq!(anomaly_signature("longer+new").as_deref(), Some("longer"));
    }
}
