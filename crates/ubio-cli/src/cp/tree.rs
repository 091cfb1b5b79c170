//! What to copy: the sources named on the command line, and with -r the trees
//! below them, as steps in copy order (a directory before its contents, its
//! metadata after them), made as the copy goes.

use std::collections::VecDeque;
use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::msg;

#[derive(Clone, Copy)]
pub enum Kind {
    File,
    /// Make the directory (its contents follow).
    DirStart,
    /// Its contents are done: set its mode and times.
    DirEnd,
    Symlink,
    /// A fifo, socket or device, made anew (mknod) as GNU's cp -r does.
    Special,
}

#[derive(Clone)]
pub struct Step {
    pub kind: Kind,
    pub src: PathBuf,
    pub dst: PathBuf,
    pub meta: Metadata,
    /// A directory --parents made on the way to a source: -v prints it
    /// without quotes, as GNU does.
    pub parent: bool,
    /// Found where symlinks are followed (-L anywhere; -H, or a copy
    /// without -r, on the command line): another source may reach this
    /// file through a symlink, whatever its link count.
    pub via_symlinks: bool,
}

/// Which symlinks are followed (GNU's -P, -H, -L).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deref {
    Never,
    CommandLine,
    Always,
}

/// How to walk the sources.
pub struct Walk {
    pub recursive: bool,
    pub deref: Deref,
    /// -x: directories on other filesystems are made, but not entered.
    pub one_file_system: bool,
    /// --copy-contents: fifos and devices are read like files, also with -r.
    pub copy_contents: bool,
}

/// A problem found while planning: reported, counted as a failure, and the
/// rest goes on.
pub struct Problem(pub String);

/// What the walk asks the copy about a source it reached through a symlink
/// (followed, or on the way of a name given on the command line), before
/// it takes what it found there: the copy may be making it. GNU's cp,
/// copying one file after the other, finds what it made before complete;
/// the copy waits for its copies in flight that make it, and the walk
/// looks again (see `Copier`'s implementation).
pub trait Settle {
    /// Whether copies made by this command may still be landing (without
    /// any, nothing is asked).
    fn landing(&self) -> bool;
    /// `src` (where its symlinks lead, with `follow`), found as `found`:
    /// wait if a copy in flight makes it or writes it; true if it waited.
    fn file(&mut self, src: &Path, follow: bool, found: Option<&Metadata>) -> bool;
    /// The directory `dir`: wait if copies in flight make files in it or
    /// below it, or its metadata is still to be set; true if it waited.
    fn dir(&mut self, dir: &Metadata) -> bool;
}

/// A walk that asks nothing (the walks made before the copy).
impl Settle for () {
    fn landing(&self) -> bool {
        false
    }
    fn file(&mut self, _: &Path, _: bool, _: Option<&Metadata>) -> bool {
        false
    }
    fn dir(&mut self, _: &Metadata) -> bool {
        false
    }
}

/// The copy of `src` to `dst`, step by step as it is taken: only the
/// directories on the way down are held (each one's names), never the
/// whole tree, so a tree of any size copies in memory bounded by its depth
/// and its largest directory. Directories need -r; with -r, fifos,
/// sockets and devices are made anew (mknod), as GNU's cp does. `settle`
/// is asked about `src` (see [`Settle`]): a name on the command line may
/// lead into the destination.
pub fn walk<'w>(src: &Path, dst: &Path, w: &'w Walk, settle: &mut impl Settle) -> Walker<'w> {
    let mut walker = Walker {
        w,
        root_dev: 0,
        stack: Vec::new(),
        ready: VecDeque::new(),
    };
    let follow = w.deref != Deref::Never;
    let (meta, followed) = walker.stat_settled(src, true, follow, false, settle);
    let meta = match meta {
        Ok(m) => m,
        Err(e) => {
            walker.problem(msg::on("stat", src, &e));
            return walker;
        }
    };
    if meta.is_dir() && !w.recursive {
        walker.problem(format!(
            "-r not specified; omitting directory {}",
            msg::quote(src)
        ));
        return walker;
    }
    walker.root_dev = meta.dev();
    walker.visit(src.to_path_buf(), dst.to_path_buf(), meta, follow, followed);
    walker
}

/// What the walk gives: the next step, or a problem found on the way
/// (reported, counted as a failure, and the rest goes on).
// One item is handed on at a time (at most two wait in a walker): a Box
// would cost an allocation per step for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Item {
    Step(Step),
    Problem(Problem),
}

