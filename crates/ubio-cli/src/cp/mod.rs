//! `ubio cp [-r] [-p] [-n|-f] [-v] [--sparse=WHEN] [--sync] SRC... DST`: copy
//! like GNU cp without leaving the copy in the page cache. Source pages that
//! were cached before stay cached; pages the copy brings in are dropped.
//!
//! With -r, symlinks are copied as symlinks and fifos are recreated; sockets
//! and devices are skipped with a warning (and exit status 1, since the copy is
//! not complete). As in GNU cp, an error on one file is reported and the
//! others go on; the exit status is then 1.

mod file;
mod progress;
mod tree;

use crate::{out, size};
use anyhow::{bail, Result};
use file::{CopyError, FileReport, Outcome};
use progress::Progress;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use tree::{Kind, Problem, Step};

#[derive(clap::Args)]
pub struct Args {
    /// Sources, then the destination (a directory when there are several sources).
    #[arg(required = true, num_args = 2.., value_name = "SRC... DST")]
    paths: Vec<PathBuf>,
    /// Copy directories recursively (symlinks as symlinks, fifos recreated).
    #[arg(short = 'r', short_alias = 'R', long)]
    recursive: bool,
    /// Preserve mode, ownership and timestamps.
    #[arg(short = 'p')]
    preserve: bool,
    /// Do not overwrite an existing file.
    #[arg(short = 'n', long, conflicts_with = "force")]
    no_clobber: bool,
    /// If a destination cannot be opened, remove it and try again.
    #[arg(short = 'f', long)]
    force: bool,
    /// Print 'src' -> 'dst' for each file copied.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Holes: auto keeps the source's, always also skips blocks of zeros,
    /// never writes every byte (and does not clone).
    #[arg(long, value_enum, default_value = "auto")]
    sparse: Sparse,
    /// Clone (FICLONE) where the filesystem can share extents: auto falls
    /// back to copying, always fails instead.
    #[arg(long, value_enum, default_value = "auto")]
    reflink: Reflink,
    /// fsync each destination before reporting it copied.
    #[arg(long)]
    sync: bool,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
    /// Backend: auto, kernel, emulated, direct or buffered.
    #[arg(long, default_value = "auto")]
    backend: ubio::BackendKind,
    /// Write-behind window (dirty + writeback bytes in flight), e.g. 16M.
    #[arg(long, value_parser = size::parse_nonzero, default_value = "16M")]
    window: u64,
    /// Request size, e.g. 1M.
    #[arg(long, value_parser = size::parse, default_value = "1M")]
    block: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sparse {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Reflink {
    Auto,
    Always,
    Never,
}

/// What the per-file copy needs from the command line.
pub struct Options {
    pub preserve: bool,
    pub no_clobber: bool,
    pub force: bool,
    pub sparse: Sparse,
    pub reflink: Reflink,
    pub sync: bool,
    pub backend: ubio::BackendKind,
    pub window: u64,
    pub block: u64,
}

#[derive(serde::Serialize)]
struct Summary {
    files: u64,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    failed: u64,
    copied: Vec<Copied>,
    errors: Vec<String>,
}

#[derive(serde::Serialize)]
struct Copied {
    src: PathBuf,
    dst: PathBuf,
    #[serde(flatten)]
    report: Box<FileReport>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.block == 0 {
        bail!("invalid --block 0: must be at least 1 byte");
    }
    let (dst, srcs) = args.paths.split_last().expect("clap requires two paths");
    let into_dir = dst.is_dir();
    if srcs.len() > 1 && !into_dir {
        bail!("target '{}' is not a directory", dst.display());
    }
    let mut steps = Vec::new();
    let mut problems = Vec::new();
    for src in srcs {
        let target = if into_dir {
            match src.file_name() {
                Some(name) => dst.join(name),
                None => {
                    problems.push(Problem(format!("copy {}: has no file name", src.display())));
                    continue;
                }
            }
        } else {
            dst.clone()
        };
        tree::plan(src, &target, args.recursive, &mut steps, &mut problems);
    }
    let opts = Options {
        preserve: args.preserve,
        no_clobber: args.no_clobber,
        force: args.force,
        sparse: args.sparse,
        reflink: args.reflink,
        sync: args.sync,
        backend: args.backend,
        window: args.window,
        block: args.block,
    };
    let total: u64 = steps
        .iter()
        .filter(|s| matches!(s.kind, Kind::File))
        .map(|s| s.meta.len())
        .sum();
    let mut errors: Vec<String> = problems.into_iter().map(|p| p.0).collect();
    for e in &errors {
        eprintln!("ubio cp: {e}");
    }
    let mut copier = Copier {
        opts,
        verbose: args.verbose,
        progress: Progress::new(total),
        copied: Vec::new(),
        errors: Vec::new(),
        failed_dirs: Vec::new(),
        dir_bits_added: HashMap::new(),
    };
    let start = Instant::now();
    for step in &steps {
        copier.step(step);
    }
    copier.progress.finish();
    let seconds = start.elapsed().as_secs_f64();
    errors.append(&mut copier.errors);
    if args.json {
        let bytes = copier.copied.iter().map(|c| c.report.bytes).sum();
        let summary = Summary {
            files: copier.copied.len() as u64,
            bytes,
            seconds,
            mb_per_s: bytes as f64 / 1e6 / seconds.max(1e-9),
            failed: errors.len() as u64,
            copied: copier.copied,
            errors: errors.clone(),
        };
        out::print_json(&summary)?;
    }
    Ok(out::status(&errors))
}

struct Copier {
    opts: Options,
    verbose: bool,
    progress: Progress,
    copied: Vec<Copied>,
    errors: Vec<String>,
    /// Destinations of directories that could not be made: their contents are skipped.
    failed_dirs: Vec<PathBuf>,
    /// Directories made with u+rwx added so their contents could be written.
    dir_bits_added: HashMap<PathBuf, u32>,
}

impl Copier {
    fn step(&mut self, step: &Step) {
        if self.failed_dirs.iter().any(|d| step.dst.starts_with(d)) {
            return;
        }
        let result = match step.kind {
            Kind::File => self.file(step),
            Kind::DirStart => self.dir_start(step),
            Kind::DirEnd => self.dir_end(step),
            Kind::Symlink => self.special(step, |s, d| {
                std::os::unix::fs::symlink(std::fs::read_link(s)?, d)
            }),
            Kind::Fifo => self.special(step, |_, d| ubio::sys::mkfifo(d, step.meta.mode() & 0o777)),
        };
        if let Err(e) = result {
            self.fail(e);
            if matches!(step.kind, Kind::DirStart) {
                self.failed_dirs.push(step.dst.clone());
            }
        }
    }

    fn fail(&mut self, message: String) {
        self.progress.suspend(|| eprintln!("ubio cp: {message}"));
        self.errors.push(message);
    }

    fn say_copied(&mut self, step: &Step) {
        if self.verbose {
            let line = format!("'{}' -> '{}'", step.src.display(), step.dst.display());
            // A closed pipe on -v output must not stop the copy.
            self.progress
                .suspend(|| drop(out::print(&format!("{line}\n"))));
        }
    }

    fn file(&mut self, step: &Step) -> Result<(), String> {
        match file::copy_file(&step.src, &step.dst, &self.opts, &mut self.progress) {
            Ok(Outcome::Copied(report)) => {
                self.say_copied(step);
                self.copied.push(Copied {
                    src: step.src.clone(),
                    dst: step.dst.clone(),
                    report,
                });
                Ok(())
            }
            Ok(Outcome::Kept) => {
                self.progress.add(step.meta.len());
                Ok(())
            }
            Err(CopyError { error, incomplete }) => {
                let mut msg = error.to_string();
                if let Some((done, expected)) = incomplete {
                    msg = format!(
                        "{msg}\nubio cp: {} is incomplete (failed after {done} of {expected} bytes); {} is unchanged",
                        step.dst.display(),
                        step.src.display()
                    );
                }
                Err(msg)
            }
        }
    }

    fn dir_start(&mut self, step: &Step) -> Result<(), String> {
        let mode = step.meta.mode() & 0o7777;
        match step.dst.symlink_metadata() {
            Ok(m) if m.is_dir() => return Ok(()),
            // A symlink to a directory is followed, as GNU cp does.
            Ok(_) if step.dst.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(format!(
                    "cannot overwrite non-directory '{}' with directory '{}'",
                    step.dst.display(),
                    step.src.display()
                ))
            }
            Err(_) => {}
        }
        // u+rwx while the contents are copied in, even from a read-only source.
        std::fs::DirBuilder::new()
            .mode(mode | 0o700)
            .create(&step.dst)
            .map_err(|e| {
                ubio::error::context(e, "create directory", Some(&step.dst)).to_string()
            })?;
        if mode & 0o700 != 0o700 {
            self.dir_bits_added.insert(step.dst.clone(), 0o700 & !mode);
        }
        self.say_copied(step);
        Ok(())
    }

    fn dir_end(&mut self, step: &Step) -> Result<(), String> {
        let err = |op, e| ubio::error::context(e, op, Some(&step.dst)).to_string();
        let added = self.dir_bits_added.remove(&step.dst);
        if self.opts.preserve {
            let dir = std::fs::File::open(&step.dst).map_err(|e| err("open", e))?;
            file::preserve_metadata(&dir, &step.dst, &step.meta).map_err(|e| e.to_string())?;
        } else if let Some(bits) = added {
            let now = step.dst.metadata().map_err(|e| err("stat", e))?.mode();
            std::fs::set_permissions(&step.dst, PermissionsExt::from_mode(now & 0o7777 & !bits))
                .map_err(|e| err("chmod", e))?;
        }
        Ok(())
    }

    /// A symlink or fifo: `make` creates it; an existing destination is kept
    /// (-n), replaced (-f) or an error.
    fn special(
        &mut self,
        step: &Step,
        make: impl Fn(&Path, &Path) -> io::Result<()>,
    ) -> Result<(), String> {
        let what = if matches!(step.kind, Kind::Symlink) {
            "create symlink"
        } else {
            "create fifo"
        };
        let err = |e| ubio::error::context(e, what, Some(&step.dst)).to_string();
        if step.dst.symlink_metadata().is_ok() {
            if self.opts.no_clobber {
                return Ok(());
            }
            if self.opts.force {
                std::fs::remove_file(&step.dst)
                    .map_err(|e| ubio::error::context(e, "remove", Some(&step.dst)).to_string())?;
            }
        }
        make(&step.src, &step.dst).map_err(err)?;
        if self.opts.preserve {
            preserve_by_path(&step.dst, &step.meta, matches!(step.kind, Kind::Symlink))
                .map_err(|e| e.to_string())?;
        }
        self.say_copied(step);
        Ok(())
    }
}

/// -p for things not opened (symlinks, fifos): the link itself, not its target.
fn preserve_by_path(path: &Path, meta: &std::fs::Metadata, is_symlink: bool) -> io::Result<()> {
    let ctx = |op| move |e| ubio::error::context(e, op, Some(path));
    match std::os::unix::fs::lchown(path, Some(meta.uid()), Some(meta.gid())) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
        r => r.map_err(ctx("preserve ownership of"))?,
    }
    if !is_symlink {
        std::fs::set_permissions(path, PermissionsExt::from_mode(meta.mode() & 0o7777))
            .map_err(ctx("preserve mode of"))?;
    }
    ubio::sys::set_times_nofollow(
        path,
        (meta.atime(), meta.atime_nsec()),
        (meta.mtime(), meta.mtime_nsec()),
    )
    .map_err(ctx("preserve timestamps of"))
}
