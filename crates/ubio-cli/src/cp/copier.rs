//! The copier: each step of the walk (`tree`) taken, as GNU cp takes it:
//! what to do about an existing destination (`Go`), directories made and
//! their modes settled once their contents are in, links and symlinks and
//! special files made, files copied (by the pool of workers, `pool`, or
//! here), what is preserved, and the report of each.

use super::*;

pub(super) struct Copier {
    pub(super) opts: Arc<Options>,
    /// Files copied at once; 1: in the main thread, one at a time.
    jobs: usize,
    /// The copies of files in flight, started with the first file to copy
    /// (links, -l and -s, start no worker).
    pool: Option<pool::Pool>,
    /// The place in the plan of the step being taken.
    seq: usize,
    /// Directory ends waiting for copies below them (see `settle_dirs`),
    /// with the identity of the destination directory where known.
    dir_ends: Vec<(Step, Option<links::Id>)>,
    verbose: bool,
    pub(super) progress: Progress,
    /// Each file's copy, for --json=files (`list_files`) only: that list
    /// grows with the tree, nothing else does.
    pub(super) copied: Vec<Copied>,
    pub(super) list_files: bool,
    /// Bytes copied, and files and bytes by method (for --json).
    pub(super) bytes: u64,
    pub(super) methods: Vec<MethodTotal>,
    /// Files copied.
    pub(super) files: u64,
    pub(super) errors: Vec<String>,
    /// Destinations of directories that could not be made: their contents are skipped.
    failed_dirs: Vec<PathBuf>,
    /// Directories made with u+rwx added so their contents could be
    /// written, and group and other bits withheld meanwhile: (added, withheld).
    dir_bits_added: HashMap<PathBuf, (u32, u32)>,
    /// The directories --parents made on the way to the sources.
    made_parents: Vec<PathBuf>,
    /// What this command made: a later source is not copied onto one of
    /// them, nor through it.
    made: HashSet<PathBuf>,
    /// Whether the source being copied may meet another's copy (see
    /// `meeting`): the sources that cannot, however large, keep no list.
    pub(super) track_made: bool,
    /// The destination directories the walk is in (not those --parents
    /// passes through), outer first, as deep as the walk: their identities
    /// give the places of the files created in them without a stat each,
    /// and the files of one this copy made are new destinations (`Go::New`).
    dirs: Vec<DstDir>,
    /// The source being walked and its copy (see `OwnCopy`).
    pub(super) own: OwnCopy,
    /// --preserve=links: the copies later names of a file link to.
    links: links::Links,
}

/// A source named on the command line, where it goes, and the first
/// directory its walk made: a walk that meets that directory as a source
/// (`cp -r d d/sub`) is copying into itself. As GNU's cp, the copy has
/// then made it and copied into it what the walk took before it; it stops
/// there, with GNU's message naming the source and its destination.
#[derive(Default)]
pub(super) struct OwnCopy {
    pub(super) src: PathBuf,
    pub(super) dst: PathBuf,
    pub(super) first_dir: Option<links::Id>,
    /// The walk met it: go no further.
    pub(super) met: bool,
}

/// A destination directory the walk is in (see `Copier::dirs`).
struct DstDir {
    path: PathBuf,
    id: links::Id,
    /// Made by this copy.
    made: bool,
}

impl DstDir {
    fn of(step: &Step, meta: &std::fs::Metadata, made: bool) -> DstDir {
        DstDir {
            path: step.dst.clone(),
            id: links::id(meta),
            made,
        }
    }
}

/// The walk's questions about a source reached through a symlink: what
/// this command makes is found as GNU's one-after-the-other copy finds it,
/// complete, once the copies in flight that make it have landed (`cp -rL
/// s d` with `s/l -> ../d/a`; `cp a/f b d` with `b -> d/f`). A file is
/// known by its place (or by its identity where a copy writes into it), a
/// directory by its identity: files created in it, or its end waiting for
/// copies below it.
impl tree::Settle for Copier {
    fn landing(&self) -> bool {
        self.pool.as_ref().is_some_and(|p| p.in_flight()) || !self.dir_ends.is_empty()
    }

    fn file(&mut self, src: &Path, follow: bool, found: Option<&std::fs::Metadata>) -> bool {
        let Some(pool) = &self.pool else {
            return false;
        };
        let made = || {
            let end = if follow {
                tree::link_end(src)
            } else {
                Some(src.to_path_buf())
            };
            let at = end.as_deref().and_then(pool::place);
            at.is_some_and(|at| pool.creates(&at))
        };
        let busy = found.is_some_and(|m| pool.writes(links::id(m))) || (pool.creating() && made());
        if busy {
            self.wait_for_copies();
        }
        busy
    }

