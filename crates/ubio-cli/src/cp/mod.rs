//! `ubio cp [OPTION]... SRC... DST`: copy like GNU cp without leaving the
//! copy in the page cache. Source pages that were cached before stay cached;
//! pages the copy brings in are dropped. Links (-l, -s) copy no data.
//!
//! The options are GNU cp's daily ones with GNU's meaning (-a, -r, -d, -P,
//! -L, -H, -p, --preserve, --no-preserve, -n, -f, -i, -u, -b, --backup, -S,
//! --remove-destination, -t, -T, --parents, -x, -l, -s, -v, --sparse,
//! --reflink, --attributes-only), GNU's messages and exit status (1 for any failure, also a bad
//! command line); GNU options it does not have are refused by name.
//!
//! With -r, symlinks are copied as symlinks and fifos are recreated; sockets
//! and devices are skipped with a warning (and exit status 1, since the copy is
//! not complete). As in GNU cp, an error on one file is reported and the
//! others go on; the exit status is then 1.

mod backup;
mod copier;
mod file;
mod links;
mod options;
mod pool;
mod progress;
mod replace;
mod same;
mod tree;
mod words;
mod xattrconf;

use crate::{msg, out};
use anyhow::{bail, Result};
use copier::{Copier, OwnCopy};
use file::{CopyError, FileReport};
pub use options::{spell_out_long_options, Args, Json, LinkMode, Options, Preserve};
use progress::Progress;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tree::{Kind, Problem, Step};

/// The name cp calls itself in messages: "ubio cp", or the name it was
/// invoked by (see main's `command_line`).
static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// ubio was invoked as `name` (`cp` or `ubio-cp`): it is cp by that name.
pub fn invoked_as(name: String) {
    let _ = NAME.set(name);
}

/// "ubio cp", or "cp" when invoked as cp.
pub fn name() -> &'static str {
    NAME.get().map_or("ubio cp", String::as_str)
}

/// GNU's last line after a usage error.
pub fn try_help() -> String {
    format!("Try '{} --help' for more information.", name())
}

#[derive(serde::Serialize)]
struct Summary {
    files: u64,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    failed: u64,
    methods: Vec<MethodTotal>,
    /// --json=files only.
    #[serde(skip_serializing_if = "Option::is_none")]
    copied: Option<Vec<Copied>>,
    errors: Vec<String>,
}

/// The files copied one way, and their bytes.
#[derive(serde::Serialize)]
struct MethodTotal {
    method: ubio::copy::Method,
    files: u64,
    bytes: u64,
}

#[derive(serde::Serialize)]
struct Copied {
    /// The step's place in the plan: the summary lists copies in that order.
    #[serde(skip)]
    seq: usize,
    src: PathBuf,
    dst: PathBuf,
    #[serde(flatten)]
    report: Box<FileReport>,
}

/// The sources and where each goes: into a directory (its name appended, or
/// with --parents its whole path), or onto a name.
struct Targets {
    srcs: Vec<PathBuf>,
    dir: Option<PathBuf>,
    onto: Option<PathBuf>,
}

impl Targets {
    /// Where `src` goes, or None (the problem pushed): with --parents, the
    /// steps that make the directories on the way are pushed first.
    fn of(
        &self,
        src: &Path,
        parents: bool,
        steps: &mut Vec<Step>,
        problems: &mut Vec<Problem>,
    ) -> Option<PathBuf> {
        match (&self.dir, &self.onto) {
            (Some(dir), _) if parents => {
                tree::parents(src, dir, steps, problems).then(|| tree::below(dir, src))
            }
            (Some(dir), _) => match last_name(src) {
                // As GNU: `cp -r src/.. dir` copies into dir, not dir/..
                Some(name) if name == ".." => Some(dir.clone()),
                Some(name) => Some(dir.join(name)),
                None => {
                    problems.push(Problem(format!(
                        "cannot copy {}: it has no file name",
                        msg::quote(src)
                    )));
                    None
                }
            },
            (None, Some(onto)) => Some(onto.clone()),
            (None, None) => unreachable!("targets() gives a directory or a name"),
        }
    }
}