/// The steps of one source's copy (see [`walk`]).
pub struct Walker<'w> {
    w: &'w Walk,
    root_dev: u64,
    /// The directories entered, outermost first.
    stack: Vec<Dir>,
    /// What the last visit found, to give before going on.
    ready: VecDeque<Item>,
}

/// A directory being walked: its contents come next, then its end.
struct Dir {
    /// Its DirEnd step, given once the names are done.
    end: Step,
    /// Reached through a symlink (or below one) while copies were landing:
    /// the directories in it may be the copy's own (see [`Settle::dir`]).
    followed: bool,
    /// Read when its first entry is wanted: after its copy was made, as
    /// GNU cp reads a directory once it made the copy.
    names: Option<Names>,
    next: usize,
}

impl Iterator for Walker<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        self.next_settled(&mut ())
    }
}

impl Walker<'_> {
    /// Go no further down: what is left are the ends of the directories
    /// entered (their metadata), innermost first.
    pub fn stop(&mut self) {
        self.ready.clear();
        for dir in &mut self.stack {
            dir.names = Some(Names::default());
        }
    }

    /// The next item, `settle` asked about what is reached through a
    /// symlink (see [`Settle`]).
    pub fn next_settled(&mut self, settle: &mut impl Settle) -> Option<Item> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            let dir = self.stack.last_mut()?;
            let via = self.w.deref == Deref::Always;
            let names = match &dir.names {
                Some(names) => names,
                None => match Names::read(&dir.end.src, via) {
                    Ok(names) => dir.names.insert(names),
                    Err(e) => {
                        let problem = msg::on("read directory", &dir.end.src, &e);
                        dir.names = Some(Names::default());
                        return Some(Item::Problem(Problem(problem)));
                    }
                },
            };
            let Some(name) = names.get(dir.next) else {
                let dir = self.stack.pop().expect("a directory is open");
                return Some(Item::Step(dir.end));
            };
            let link = via && names.is_link(dir.next);
            dir.next += 1;
            let (s, d) = (dir.end.src.join(name), dir.end.dst.join(name));
            let in_followed = dir.followed;
            match self.stat_settled(&s, link, via, in_followed, settle) {
                (Ok(m), followed) => self.visit(s, d, m, via, followed),
                (Err(e), _) => self.problem(msg::on("stat", &s, &e)),
            }
        }
    }

    /// Stat `src` (following symlinks with `follow`), `settle` asked first
    /// where it is reached through a symlink: `named` (a symlink followed,
    /// or a name given on the command line) or in a directory reached so
    /// (`in_followed`); it is stat'ed again if `settle` waited. Also
    /// whether a directory found is followed (see [`Dir::followed`]).
    fn stat_settled(
        &self,
        src: &Path,
        named: bool,
        follow: bool,
        in_followed: bool,
        settle: &mut impl Settle,
    ) -> (std::io::Result<Metadata>, bool) {
        let stat = || {
            if follow {
                src.metadata()
            } else {
                src.symlink_metadata()
            }
        };
        let found = stat();
        if !(named || in_followed) || !settle.landing() {
            return (found, in_followed);
        }
        let waited = match &found {
            Ok(m) if m.is_dir() => settle.dir(m),
            // A file in a directory reached through a symlink was made
            // before that directory was asked about.
            _ if !named => false,
            found => settle.file(src, follow, found.as_ref().ok()),
        };
        (if waited { stat() } else { found }, true)
    }

    fn problem(&mut self, message: String) {
        self.ready.push_back(Item::Problem(Problem(message)));
    }

    fn push(&mut self, kind: Kind, src: &Path, dst: &Path, meta: Metadata, via_symlinks: bool) {
        self.ready.push_back(Item::Step(Step {
            kind,
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            meta,
            parent: false,
            via_symlinks,
        }));
    }

    /// What `src` (seen as `meta`) makes: its steps, or a directory entered
    /// (`followed`: see [`Dir::followed`]).
    fn visit(&mut self, src: PathBuf, dst: PathBuf, meta: Metadata, via: bool, followed: bool) {
        let (w, ft) = (self.w, meta.file_type());
        if ft.is_dir() {
            let id = (meta.dev(), meta.ino());
            let ancestor = |d: &Dir| (d.end.meta.dev(), d.end.meta.ino()) == id;
            if self.stack.iter().any(ancestor) {
                self.problem(format!(
                    "cannot copy cyclic symbolic link {}",
                    msg::quote(&src)
                ));
                return;
            }
            self.push(Kind::DirStart, &src, &dst, meta.clone(), via);
            if w.one_file_system && meta.dev() != self.root_dev {
                // GNU cp -x makes the mount point but copies nothing below it.
                self.push(Kind::DirEnd, &src, &dst, meta, via);
                return;
            }
            self.stack.push(Dir {
                end: Step {
                    kind: Kind::DirEnd,
                    src,
                    dst,
                    meta,
                    parent: false,
                    via_symlinks: via,
                },
                followed,
                names: None,
                next: 0,
            });
        } else if ft.is_symlink() {
            self.push(Kind::Symlink, &src, &dst, meta, via);
        } else if w.recursive
            && (ft.is_socket()
                || (!w.copy_contents
                    && (ft.is_fifo() || ft.is_block_device() || ft.is_char_device())))
        {
            // --copy-contents reads fifos and devices like files; a socket
            // cannot be read, and is made anew in any case, as GNU's.
            self.push(Kind::Special, &src, &dst, meta, via);
        } else {
            self.push(Kind::File, &src, &dst, meta, via);
        }
    }
}