    fn dir(&mut self, dir: &std::fs::Metadata) -> bool {
        let id = links::id(dir);
        let busy = self.dir_ends.iter().any(|(_, end)| *end == Some(id))
            || self.pool.as_ref().is_some_and(|p| p.creates_in(id));
        if busy {
            self.wait_for_copies();
        }
        busy
    }
}

/// What to do about an existing destination.
enum Go {
    /// Make it (nothing is there, or it was moved away or removed).
    Ahead,
    /// Make it exclusively (O_EXCL), without looking first: its directory
    /// was made by this copy a moment ago, so nothing can be there (a
    /// lookup would wait on the directory's lock behind the workers'
    /// creates), as GNU cp does.
    New,
    /// Write the data into the file there (this identity; through a
    /// symlink, the file it leads to).
    Into(links::Id),
    /// Replace it by what is made (a link, a symlink or a special file), made beside
    /// it and renamed over it: a failure leaves it as it was.
    Over,
    /// Make it from this name (`cp -bf f f`: the source moved to its backup).
    From(PathBuf),
    /// Leave it (-n, -u, or -i answered no; or it already is the link asked for).
    Skip,
}

impl Copier {
    /// A copier of `jobs` files at once (1: in this thread).
    pub(super) fn new(
        jobs: usize,
        opts: Arc<Options>,
        verbose: bool,
        progress: Progress,
        list_files: bool,
        links: links::Links,
    ) -> Copier {
        Copier {
            jobs,
            pool: None,
            opts,
            seq: 0,
            dir_ends: Vec::new(),
            verbose,
            progress,
            copied: Vec::new(),
            list_files,
            bytes: 0,
            methods: Vec::new(),
            files: 0,
            errors: Vec::new(),
            failed_dirs: Vec::new(),
            dir_bits_added: HashMap::new(),
            made_parents: Vec::new(),
            made: HashSet::new(),
            track_made: false,
            dirs: Vec::new(),
            own: OwnCopy::default(),
            links,
        }
    }

    pub(super) fn step(&mut self, step: &Step) {
        self.seq += 1;
        if self.failed_dirs.iter().any(|d| step.dst.starts_with(d)) {
            return;
        }

        let ended = (self.dirs.last())
            .filter(|d| matches!(step.kind, Kind::DirEnd) && d.path == step.dst)
            .map(|d| d.id);
        if ended.is_some() {
            self.dirs.pop();
        }
        let result = match step.kind {
            Kind::DirStart => self.dir_start(step),
            // Its metadata last: after every file copied into it.
            Kind::DirEnd if self.pool.as_ref().is_some_and(|p| p.busy_below(&step.dst)) => {
                self.dir_ends.push((step.clone(), ended));
                Ok(())
            }
            Kind::DirEnd => self.dir_end(step),
            _ => self.non_dir(step),
        };
        let ready = self.pool.as_mut().map(|p| p.ready());
        self.landed(ready.unwrap_or_default());
        if let Err(e) = result {
            self.fail(e);
            if matches!(step.kind, Kind::DirStart) {
                self.failed_dirs.push(step.dst.clone());
            }
        }
    }

    /// Report the copies the pool finished, then end the directories whose
    /// copies are all in.
    fn landed(&mut self, done: Vec<pool::Done>) {
        if done.is_empty() {
            return;
        }
        for d in done {
            self.links.landed(d.seq, &d.step, d.result.is_ok());
            if let Err(message) = self.file_copied(d.seq, &d.step, d.result) {
                self.fail(message);
            }
        }
        self.settle_dirs();
    }

    /// The metadata of directories that waited for copies below them, in
    /// plan order (inner before outer), once those copies are in.
    fn settle_dirs(&mut self) {
        let waiting = std::mem::take(&mut self.dir_ends);
        for (step, id) in waiting {
            if self.pool.as_ref().is_some_and(|p| p.busy_below(&step.dst)) {
                self.dir_ends.push((step, id));
            } else if let Err(e) = self.dir_end(&step) {
                self.fail(e);
            }
        }
    }

    /// Wait for the copies in flight to land.
    fn wait_for_copies(&mut self) {
        let done = self.pool.as_mut().map(|p| p.wait());
        self.landed(done.unwrap_or_default());
    }

    /// Wait for the copies in flight, then end the directories.
    pub(super) fn finish(&mut self) {
        let done = self.pool.as_mut().map(|p| p.finish());
        self.landed(done.unwrap_or_default());
        self.settle_dirs();
    }

    pub(super) fn fail(&mut self, message: String) {
        self.progress.suspend(|| eprintln!("{}: {message}", name()));
        self.errors.push(message);
    }

    fn say(&mut self, line: String) {
        if self.verbose {
            // A closed pipe on -v output must not stop the copy.
            self.progress
                .suspend(|| drop(out::print(&format!("{line}\n"))));
        }
    }

