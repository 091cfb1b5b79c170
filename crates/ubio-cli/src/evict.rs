//! `ubio evict [-r] [--sync] [--json] PATH...`: drop files' clean pages from
//! the page cache (posix_fadvise DONTNEED over the whole file) and show the
//! cached pages before and after. Dirty pages cannot be dropped; --sync first
//! writes them back and waits (sync_file_range WAIT_BEFORE|WRITE|WAIT_AFTER,
//! which promises no durability). On tmpfs and ramfs the pages are the file's
//! storage and are never dropped: such files are reported, not counted as evicted.

use crate::stat::{self, CacheInfo, Source, Totals};
use crate::{msg, out};
use anyhow::Result;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: stat::Files,
    /// Write dirty pages back (and wait) before dropping, so they can go too.
    #[arg(long)]
    sync: bool,
}

#[derive(serde::Serialize)]
struct Evicted {
    path: PathBuf,
    before: CacheInfo,
    after: CacheInfo,
}

#[derive(serde::Serialize)]
struct Report {
    page_size: u64,
    files: Vec<Evicted>,
    total_before: Totals,
    total_after: Totals,
    errors: Vec<String>,
}

fn evict(path: &Path, sync: bool) -> io::Result<Evicted> {
    let file =
        std::fs::File::open(path).map_err(|e| ubio::error::context(e, "open", Some(path)))?;
    let e = ubio::evict::evict(file.as_fd(), path, sync)?;
    Ok(Evicted {
        path: path.to_path_buf(),
        before: e.before.into(),
        after: e.after.into(),
    })
}

pub fn run(args: Args) -> Result<ExitCode> {
    let (paths, mut errors) = stat::regular_files(&args.files.paths, args.files.recursive);
    let mut files = Vec::new();
    let (mut total_before, mut total_after) = (Totals::default(), Totals::default());
    for path in paths {
        match evict(&path, args.sync) {
            Ok(e) => {
                total_before.add(&e.before);
                total_after.add(&e.after);
                files.push(e);
            }
            Err(e) => errors.push(msg::io(&e)),
        }
    }
    let report = Report {
        page_size: ubio::sys::page_size(),
        files,
        total_before,
        total_after,
        errors: errors.clone(),
    };
    out::finish("evict", &errors, args.files.json.then_some(&report), || {
        if report.files.is_empty() {
            String::new()
        } else {
            table(
                &report.files,
                &report.total_before,
                &report.total_after,
                args.sync,
            )
        }
    })
}

fn table(files: &[Evicted], before: &Totals, after: &Totals, sync: bool) -> String {
    let mut text = format!(
        "{:>10} {:>5} {:>10} {:>5}  FILE\n",
        "BEFORE", "%", "AFTER", "%"
    );
    let row = |b: u64, a: u64, pages: u64, name: &str| {
        format!(
            "{:>10} {:>5} {:>10} {:>5}  {name}\n",
            stat::pages_human(Some(b)),
            stat::percent(b, pages),
            stat::pages_human(Some(a)),
            stat::percent(a, pages),
        )
    };
    for f in files {
        let mark = if f.after.source == Source::Mincore {
            " *"
        } else {
            ""
        };
        text += &row(
            f.before.cached,
            f.after.cached,
            f.before.pages,
            &format!("{}{mark}", f.path.display()),
        );
    }
    if files.len() > 1 {
        text += &row(
            before.cached,
            after.cached,
            before.pages,
            &format!("total ({} files)", before.files),
        );
    }
    if let Some(note) = files.iter().find_map(|f| f.after.note.as_deref()) {
        text += &format!("* counted with mincore(), not cachestat(): {note}\n");
    }
    let dirty_left = after.dirty + after.writeback;
    if dirty_left > 0 && !sync {
        text += &format!(
            "{} stay cached because they are dirty or under writeback: use --sync to write them back first\n",
            stat::pages_human(Some(dirty_left))
        );
    }
    text
}