/// GNU's rules for the last operand, -t and -T, with GNU's messages.
fn targets(args: &Args) -> Result<Targets> {
    let paths = args.paths.clone();
    if args.target_directory.len() > 1 {
        bail!("multiple target directories specified");
    }
    if let Some(dir) = args.target_directory.first() {
        if args.no_target_directory {
            bail!("cannot combine --target-directory (-t) and --no-target-directory (-T)");
        }
        match dir.metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("target directory {}: Not a directory", msg::quote(dir)),
            Err(e) => bail!("target directory {}: {}", msg::quote(dir), msg::reason(&e)),
        }
        return Ok(Targets {
            srcs: paths,
            dir: Some(dir.clone()),
            onto: None,
        });
    }
    let Some((dst, srcs)) = paths.split_last() else {
        bail!("missing file operand\n{}", try_help());
    };
    if srcs.is_empty() {
        bail!(
            "missing destination file operand after {}\n{}",
            msg::quote(dst),
            try_help()
        );
    }
    if args.no_target_directory {
        if srcs.len() > 1 {
            bail!("extra operand {}\n{}", msg::quote(&paths[2]), try_help());
        }
        return Ok(Targets {
            srcs: srcs.to_vec(),
            dir: None,
            onto: Some(dst.clone()),
        });
    }
    let is_dir = dst.is_dir();
    if (srcs.len() > 1 || args.parents) && !is_dir {
        if args.parents {
            bail!(
                "with --parents, the destination must be a directory\n{}",
                try_help()
            );
        }
        match dst.metadata() {
            Err(e) => bail!("target {}: {}", msg::quote(dst), msg::reason(&e)),
            Ok(_) => bail!("target {}: Not a directory", msg::quote(dst)),
        }
    }
    Ok(Targets {
        srcs: srcs.to_vec(),
        dir: is_dir.then(|| dst.clone()),
        onto: (!is_dir).then(|| dst.clone()),
    })
}

pub fn run(args: Args) -> Result<ExitCode> {
    let opts = args.options()?;
    let t = targets(&args)?;
    // The bar's total: a walk of its own (the copy's walk goes as it
    // copies), made only for a bar that is drawn.
    let total = if Progress::drawn() && opts.link == LinkMode::Copy && !opts.attributes_only {
        bytes_to_copy(&t, &args, &opts)
    } else {
        0
    };
    let progress = Progress::new(total);
    // Files in parallel where the order of what is printed cannot show it:
    // -v prints each copy in GNU's order, so it copies one file at a time.
    let mut opts = opts;
    let jobs = pool::fit(if args.verbose { 1 } else { args.jobs() }, &mut opts.copy);
    // --preserve=links with -u: every source file, known before the copy.
    let links = links::Links::new(&opts, || source_files(&t, &args, &opts));
    let opts = Arc::new(opts);
    let mut copier = Copier::new(
        jobs,
        opts,
        args.verbose,
        progress,
        args.json == Some(Json::Files),
        links,
    );
    let start = Instant::now();
    // A source named twice (however it is spelled) onto the same name is
    // copied once, with GNU's warning; with backups each is a new version.
    let mut seen = HashSet::new();
    let opts = copier.opts.clone();
    let backups = opts.backup.is_on();
    // --parents: each directory made on the way gets its metadata at the
    // end, after what was copied into it.
    let mut parent_ends: Vec<Step> = Vec::new();
    let targets: Vec<_> = (t.srcs.iter())
        .map(|s| t.of(s, args.parents, &mut Vec::new(), &mut Vec::new()))
        .collect();
    for (src, meets) in t.srcs.iter().zip(meeting(&targets)) {
        copier.track_made = meets;
        let mut steps = Vec::new();
        let mut problems = Vec::new();
        let target = t.of(src, args.parents, &mut steps, &mut problems);
        // In the order of the sources, as GNU reports them (those that go
        // nowhere too).
        for p in problems {
            copier.fail(p.0);
        }
        parent_ends.extend(steps.iter().map(|s| Step {
            kind: Kind::DirEnd,
            ..s.clone()
        }));
        for step in &steps {
            copier.step(step);
        }
        let Some(target) = target else { continue };
        let id = src
            .symlink_metadata()
            .map(|m| (m.dev(), m.ino(), m.is_dir()));
        match id {
            Ok((dev, ino, dir)) if !backups && !seen.insert((dev, ino, target.clone())) => {
                let what = if dir { "directory" } else { "file" };
                eprintln!(
                    "{}: warning: source {what} {} specified more than once",
                    name(),
                    msg::quote(src)
                );
            }
            _ => {
                // A source reached through the destination (`cp a/f b d`
                // with `b -> d/f`; `-L` and a symlink in the tree) may be
                // what a copy in flight makes: the walk asks the copier
                // (tree::Settle).
                copier.own = OwnCopy {
                    src: src.clone(),
                    dst: target.clone(),
                    first_dir: None,
                    met: false,
                };
                let mut walker = tree::walk(src, &target, &opts.walk, &mut copier);
                while let Some(item) = walker.next_settled(&mut copier) {
                    match item {
                        tree::Item::Step(step) => copier.step(&step),
                        tree::Item::Problem(p) => copier.fail(p.0),
                    }
                    if std::mem::take(&mut copier.own.met) {
                        walker.stop();
                    }
                }
            }
        }
    }
    for step in parent_ends.iter().rev() {
        copier.step(step);
    }
    copier.finish();
    copier.progress.finish();
    let seconds = start.elapsed().as_secs_f64();
    let errors = std::mem::take(&mut copier.errors);
    copier.copied.sort_by_key(|c| c.seq);
    if args.json.is_some() {
        let bytes = copier.bytes;
        let summary = Summary {
            files: copier.files,
            bytes,
            seconds,
            mb_per_s: bytes as f64 / 1e6 / seconds.max(1e-9),
            failed: errors.len() as u64,
            methods: copier.methods,
            copied: copier.list_files.then_some(copier.copied),
            errors: errors.clone(),
        };
        out::print_json(&summary)?;
    }
    Ok(out::status(&errors))
}