    fn say_copied(&mut self, step: &Step, backup: Option<&Path>) {
        let mut line = if step.parent {
            format!("{} -> {}", step.src.display(), step.dst.display())
        } else {
            format!("{} -> {}", msg::quote(&step.src), msg::quote(&step.dst))
        };
        if let Some(b) = backup {
            line += &format!(" (backup: {})", msg::quote(b));
        }
        self.say(line);
    }

    /// A file, symlink or fifo: decide about an existing destination, then
    /// link it (--preserve=links, -l, -s), copy it or recreate it.
    fn non_dir(&mut self, step: &Step) -> Result<(), String> {
        let tracked = self.links.tracks(step);
        // An earlier name's copy still in flight: it lands (or fails) first.
        if tracked && self.links.waits(step) {
            self.wait_for_copies();
        }
        // A source that a copy in flight writes (`cp a b c` with c/a -> ../b):
        // that copy lands first, so the source is read as it left it, as
        // GNU's one-after-the-other copy reads it.
        if self
            .pool
            .as_ref()
            .is_some_and(|p| p.writes(links::id(&step.meta)))
        {
            self.wait_for_copies();
        }
        let first = self.links.first(step).filter(|_| tracked);
        let first = first.map(|(path, m)| (path.to_path_buf(), links::id(&m)));
        let in_dir = (self.dirs.last()).filter(|d| Some(d.path.as_path()) == step.dst.parent());
        // In a directory just made, nothing is there to decide about.
        let new_dir = in_dir
            .filter(|d| d.made && !self.made.contains(&step.dst))
            .map(|d| d.id);
        let data = matches!(step.kind, Kind::File) && self.opts.link == LinkMode::Copy;
        // Where the destination is, for a copy that creates it, or if a
        // copy in flight creates one.
        let place = if (data && self.jobs > 1) || self.pool.as_ref().is_some_and(|p| p.creating()) {
            match in_dir {
                Some(d) => step.dst.file_name().map(|n| (d.id, n.to_owned())),
                None => pool::place(&step.dst),
            }
        } else {
            new_dir.and_then(|id| step.dst.file_name().map(|n| (id, n.to_owned())))
        };
        // A destination a copy in flight creates, reached by another path
        // (`cp --parents a/f b/f d` with `d/b -> a`): that copy lands first,
        // and this one replaces it as GNU's one-after-the-other copy does.
        if new_dir.is_none()
            && (place.as_ref()).is_some_and(|at| self.pool.as_ref().is_some_and(|p| p.creates(at)))
        {
            self.wait_for_copies();
        }
        let (go, backup) = if new_dir.is_some() {
            (Go::New, None)
        } else {
            self.existing(step, first.as_ref())?
        };
        let over = matches!(go, Go::Over);
        let exclusive = matches!(go, Go::New);
        let (writes, creates) = match go {
            Go::Into(id) => (Some(id), None),
            _ => (None, place),
        };
        let moved;
        let step = match go {
            Go::Skip => {
                if matches!(step.kind, Kind::File) && self.opts.link == LinkMode::Copy {
                    self.progress.add(step.meta.len());
                }
                return Ok(());
            }
            Go::From(src) => {
                moved = Step {
                    src,
                    ..step.clone()
                };
                &moved
            }
            Go::Ahead | Go::New | Go::Into(_) | Go::Over => step,
        };
        if self.track_made {
            self.made.insert(step.dst.clone());
        }
        if let Some((first, _)) = &first {
            // As GNU cp: where the source was followed, so is the copy it
            // links to (`cp -s --preserve=links a b dir`: dir/b becomes a
            // link to what the symlink dir/a names).
            let link = |to: &Path, at: &Path| {
                if step.via_symlinks {
                    ubio::sys::link_following(to, at)
                } else {
                    std::fs::hard_link(to, at)
                }
            };
            replace::make_over(&step.dst, over, |at| link(first, at))
                .map_err(|e| link_failed("hard link", &step.dst, first, &e))?;
            self.say_copied(step, backup.as_deref());
            return Ok(());
        }
        // The workers start with the first file to copy (links start none).
        if data && self.jobs > 1 && self.pool.is_none() {
            self.pool = pool::Pool::start(self.jobs, self.opts.clone(), &self.progress);
            if self.pool.is_none() {
                self.jobs = 1; // not even one worker: this thread copies
            }
        }
        if let Some(pool) = self.pool.as_mut().filter(|_| data) {
            if tracked {
                self.links.copying(self.seq, step);
            }
            pool.submit(self.seq, step.clone(), exclusive, writes, creates);
            return Ok(());
        }
        match (self.opts.link, &step.kind) {
            (LinkMode::Hard, _) => self.hard_link(step, over)?,
            (LinkMode::Symbolic, _) => self.symlink(step, over)?,
            (LinkMode::Copy, Kind::File) => self.file(step, exclusive)?,
            (LinkMode::Copy, Kind::Symlink) => {
                let target = std::fs::read_link(&step.src)
                    .map_err(|e| msg::on("read symbolic link", &step.src, &e))?;
                self.special(step, over, |d| std::os::unix::fs::symlink(&target, d))?
            }
            (LinkMode::Copy, _) => self.special(step, over, |d| {
                let m = &step.meta;
                ubio::sys::mknod(d, m.mode() & (libc::S_IFMT | 0o777), m.rdev())
            })?,
        }
        if tracked {
            self.links.made(step);
        }
        self.say_copied(step, backup.as_deref());
        Ok(())
    }