/// A directory's entry names, sorted, in one buffer: about 40 bytes a
/// name of 30 bytes, where a Vec of OsStrings takes about 80.
#[derive(Default)]
struct Names {
    bytes: Vec<u8>,
    /// Where each name is in `bytes`, in sorted order.
    spans: Vec<(usize, usize)>,
    /// Where the names of symlinks start in `bytes` (ascending), where
    /// asked for.
    links: Vec<usize>,
}

impl Names {
    /// The names in `dir`, and with `links` which are symlinks (from the
    /// directory entries: no stat but where the filesystem does not say).
    fn read(dir: &Path, links: bool) -> std::io::Result<Names> {
        use std::os::unix::ffi::OsStrExt;
        let mut names = Names::default();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let start = names.bytes.len();
            if links && entry.file_type().is_ok_and(|t| t.is_symlink()) {
                names.links.push(start);
            }
            names.bytes.extend_from_slice(entry.file_name().as_bytes());
            names.spans.push((start, names.bytes.len()));
        }
        let bytes = &names.bytes;
        names
            .spans
            .sort_unstable_by(|a, b| bytes[a.0..a.1].cmp(&bytes[b.0..b.1]));
        names.bytes.shrink_to_fit();
        names.spans.shrink_to_fit();
        names.links.shrink_to_fit();
        Ok(names)
    }

    /// Whether the `i`th name is a symlink's (as far as `read` was asked).
    fn is_link(&self, i: usize) -> bool {
        (self.spans.get(i)).is_some_and(|&(start, _)| self.links.binary_search(&start).is_ok())
    }

    fn get(&self, i: usize) -> Option<&std::ffi::OsStr> {
        use std::os::unix::ffi::OsStrExt;
        let &(start, end) = self.spans.get(i)?;
        Some(std::ffi::OsStr::from_bytes(&self.bytes[start..end]))
    }
}

/// The directories `src` names on the way (a/b for a/b/f), for --parents:
/// each as a step that makes it below `dir` if missing.
pub fn parents(src: &Path, dir: &Path, steps: &mut Vec<Step>, problems: &mut Vec<Problem>) -> bool {
    let mut sofar = PathBuf::new();
    let comps: Vec<_> = src
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .collect();
    for c in comps {
        sofar.push(c);
        if matches!(
            c,
            std::path::Component::RootDir | std::path::Component::CurDir
        ) {
            continue;
        }
        match sofar.metadata() {
            Ok(m) if m.is_dir() => steps.push(Step {
                kind: Kind::DirStart,
                src: sofar.clone(),
                dst: below(dir, &sofar),
                meta: m,
                parent: true,
                via_symlinks: false,
            }),
            Ok(_) => {
                problems.push(Problem(format!(
                    "{} is not a directory",
                    msg::quote(&sofar)
                )));
                return false;
            }
            Err(e) => {
                problems.push(Problem(msg::on("stat", &sofar, &e)));
                return false;
            }
        }
    }
    true
}

/// `path` (relative or absolute) re-rooted below `dir`, for --parents.
pub fn below(dir: &Path, path: &Path) -> PathBuf {
    dir.join(path.strip_prefix("/").unwrap_or(path))
}

/// Where the symlink `path` leads, its chain of symlinks followed to the
/// first name that is not one (or that does not exist yet: a copy in
/// flight may be making it); `path` itself if it is not a symlink. None
/// for a loop.
pub fn link_end(path: &Path) -> Option<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&path) {
            Ok(to) => path = path.parent().unwrap_or(Path::new("")).join(to),
            Err(_) => return Some(path),
        }
    }
    None
}