/// For each source's target (None: it goes nowhere), whether another's is
/// the same, above or below it: only then may one source's copy meet what
/// another's made. Sorted component by component, every path comes right
/// before those below it, so one pass with the chain of paths the current
/// one may be below finds them all.
fn meeting(targets: &[Option<PathBuf>]) -> Vec<bool> {
    let mut order: Vec<(&Path, usize)> = (targets.iter().enumerate())
        .filter_map(|(i, t)| Some((t.as_deref()?, i)))
        .collect();
    order.sort();
    let mut meets = vec![false; targets.len()];
    let mut chain: Vec<(&Path, usize)> = Vec::new();
    for (path, i) in order {
        while chain
            .last()
            .is_some_and(|(above, _)| !path.starts_with(above))
        {
            chain.pop();
        }
        if let Some(&(_, above)) = chain.last() {
            meets[above] = true;
            meets[i] = true;
        }
        chain.push((path, i));
    }
    meets
}

/// Every step of the copy, walked before it (the copy walks as it goes),
/// for what must be known of the whole first.
fn prewalk(t: &Targets, args: &Args, opts: &Options, mut each: impl FnMut(&Step)) {
    for src in &t.srcs {
        let target = t.of(src, args.parents, &mut Vec::new(), &mut Vec::new());
        for item in target
            .iter()
            .flat_map(|dst| tree::walk(src, dst, &opts.walk, &mut ()))
        {
            if let tree::Item::Step(step) = item {
                each(&step);
            }
        }
    }
}

/// The bytes of the files the sources hold (what the progress bar counts).
fn bytes_to_copy(t: &Targets, args: &Args, opts: &Options) -> u64 {
    let mut total = 0;
    prewalk(t, args, opts, |s| {
        if matches!(s.kind, Kind::File) {
            total += s.meta.len()
        }
    });
    total
}

/// The identities of the source files (not directories).
fn source_files(t: &Targets, args: &Args, opts: &Options) -> HashSet<links::Id> {
    let mut ids = HashSet::new();
    prewalk(t, args, opts, |s| {
        if !s.meta.is_dir() {
            ids.insert(links::id(&s.meta));
        }
    });
    ids
}

/// The last name in `src` as written, as GNU's basename takes it: "." for
/// `src/.` (so `cp -a src/. dir` copies the contents of src into dir), ".."
/// for `a/..`: Path::file_name would skip or refuse those. None for "/".
fn last_name(src: &Path) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = src.as_os_str().as_bytes();
    let trimmed = &bytes[..bytes.iter().rposition(|&c| c != b'/')? + 1];
    let start = trimmed
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |i| i + 1);
    Some(std::ffi::OsStr::from_bytes(&trimmed[start..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_meet_where_one_target_is_at_or_below_another() {
        let t = |p: &str| Some(PathBuf::from(p));
        let targets = [
            t("d/x"),
            t("d/y"),
            None,
            t("d/p"),
            t("d/x"),
            t("d/p/q/r"),
            t("d/pq"),
            t("d/p/s"),
            t("d/z/"),
            t("d/./z"),
        ];
        let meets = meeting(&targets);
        assert_eq!(
            meets,
            [true, false, false, true, true, true, false, true, true, true]
        );
        assert_eq!(meeting(&[t("d/a")]), [false]);
    }
}
