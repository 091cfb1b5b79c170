//! `ubio stat [-r] [--json] PATH...`: how much of each file is in the page
//! cache (cached, dirty, under writeback, evicted, recently evicted pages),
//! per file and in total, from cachestat(). Where cachestat() is missing
//! (before Linux 6.5) or refused (EPERM: a file the caller can neither write
//! nor owns), mincore() gives the cached count only, and for files the caller
//! cannot write it reports every page resident: the output says so.
//!
//! Nothing is read and nothing is mapped (except for the mincore fallback),
//! so large files and trees are fast. `ubio evict` shares the walk and the
//! counting.

use crate::{msg, out, size};
use anyhow::Result;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: Files,
}

/// The files `stat` and `evict` act on, and how they report.
#[derive(clap::Args)]
pub struct Files {
    /// Files (and directories with -r).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Descend into directories (symlinks are not followed; special files are skipped).
    #[arg(short = 'r', short_alias = 'R', long)]
    pub recursive: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Where the page counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Cachestat,
    /// Cached pages only; dirty, writeback and eviction counts unknown.
    Mincore,
}

/// A file's page-cache state, in pages (of `page_size` bytes).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CacheInfo {
    pub size_bytes: u64,
    pub pages: u64,
    pub cached: u64,
    pub dirty: Option<u64>,
    pub writeback: Option<u64>,
    pub evicted: Option<u64>,
    pub recently_evicted: Option<u64>,
    pub source: Source,
    /// Why cachestat() was not used, and what that means for the numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// On overlayfs: the real upper or lower file whose pages were counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_file: Option<PathBuf>,
}

/// Totals over files; counts from mincore() add to `cached` only.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Totals {
    pub files: u64,
    pub size_bytes: u64,
    pub pages: u64,
    pub cached: u64,
    pub dirty: u64,
    pub writeback: u64,
    pub evicted: u64,
    pub recently_evicted: u64,
    pub files_from_mincore: u64,
}

impl Totals {
    pub fn add(&mut self, c: &CacheInfo) {
        self.files += 1;
        self.size_bytes += c.size_bytes;
        self.pages += c.pages;
        self.cached += c.cached;
        self.dirty += c.dirty.unwrap_or(0);
        self.writeback += c.writeback.unwrap_or(0);
        self.evicted += c.evicted.unwrap_or(0);
        self.recently_evicted += c.recently_evicted.unwrap_or(0);
        self.files_from_mincore += (c.source == Source::Mincore) as u64;
    }
}

/// The page-cache state of an open regular file ([`ubio::residency::FileCount`]).
pub fn cache_info(file: &std::fs::File) -> io::Result<CacheInfo> {
    ubio::residency::FileCount::of(file.as_fd()).map(CacheInfo::from)
}

impl From<ubio::residency::FileCount> for CacheInfo {
    fn from(f: ubio::residency::FileCount) -> CacheInfo {
        use ubio::residency::Source as From;
        let c = f.count;
        let (source, note) = match c.source {
            From::Cachestat => (Source::Cachestat, None),
            From::Mincore { why, .. } => (Source::Mincore, Some(why.note().to_string())),
        };
        CacheInfo {
            size_bytes: f.size_bytes,
            pages: f.pages,
            cached: c.cached,
            dirty: c.dirty,
            writeback: c.writeback,
            evicted: c.evicted,
            recently_evicted: c.recently_evicted,
            source,
            note,
            real_file: f.real_file,
        }
    }
}

