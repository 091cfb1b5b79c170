//! Replaying a workload's log point by point onto the disk's old contents,
//! and checking each point's files.

use crate::cli::{stale_path, Args};
use crate::judge::{is_anomaly, judge_file, Cell};
use crate::model::{Acked, Workload};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::Path;
use ubio_fsx::guest::{self, check_fs, fs_bytes, mount, Loop};
use ubio_fsx::logwrites::{self, Log};

/// `dst`, `len` bytes, sharing `src`'s blocks (a reflink on the work
/// directory's xfs): a device holding the disk's old contents, at once.
pub(crate) fn clone_image(src: &Path, dst: &Path, len: u64) -> Result<File> {
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

pub(crate) fn replay_and_check(
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

/// Every entry of `history` that touches the blocks of the file at `path`
/// (by FIEMAP, in sectors of `block` bytes), and every mark: the file's
/// whole story in the log, for a failure's cause.
pub(crate) fn file_history(
    path: &Path,
    block: u64,
    history: &[(u64, Range<u64>, String)],
) -> String {
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