    /// GNU's order for an existing destination: the same file and a
    /// directory are errors; then -n, -u and -i may keep it; then it is
    /// backed up (-b) or removed (--remove-destination, or when what
    /// replaces it cannot be written through it: a link, a symlink, a fifo).
    /// `first`: the copy of an earlier name of the source (and its
    /// identity), which this one becomes a hard link to (--preserve=links).
    fn existing(
        &mut self,
        step: &Step,
        first: Option<&(PathBuf, links::Id)>,
    ) -> Result<(Go, Option<PathBuf>), String> {
        let just_made = self.made.contains(&step.dst);
        // A destination made by an earlier source: its copy must be in first.
        if just_made {
            self.wait_for_copies();
        }
        let look = || match step.dst.symlink_metadata() {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(msg::on("stat", &step.dst, &e)),
        };
        let Some(mut here) = look()? else {
            return Ok((Go::Ahead, None));
        };
        // A destination that is a file a copy in flight reads or writes
        // (`cp x/a y/b d` with d/b -> a, or with d/a -> b; `cp --parents
        // d/x/f x/f d`, where d/x/f is read), and any symlink or name of
        // several (they may lead to one) waits for those copies to land: the
        // destinations are written one after the other as GNU's cp writes
        // them (the last wins), never two at once, and what a symlink leads
        // to is seen as they left it.
        let busy = |here: &std::fs::Metadata| {
            self.pool.as_ref().is_some_and(|p| {
                p.in_flight()
                    && (here.is_symlink()
                        || (here.nlink() > 1 && !here.is_dir())
                        || p.reads_or_writes(links::id(here)))
            })
        };
        if !just_made && busy(&here) {
            self.wait_for_copies();
            let Some(now) = look()? else {
                return Ok((Go::Ahead, None));
            };
            here = now;
        }
        let writes_data = matches!(step.kind, Kind::File) && self.opts.link == LinkMode::Copy;
        let backup = self.opts.backup.is_on();
        // Made by an earlier source of this command: never written through
        // (it may lead outside the destination), replaced only where a
        // numbered backup keeps it.
        if just_made {
            if here.is_symlink() && writes_data {
                return Err(format!(
                    "will not copy {} through just-created symlink {}",
                    msg::quote(&step.src),
                    msg::quote(&step.dst)
                ));
            }
            if !self.opts.backup.numbered(&step.dst) {
                return Err(format!(
                    "will not overwrite just-created {} with {}",
                    msg::quote(&step.dst),
                    msg::quote(&step.src)
                ));
            }
        }
        // A symlink at the destination is written through, as GNU cp does,
        // but not a dangling one (that would create a file where it points,
        // maybe outside the destination), unless POSIX is asked for.
        // Only a symlink leads to another file to stat.
        let followed = if here.is_symlink() {
            std::fs::metadata(&step.dst)
        } else {
            Ok(here.clone())
        };
        let (target, dangling) = match followed {
            Ok(m) => (Some(m), false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (None, here.is_symlink()),
            // A loop of symlinks: -f and --remove-destination replace it.
            Err(_) if self.opts.force || self.opts.remove_destination || !writes_data => {
                (None, false)
            }
            Err(e) => return Err(msg::on("stat", &step.dst, &e)),
        };
        if writes_data
            && dangling
            && first.is_none()
            && !backup
            && !self.opts.remove_destination
            && std::env::var_os("POSIXLY_CORRECT").is_none()
        {
            return Err(format!(
                "not writing through dangling symlink {}",
                msg::quote(&step.dst)
            ));
        }
        let src_l = step
            .src
            .symlink_metadata()
            .map_err(|e| msg::on("stat", &step.src, &e))?;
        let src_followed = if src_l.is_symlink() {
            std::fs::metadata(&step.src).ok()
        } else {
            Some(src_l.clone())
        };
        let names = same::Names {
            src_l: &src_l,
            src_followed: src_followed.as_ref(),
            src: &step.meta,
            dst_l: &here,
            dst_followed: target.as_ref(),
        };
        let replacing = same::Replacing {
            link: self.opts.link,
            data: writes_data,
            backup,
            remove_destination: self.opts.remove_destination,
            force: self.opts.force,
        };
        match same::decide(&names, &replacing) {
            same::Same::No => {}
            same::Same::Done => return Ok((Go::Skip, None)),
            same::Same::Refuse => {
                return Err(format!(
                    "{} and {} are the same file",
                    msg::quote(&step.src),
                    msg::quote(&step.dst)
                ))
            }
            same::Same::FromBackup => return self.copy_from_backup(step),
        }
        let target = target.unwrap_or_else(|| here.clone());
        // GNU's order: -n, -u and -i may keep a directory in the way before
        // it is an error (`echo n | cp -i f dir_named_f` exits 0).
        if self.opts.no_clobber {
            return Ok((Go::Skip, None));
        }
        // -u: a later name of a file becomes the link whatever its age.
        if self.opts.update && first.is_none() && !newer(&step.meta, &target) {
            if self.links.tracks(step) {
                self.links.kept(step, &here, &target);
            }
            return Ok((Go::Skip, None));
        }
        if self.opts.interactive && !self.ask(&self.question(&step.dst, &target)) {
            return Ok((Go::Skip, None));
        }
        if target.is_dir() && writes_data || here.is_dir() {
            return Err(format!(
                "cannot overwrite directory {} with non-directory",
                msg::quote(&step.dst)
            ));
        }
        if let Some(name) = self.opts.backup.name(&step.dst) {
            // `cp --backup=simple a~ a`: the backup would replace the source.
            if name
                .symlink_metadata()
                .is_ok_and(|b| b.dev() == src_l.dev() && b.ino() == src_l.ino())
            {
                return Err(format!(
                    "backing up {} might destroy source;  {} not copied",
                    msg::quote(&step.dst),
                    msg::quote(&step.src)
                ));
            }
            std::fs::rename(&step.dst, &name).map_err(|e| {
                format!(
                    "cannot backup {} to {}: {}",
                    msg::quote(&step.dst),
                    msg::quote(&name),
                    msg::reason(&e)
                )
            })?;
            return Ok((Go::Ahead, Some(name)));
        }
        if first.is_some_and(|(_, id)| *id == links::id(&here)) {
            return Ok((Go::Skip, None)); // already that link
        }
        // --preserve=links: a destination with other names is replaced, not
        // written into (as GNU cp: their data stays theirs).
        let shared = self.links.on() && writes_data && target.nlink() > 1;
        // --attributes-only replaces nothing unless told to.
        let replaced = ((!writes_data || shared) && !self.opts.attributes_only)
            || first.is_some()
            || self.opts.remove_destination;
        // GNU cp -l and -s replace a file only when told to (-f); -dl
        // replaces a symlink with a link to a symlink.
        let allowed = self.opts.remove_destination
            || self.opts.force
            || matches!(self.opts.link, LinkMode::Copy)
            || (self.opts.link == LinkMode::Hard && step.meta.is_symlink() && here.is_symlink());
        // Data is written into a file made anew, which needs the name
        // free; anything else replaces the destination in one rename.
        let made_in_place = writes_data && first.is_none();
        if replaced && allowed && !made_in_place && !self.opts.remove_destination {
            return Ok((Go::Over, None));
        }
        if replaced && allowed {
            std::fs::remove_file(&step.dst).map_err(|e| {
                format!(
                    "cannot remove {}: {}",
                    msg::quote(&step.dst),
                    msg::reason(&e)
                )
            })?;
            return Ok((Go::Ahead, None));
        }
        Ok((Go::Into(links::id(&target)), None))
    }

    /// `cp -bf f f` (and -bfl): the source moves to its backup and is copied
    /// back from there (with -l the backup is one more link to it).
    fn copy_from_backup(&mut self, step: &Step) -> Result<(Go, Option<PathBuf>), String> {
        let name = self.opts.backup.name(&step.dst).expect("backups are on");
        let cannot = |e: io::Error| {
            format!(
                "cannot backup {} to {}: {}",
                msg::quote(&step.dst),
                msg::quote(&name),
                msg::reason(&e)
            )
        };
        if self.opts.link == LinkMode::Hard {
            std::fs::hard_link(&step.dst, &name).map_err(cannot)?;
            return Ok((Go::Skip, Some(name)));
        }
        std::fs::rename(&step.dst, &name).map_err(cannot)?;
        Ok((Go::From(name.clone()), Some(name)))
    }

    /// -i's question about `dst` (which is `target`, symlinks followed), in
    /// GNU's words: a destination its user may not write (access(2), by the
    /// effective ids) is named with its mode, as one to be replaced where -f
    /// or --remove-destination would remove it, else as one to try anyway.
    fn question(&self, dst: &Path, target: &std::fs::Metadata) -> String {
        let name = msg::quote(dst);
        if target.is_symlink() || ubio::sys::access(dst, libc::W_OK).is_ok() {
            return format!("overwrite {name}? ");
        }
        let mode = target.mode() & 0o7777;
        let (mode, letters) = (format!("{mode:04o}"), mode_letters(mode));
        if self.opts.force || self.opts.remove_destination {
            format!("replace {name}, overriding mode {mode} ({letters})? ")
        } else {
            format!("unwritable {name} (mode {mode}, {letters}); try anyway? ")
        }
    }

    /// -i: ask on stderr, read the answer from stdin; yes if it starts with y.
    fn ask(&mut self, question: &str) -> bool {
        let mut answer = String::new();
        self.progress.suspend(|| {
            eprint!("{}: {question}", name());
            let _ = io::stderr().flush();
            let _ = io::stdin().lock().read_line(&mut answer);
        });
        answer.trim_start().starts_with(['y', 'Y'])
    }

    fn file(&mut self, step: &Step, exclusive: bool) -> Result<(), String> {
        let result = file::copy_file(
            &step.src,
            &step.dst,
            exclusive,
            &self.opts,
            &mut self.progress,
        );
        self.file_copied(self.seq, step, result)
    }

    /// Record a file's copy, or the message for its failure.
    fn file_copied(
        &mut self,
        seq: usize,
        step: &Step,
        result: Result<Box<FileReport>, CopyError>,
    ) -> Result<(), String> {
        match result {
            Ok(report) => {
                self.files += 1;
                self.bytes += report.bytes;
                if let Some(method) = report.method {
                    let total = match self.methods.iter().position(|t| t.method == method) {
                        Some(i) => &mut self.methods[i],
                        None => {
                            self.methods.push(MethodTotal {
                                method,
                                files: 0,
                                bytes: 0,
                            });
                            self.methods.last_mut().expect("just pushed")
                        }
                    };
                    total.files += 1;
                    total.bytes += report.bytes;
                }
                if self.list_files {
                    self.copied.push(Copied {
                        seq,
                        src: step.src.clone(),
                        dst: step.dst.clone(),
                        report,
                    });
                }
                Ok(())
            }
            Err(CopyError {
                message,
                incomplete,
                source_changed,
            }) => {
                let mut msg = message;
                match incomplete {
                    Some((done, _)) if source_changed => {
                        msg = format!(
                            "{msg}\n{}: {} is incomplete: it holds the {done} bytes read, not a copy of {}",
                            name(),
                            step.dst.display(),
                            step.src.display()
                        );
                    }
                    Some((done, expected)) => {
                        msg = format!(
                            "{msg}\n{}: {} is incomplete (failed after {done} of {expected} bytes); {} is unchanged",
                            name(),
                            step.dst.display(),
                            step.src.display()
                        );
                    }
                    None => {}
                }
                Err(msg)
            }
        }
    }

    /// -l: a hard link to the source (to what a followed symlink names);
    /// `over`: in place of the destination (see `Go::Over`).
    fn hard_link(&mut self, step: &Step, over: bool) -> Result<(), String> {
        let followed = !matches!(step.kind, Kind::Symlink)
            && step.src.symlink_metadata().is_ok_and(|m| m.is_symlink());
        let src = if followed {
            std::fs::canonicalize(&step.src).map_err(|e| msg::on("stat", &step.src, &e))?
        } else {
            step.src.clone()
        };
        replace::make_over(&step.dst, over, |at| std::fs::hard_link(&src, at))
            .map_err(|e| link_failed("hard link", &step.dst, &step.src, &e))
    }

    /// -s: a symlink to the source. As GNU cp, a relative source works only
    /// for a link made in the current directory (where it still points at it).
    fn symlink(&mut self, step: &Step, over: bool) -> Result<(), String> {
        if step.src.is_relative() {
            let parent = step.dst.parent().filter(|p| !p.as_os_str().is_empty());
            let here = |p: &Path| {
                let (a, b) = (p.metadata().ok(), Path::new(".").metadata().ok());
                matches!((a, b), (Some(a), Some(b)) if a.dev() == b.dev() && a.ino() == b.ino())
            };
            if !parent.is_none_or(here) {
                return Err(format!(
                    "{}: can make relative symbolic links only in current directory",
                    step.dst.display()
                ));
            }
        }
        replace::make_over(&step.dst, over, |at| {
            std::os::unix::fs::symlink(&step.src, at)
        })
        .map_err(|e| link_failed("symbolic link", &step.dst, &step.src, &e))
    }

    fn dir_start(&mut self, step: &Step) -> Result<(), String> {
        // That directory by its own name, as GNU's (a symlink to it is
        // followed into it, again and again).
        let own = |m: &std::fs::Metadata| self.own.first_dir == Some(links::id(m));
        if !step.parent && own(&step.meta) && step.src.symlink_metadata().is_ok_and(|m| own(&m)) {
            self.own.met = true;
            return Err(format!(
                "cannot copy a directory, {}, into itself, {}",
                msg::quote(&self.own.src),
                msg::quote(&self.own.dst)
            ));
        }
        let mode = step.meta.mode() & 0o7777;
        match step.dst.symlink_metadata() {
            Ok(m) if m.is_dir() => {
                if !step.parent {
                    self.dirs.push(DstDir::of(step, &m, false));
                }
                return Ok(());
            }
            // A symlink to a directory is followed only on the way --parents
            // makes, as GNU cp does; anywhere else it is not copied into
            // (it may lead out of the destination).
            Ok(_) if step.parent && step.dst.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(format!(
                    "cannot overwrite non-directory {} with directory {}",
                    msg::quote(&step.dst),
                    msg::quote(&step.src)
                ))
            }
            Err(_) => {}
        }
        let mode = self.opts.preserve.new_dir_mode(mode);
        // While the contents are copied in: u+rwx, even from a read-only
        // source; and as GNU cp (tests/cp/parent-perm-race.sh), no write
        // for group and others, and no access at all for them while the
        // owner is not yet the source's. Given at its end (needs the umask).
        let withheld = match umask() {
            None => 0,
            Some(_) if self.opts.preserve.ownership => mode & 0o077,
            Some(_) => mode & 0o022,
        };
        let held = (mode & !withheld) | 0o700;
        std::fs::DirBuilder::new()
            .mode(held)
            .create(&step.dst)
            .map_err(|e| msg::on("create directory", &step.dst, &e))?;
        if held != mode {
            self.dir_bits_added
                .insert(step.dst.clone(), (0o700 & !mode, withheld));
        }
        if step.parent {
            self.made_parents.push(step.dst.clone());
        } else {
            let made = step
                .dst
                .symlink_metadata()
                .map_err(|e| msg::on("stat", &step.dst, &e))?;
            self.own.first_dir.get_or_insert(links::id(&made));
            self.dirs.push(DstDir::of(step, &made, true));
        }
        self.say_copied(step, None);
        Ok(())
    }