/// The regular files named by `paths`: a symlink named on the command line
/// is followed; with `recursive`, directories are walked without following
/// symlinks and special files below them are skipped. Problems are returned
/// as messages naming the path, and the walk goes on.
pub fn regular_files(paths: &[PathBuf], recursive: bool) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        match path.metadata() {
            Ok(m) if m.is_file() => files.push(path.clone()),
            Ok(m) if m.is_dir() && recursive => walk(path, &mut files, &mut problems),
            Ok(m) if m.is_dir() => {
                problems.push(format!("{}: is a directory (use -r)", path.display()))
            }
            Ok(_) => problems.push(format!(
                "{}: not a regular file (no page cache to show)",
                path.display()
            )),
            Err(e) => problems.push(msg::on("stat", path, &e)),
        }
    }
    (files, problems)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, problems: &mut Vec<String>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(msg::on("read directory", dir, &e));
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        // DirEntry::file_type does not follow symlinks (and needs no stat
        // on most filesystems).
        match entry.file_type() {
            Ok(t) if t.is_file() => files.push(entry.path()),
            Ok(t) if t.is_dir() => walk(&entry.path(), files, problems),
            Ok(_) => {} // symlinks and special files
            Err(e) => problems.push(msg::on("stat", &entry.path(), &e)),
        }
    }
}

#[derive(serde::Serialize)]
struct Report {
    page_size: u64,
    files: Vec<FileEntry>,
    total: Totals,
    errors: Vec<String>,
}

#[derive(serde::Serialize)]
struct FileEntry {
    path: PathBuf,
    #[serde(flatten)]
    info: CacheInfo,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let (paths, mut errors) = regular_files(&args.files.paths, args.files.recursive);
    let mut files = Vec::new();
    let mut total = Totals::default();
    for path in paths {
        let info = std::fs::File::open(&path)
            .map_err(|e| msg::on("open", &path, &e))
            .and_then(|f| cache_info(&f).map_err(|e| msg::on("cachestat", &path, &e)));
        match info {
            Ok(info) => {
                total.add(&info);
                files.push(FileEntry { path, info });
            }
            Err(e) => errors.push(e),
        }
    }
    let report = Report {
        page_size: ubio::sys::page_size(),
        files,
        total,
        errors: errors.clone(),
    };
    out::finish("stat", &errors, args.files.json.then_some(&report), || {
        table(&report.files, &report.total)
    })
}

/// Pages as human bytes; "-" when unknown.
pub fn pages_human(pages: Option<u64>) -> String {
    pages.map_or("-".into(), |p| size::human(p * ubio::sys::page_size()))
}

pub fn percent(cached: u64, pages: u64) -> String {
    match (cached, pages) {
        (_, 0) => "-".into(),
        (c, p) if c > 0 && c * 100 < p => "<1%".into(),
        (c, p) => format!("{}%", c * 100 / p),
    }
}

fn table(files: &[FileEntry], total: &Totals) -> String {
    let mut text = format!(
        "{:>10} {:>10} {:>5} {:>10} {:>10} {:>10} {:>10}  FILE\n",
        "SIZE", "CACHED", "%", "DIRTY", "WRITEBACK", "EVICTED", "RECENT"
    );
    let row = |size: u64, pages: u64, cached: u64, rest: [Option<u64>; 4], name: &str| {
        format!(
            "{:>10} {:>10} {:>5} {:>10} {:>10} {:>10} {:>10}  {name}\n",
            size::human(size),
            pages_human(Some(cached)),
            percent(cached, pages),
            pages_human(rest[0]),
            pages_human(rest[1]),
            pages_human(rest[2]),
            pages_human(rest[3]),
        )
    };
    for f in files {
        let i = &f.info;
        let mark = if i.source == Source::Mincore {
            " *"
        } else {
            ""
        };
        text += &row(
            i.size_bytes,
            i.pages,
            i.cached,
            [i.dirty, i.writeback, i.evicted, i.recently_evicted],
            &format!("{}{mark}", f.path.display()),
        );
    }
    if files.len() > 1 {
        text += &row(
            total.size_bytes,
            total.pages,
            total.cached,
            [
                Some(total.dirty),
                Some(total.writeback),
                Some(total.evicted),
                Some(total.recently_evicted),
            ],
            &format!("total ({} files)", total.files),
        );
    }
    if let Some(note) = files.iter().find_map(|f| f.info.note.as_deref()) {
        text += &format!("* counted with mincore(), not cachestat(): {note}\n");
    } else if !files.is_empty() {
        text += "(counted with cachestat())\n";
    }
    text
}
