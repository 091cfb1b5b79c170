//! --preserve=links: which copy each later name of a source file becomes a
//! hard link to. The rules are GNU cp 9.1's, as its tests (tests/cp/
//! link-preserve.sh, preserve-link.sh, tests/mv/hard-2.sh) and its
//! behaviour show them:
//!
//! - A file is remembered when it has other names (a link count above 1),
//!   or when it was found where symlinks are followed (-L, or -H and a copy
//!   without -r on the command line): a symlink among the sources may lead
//!   to it again.
//! - Its copy is remembered once it is made, never before: a copy that
//!   failed leaves the next name to be copied on its own (it is not linked
//!   to whatever stood at the failed destination).
//! - A destination -u kept (as new as the source) stands for the source:
//!   later names link to it. Not one that is a name of a source file
//!   itself: the copies must not become names of the sources' data.
//!   -n and -i answered no keep a destination that stands for nothing.
//! - A copy is linked to only while its name still holds it (an lstat
//!   before each link): a name replaced meanwhile (a backup made by a
//!   later source) is not linked to.
//! - -l links every name to its source already; nothing to remember.
//!
//! And one rule of the copy itself (`Copier::existing`): with
//! --preserve=links, a destination whose file has other names is replaced,
//! not written into, so that their data stays theirs (as GNU cp does).

use super::tree::{Kind, Step};
use super::{LinkMode, Options};
use std::collections::{HashMap, HashSet};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file's identity: (device, inode).
pub type Id = (u64, u64);

pub fn id(m: &Metadata) -> Id {
    (m.dev(), m.ino())
}

pub struct Links {
    on: bool,
    /// The copy (or kept destination) of each remembered source file, and
    /// its own identity.
    first: HashMap<Id, (PathBuf, Id)>,
    /// Remembered files whose copy is in the pool, not landed yet: the
    /// copy's place in the plan.
    in_flight: HashMap<Id, usize>,
    /// With -u: every source file of the command, so that a kept
    /// destination that is one of them is not linked to.
    sources: HashSet<Id>,
}

impl Links {
    /// `sources`: every source file, asked for only with -u (see `kept`).
    pub fn new(opts: &Options, sources: impl FnOnce() -> HashSet<Id>) -> Links {
        let on = opts.preserve.links && opts.link != LinkMode::Hard;
        Links {
            on,
            first: HashMap::new(),
            in_flight: HashMap::new(),
            sources: if on && opts.update {
                sources()
            } else {
                HashSet::new()
            },
        }
    }

    /// --preserve=links is asked for (and not -l).
    pub fn on(&self) -> bool {
        self.on
    }

    /// Whether other names of `step`'s file may follow, so that its copy
    /// is remembered (and it may be a later name itself).
    pub fn tracks(&self, step: &Step) -> bool {
        self.on
            && !matches!(step.kind, Kind::DirStart | Kind::DirEnd)
            && (step.meta.nlink() > 1 || step.via_symlinks)
    }

    /// The copy of an earlier name of `step`'s file, to link to, and what
    /// it is (lstat), if its name still holds it.
    pub fn first(&self, step: &Step) -> Option<(&Path, Metadata)> {
        let (path, was) = self.first.get(&id(&step.meta))?;
        let now = path.symlink_metadata().ok()?;
        (id(&now) == *was).then_some((path.as_path(), now))
    }

    /// Whether the copy of an earlier name is still in flight: wait for it
    /// before deciding what this name becomes.
    pub fn waits(&self, step: &Step) -> bool {
        self.in_flight.contains_key(&id(&step.meta))
    }

    /// `step`'s copy went to the pool, at `seq` in the plan.
    pub fn copying(&mut self, seq: usize, step: &Step) {
        self.in_flight.insert(id(&step.meta), seq);
    }

    /// The copy at `seq` landed (`ok`: it is complete).
    pub fn landed(&mut self, seq: usize, step: &Step, ok: bool) {
        let key = id(&step.meta);
        if self.in_flight.get(&key) == Some(&seq) {
            self.in_flight.remove(&key);
            if ok {
                self.made(step);
            }
        }
    }

    /// `step.dst` is now the copy of `step`'s file.
    pub fn made(&mut self, step: &Step) {
        if let Ok(m) = step.dst.symlink_metadata() {
            self.remember(step, &m);
        }
    }

    /// -u kept `step.dst`, as named (`here`: a symlink there is what later
    /// names link to, as GNU cp does) and as followed (`target`).
    pub fn kept(&mut self, step: &Step, here: &Metadata, target: &Metadata) {
        if ![here, target].iter().any(|m| self.sources.contains(&id(m))) {
            self.remember(step, here);
        }
    }

    fn remember(&mut self, step: &Step, dst: &Metadata) {
        self.first
            .entry(id(&step.meta))
            .or_insert_with(|| (step.dst.clone(), id(dst)));
    }
}