    fn dir_end(&mut self, step: &Step) -> Result<(), String> {
        let err = |op, e| msg::on(op, &step.dst, &e);
        let added = self.dir_bits_added.remove(&step.dst);
        // --parents: a directory on the way that was there already gets
        // the metadata too where one below it on the way was made (as GNU
        // cp does), else it is left alone.
        if step.parent && !self.made_parents.iter().any(|d| d.starts_with(&step.dst)) {
            return Ok(());
        }
        // Take back the u+rwx added while the contents were copied in, and
        // give what was withheld as mkdir would have (the umask applies).
        if let Some((added, withheld)) = added.filter(|_| !self.opts.preserve.mode) {
            let now = step.dst.metadata().map_err(|e| err("stat", e))?.mode();
            let given = withheld & !umask().unwrap_or(0o777);
            let mode = (now & 0o7777 & !added) | given;
            std::fs::set_permissions(&step.dst, PermissionsExt::from_mode(mode))
                .map_err(|e| err("chmod", e))?;
        }
        if self.opts.preserve.any() {
            let dir = std::fs::File::open(&step.dst).map_err(|e| err("open", e))?;
            file::preserve_metadata(&dir, &step.dst, &step.src, &step.meta, &self.opts.preserve)
                .map_err(|e| msg::io(&e))?;
        }
        Ok(())
    }

