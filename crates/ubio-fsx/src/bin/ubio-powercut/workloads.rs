//! The workloads: the files they write, their commits and marks, and the
//! check of the disk right after each commit.

use crate::cli::{mark, Args};
use crate::model::{Acked, Model, Workload};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use ubio::BackendKind;
use ubio_fsx::guest::{self, pattern, sh};
use ubio_testenv::rng::SplitMix64;

/// The tree's files: sizes of every kind, from under a block to a quarter
/// of the workload, in `src/` (durable before the setup mark); their copies
/// in `dst/` are the models.
pub(crate) fn tree_source(a: &Args, mnt: &Path, len: usize, one_file: bool) -> Result<Vec<Model>> {
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
pub(crate) fn source_files(mnt: &Path, seed: u64, sizes: &[usize]) -> Result<Vec<Model>> {
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
pub(crate) fn tail_sizes(seed: u64, count: usize) -> Vec<usize> {
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
pub(crate) fn all_of(models: &[Model]) -> Acked {
    models
        .iter()
        .enumerate()
        .map(|(i, m)| (i, first(m.new.len())))
        .collect()
}

/// The ranges of a file's first `len` bytes: one range.
pub(crate) fn first(len: usize) -> Vec<Range<u64>> {
    vec![Range {
        start: 0,
        end: len as u64,
    }]
}

/// Set up the workload's old files on `mnt` (made durable before the
/// "setup" mark), run it with `backend`, marking each commit; returns its
/// model, or None when the backend cannot run there (said why).
pub(crate) fn workload(
    a: &Args,
    name: &str,
    backend: BackendKind,
    mnt: &Path,
) -> Result<Option<Workload>> {
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

/// Right after the workload's commit, with the machine up: each file's
/// bytes as the disk holds them (the page cache dropped, read with
/// O_DIRECT), against the model; a loss is said (the replays after the
/// commit fail on it).
pub(crate) fn disk_check(
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