    /// A symlink or a special file (fifo, socket, device): `make` creates
    /// it at the name it is given (an existing destination was dealt with
    /// before; `over`: it is replaced).
    fn special(
        &mut self,
        step: &Step,
        over: bool,
        make: impl Fn(&Path) -> io::Result<()>,
    ) -> Result<(), String> {
        let what = match step.kind {
            Kind::Symlink => "create symbolic link",
            _ if step.meta.file_type().is_fifo() => "create fifo",
            _ => "create special file",
        };
        replace::make_over(&step.dst, over, make).map_err(|e| msg::on(what, &step.dst, &e))?;
        if self.opts.preserve.any() {
            preserve_by_path(
                &step.dst,
                &step.meta,
                matches!(step.kind, Kind::Symlink),
                &self.opts.preserve,
            )
            .map_err(|e| msg::io(&e))?;
        }
        Ok(())
    }
}

/// --preserve=xattr (or all): copy the extended attributes of `src` (a file
/// or directory; symlinks followed) to `dst`, open as `file`, but the
/// SELinux label (GNU's `context`) and those /etc/xattr.conf names (the
/// ACLs, kept with the mode; others never copied). After the ownership, which clears
/// security.capability; before the mode. A copy its owner may not write
/// (of a read-only source) is made writable meanwhile, as GNU's is. Where
/// they cannot be copied that is an error only if xattr was asked for by name.
pub(super) fn preserve_xattrs(
    src: &Path,
    file: &std::fs::File,
    dst: &Path,
    what: &Preserve,
) -> io::Result<()> {
    use xattr::FileExt;
    if !what.xattr {
        return Ok(());
    }
    // A copy its owner may not write gets u+w while they are set.
    let mut made_writable = None;
    let mut copy = || -> io::Result<()> {
        let names = xattr::list_deref(src)
            .map_err(|e| ubio::error::context(e, "list attributes of", Some(src)))?;
        let conf = xattrconf::XattrConf::system();
        let wanted = |n: &std::ffi::OsString| {
            n.to_str()
                .is_none_or(|n| n != "security.selinux" && conf.copied_as_xattr(n))
        };
        for name in names.filter(wanted) {
            let value = xattr::get_deref(src, &name)
                .map_err(|e| ubio::error::context(e, "read attributes of", Some(src)))?;
            let Some(value) = value else { continue };
            let mut set = file.set_xattr(&name, &value);
            if matches!(&set, Err(e) if e.kind() == io::ErrorKind::PermissionDenied)
                && made_writable.is_none()
            {
                let mode = file.metadata()?.mode() & 0o7777;
                if mode & 0o200 == 0 {
                    file.set_permissions(PermissionsExt::from_mode(mode | 0o200))?;
                    made_writable = Some(mode);
                    set = file.set_xattr(&name, &value);
                }
            }
            set.map_err(|e| ubio::error::context(e, "set attributes for", Some(dst)))?;
        }
        Ok(())
    };
    let mut copied = copy();
    if let Some(mode) = made_writable {
        let restored = file.set_permissions(PermissionsExt::from_mode(mode));
        copied = copied.and(restored.map_err(|e| ubio::error::context(e, "chmod", Some(dst))));
    }
    match copied {
        Err(e) if what.xattr_required => Err(e),
        _ => Ok(()),
    }
}

/// GNU's message for a hard or symbolic link that could not be made.
fn link_failed(what: &str, dst: &Path, src: &Path, e: &io::Error) -> String {
    format!(
        "cannot create {what} {} to {}: {}",
        msg::quote(dst),
        msg::quote(src),
        msg::reason(e)
    )
}

/// The permission bits as ls shows them (`rwxr-S--T`).
fn mode_letters(mode: u32) -> String {
    let mut out = String::with_capacity(9);
    for (shift, special, letter) in [(6, 0o4000, 's'), (3, 0o2000, 's'), (0, 0o1000, 't')] {
        let bits = mode >> shift;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(match (mode & special != 0, bits & 1 != 0) {
            (true, true) => letter,
            (true, false) => letter.to_ascii_uppercase(),
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    out
}

/// The process's umask, from /proc/self/status (Linux 4.7+; umask(2) could
/// only read it by changing it); None where it cannot be read.
fn umask() -> Option<u32> {
    static UMASK: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| ubio::procfs::own_status().ok()?.umask)
}

/// -u: the source's modification time is later than the destination's.
fn newer(src: &std::fs::Metadata, dst: &std::fs::Metadata) -> bool {
    (src.mtime(), src.mtime_nsec()) > (dst.mtime(), dst.mtime_nsec())
}

/// --preserve for things not opened (symlinks, fifos): the link itself, not its target.
fn preserve_by_path(
    path: &Path,
    meta: &std::fs::Metadata,
    is_symlink: bool,
    what: &Preserve,
) -> io::Result<()> {
    let ctx = |op| move |e| ubio::error::context(e, op, Some(path));
    let mut owned_as_source = true;
    if what.ownership {
        let now = path.symlink_metadata().map_err(ctx("stat"))?;
        let chown = |uid, gid| std::os::unix::fs::lchown(path, uid, gid);
        owned_as_source = file::preserve_owner(chown, (now.uid(), now.gid()), meta, !is_symlink)
            .map_err(ctx("preserve ownership of"))?;
    }
    if what.mode && !is_symlink {
        let mode = file::special_bits_kept(meta.mode() & 0o7777, owned_as_source);
        std::fs::set_permissions(path, PermissionsExt::from_mode(mode))
            .map_err(ctx("preserve mode of"))?;
    }
    if what.timestamps {
        ubio::sys::set_times_nofollow(
            path,
            (meta.atime(), meta.atime_nsec()),
            (meta.mtime(), meta.mtime_nsec()),
        )
        .map_err(ctx("preserve timestamps of"))?;
    }
    Ok(())
}
