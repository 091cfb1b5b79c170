//! `ubio cp`'s command line: GNU cp's options with GNU's meaning, and what
//! they come to for the copy ([`Options`]).

use super::backup::Backup;
use super::tree::{Deref, Walk};
use super::try_help;
use super::words::spell_out;
use crate::size;
use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Sources, then the destination (a directory when there are several
    /// sources); with -t, only sources.
    #[arg(required = true, value_name = "SRC... DST")]
    pub paths: Vec<PathBuf>,
    /// Same as -dR --preserve=all.
    #[arg(short = 'a', long)]
    archive: bool,
    /// Copy directories recursively (symlinks as symlinks, fifos recreated).
    #[arg(short = 'r', short_alias = 'R', long)]
    recursive: bool,
    /// Same as --no-dereference --preserve=links.
    #[arg(short = 'd')]
    no_dereference_preserve_links: bool,
    /// Never follow symlinks in sources (copy them as symlinks).
    #[arg(short = 'P', long, overrides_with_all = ["dereference", "dereference_command_line"])]
    no_dereference: bool,
    /// Always follow symlinks in sources.
    #[arg(short = 'L', long, overrides_with_all = ["no_dereference", "dereference_command_line"])]
    dereference: bool,
    /// Follow symlinks named on the command line only.
    #[arg(short = 'H', overrides_with_all = ["no_dereference", "dereference"])]
    dereference_command_line: bool,
    /// Same as --preserve=mode,ownership,timestamps.
    #[arg(short = 'p')]
    preserve_default: bool,
    /// Preserve these attributes: mode, ownership, timestamps, links
    /// (hard links between sources), xattr, all [default: mode,ownership,timestamps].
    /// context (SELinux) is refused: ubio cp does not copy it.
    #[arg(long, value_name = "ATTR_LIST", num_args = 0..=1, require_equals = true,
          default_missing_value = "mode,ownership,timestamps", action = clap::ArgAction::Append)]
    preserve: Vec<String>,
    /// Do not preserve these attributes (mode: new files get 0666 and
    /// directories 0777, less the umask).
    #[arg(long, value_name = "ATTR_LIST", require_equals = true, action = clap::ArgAction::Append)]
    no_preserve: Vec<String>,
    /// Do not overwrite an existing file (overrides a previous -i).
    #[arg(short = 'n', long, overrides_with = "interactive")]
    no_clobber: bool,
    /// Prompt before overwriting (overrides a previous -n).
    #[arg(short = 'i', long, overrides_with = "no_clobber")]
    interactive: bool,
    /// If a destination cannot be opened, remove it and try again.
    #[arg(short = 'f', long)]
    force: bool,
    /// Remove each existing destination before copying (instead of opening it).
    #[arg(long)]
    remove_destination: bool,
    /// Copy only when the source is newer than the destination or the
    /// destination is missing (older); all: always; none: never replace (-n).
    #[arg(short = 'u', long, value_name = "UPDATE", num_args = 0..=1, require_equals = true,
          default_missing_value = "older", value_parser = ["all", "none", "older"])]
    update: Option<String>,
    /// Back up each existing destination: none (off), numbered (t),
    /// existing (nil), simple (never) [default: $VERSION_CONTROL or existing].
    #[arg(long, value_name = "CONTROL", num_args = 0..=1, require_equals = true,
          default_missing_value = "")]
    backup: Option<String>,
    /// Like --backup but takes no argument.
    #[arg(short = 'b')]
    backup_default: bool,
    /// Suffix of simple backups [default: $SIMPLE_BACKUP_SUFFIX or ~].
    #[arg(short = 'S', long, value_name = "SUFFIX")]
    suffix: Option<OsString>,
    /// Copy all sources into DIRECTORY.
    // Collected: a second one is GNU's error, not the last one winning.
    #[arg(short = 't', long, value_name = "DIRECTORY", action = clap::ArgAction::Append)]
    pub target_directory: Vec<PathBuf>,
    /// Treat DST as a normal file, never as a directory to copy into.
    #[arg(short = 'T', long)]
    pub no_target_directory: bool,
    /// Use the source's full name under the directory (a/b/f -> DIR/a/b/f).
    #[arg(long)]
    pub parents: bool,
    /// Stay on this file system: directories on others are made, not entered.
    #[arg(short = 'x', long)]
    one_file_system: bool,
    /// Hard-link files instead of copying them.
    #[arg(short = 'l', long, conflicts_with = "symbolic_link")]
    link: bool,
    /// Make symbolic links instead of copying.
    #[arg(short = 's', long)]
    symbolic_link: bool,
    /// Print 'src' -> 'dst' for each file copied.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Holes: auto keeps the source's, always also skips blocks of zeros,
    /// never writes every byte (and does not clone).
    #[arg(long, value_enum, default_value = "auto")]
    sparse: Sparse,
    /// Clone (FICLONE) where the filesystem can share extents: auto falls
    /// back to copying, always (the default of a bare --reflink) fails instead.
    #[arg(long, value_enum, default_value = "auto", num_args = 0..=1, require_equals = true,
          default_missing_value = "always")]
    reflink: Reflink,
    /// fsync each destination before reporting it copied.
    #[arg(long)]
    sync: bool,
    /// Print a JSON summary on stdout: totals, files and bytes by copy
    /// method, errors; =files adds each file's copy (a list that grows with
    /// the tree).
    #[arg(long, value_enum, value_name = "WHAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "summary")]
    pub json: Option<Json>,
    /// Backend: auto, kernel, emulated, direct or buffered.
    #[arg(long, default_value = "auto")]
    backend: ubio::BackendKind,
    #[command(flatten)]
    data_path: crate::data_path::DataPathArgs,
    /// Write-behind window (dirty + writeback bytes in flight), e.g. 16M.
    #[arg(long, value_parser = size::parse_nonzero, default_value = "16M")]
    window: u64,
    /// Files copied at once (several sources or -r; without -v, which
    /// prints in order): default four per CPU, at least 8, at most 16.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: Option<u32>,
    /// Request size, e.g. 1M.
    #[arg(long, value_parser = size::parse, default_value = "1M")]
    block: u64,
    /// Copy no data, only the attributes asked for (the destination is
    /// made empty if missing, its data kept if there).
    #[arg(long)]
    attributes_only: bool,
    // GNU cp options ubio cp does not have: refused by name.
    /// With -r, copy the data read from fifos and devices into files
    /// (instead of making them anew).
    #[arg(long)]
    copy_contents: bool,
    #[arg(long, hide = true)]
    strip_trailing_slashes: bool,
    #[arg(long, hide = true)]
    keep_directory_symlink: bool,
    #[arg(long, hide = true)]
    debug: bool,
    #[arg(short = 'Z', long, hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "")]
    context: Option<String>,
    /// -a, -d, -p, --preserve and --no-preserve in command-line order
    /// (attribute list, on or off): the later wins, as in GNU cp.
    #[arg(skip)]
    preserve_order: Vec<(String, bool)>,
}

/// What --json prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Json {
    /// Totals: as large for a tree of millions of files as for one.
    Summary,
    /// The totals and every file's copy.
    Files,
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

/// What a copy of a non-directory makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    Copy,
    /// -l
    Hard,
    /// -s
    Symbolic,
}

/// The attributes --preserve keeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct Preserve {
    pub mode: bool,
    pub ownership: bool,
    pub timestamps: bool,
    /// Hard links between the sources stay hard links.
    pub links: bool,
    /// Extended attributes (but the SELinux label, GNU's `context`).
    pub xattr: bool,
    /// --preserve=xattr named: failing to copy them is an error (with `all`
    /// it is not, as in GNU cp).
    pub xattr_required: bool,
    /// --no-preserve=mode: new files get 0666, directories 0777 (less the umask).
    pub default_mode: bool,
}

impl Preserve {
    /// Whether anything is set on each copied file after its data.
    pub fn any(&self) -> bool {
        self.mode || self.ownership || self.timestamps || self.xattr
    }

    /// The mode a new file is created with (the umask applies). When the
    /// mode is set after the data (-p), only the owner may open it until
    /// then: the source's data is not readable by others meanwhile.
    pub fn new_file_mode(&self, src_mode: u32) -> u32 {
        if self.default_mode {
            0o666
        } else if self.mode {
            src_mode & 0o700
        } else {
            src_mode & 0o777
        }
    }

    /// The mode a new directory is made with (the umask applies; mkdir(2)
    /// keeps the sticky bit, drops setuid and setgid, and gives setgid where
    /// the parent has it). --no-preserve=mode keeps the source's sticky bit,
    /// as GNU cp does (`cp -R --no-preserve=mode` of a 1777 directory: 1755).
    pub fn new_dir_mode(&self, src_mode: u32) -> u32 {
        if self.default_mode {
            0o777 | src_mode & 0o1000
        } else {
            src_mode
        }
    }

    /// Turn the attributes of a --preserve or --no-preserve list on or off.
    fn set(&mut self, list: &str, on: bool, option: &str) -> Result<()> {
        for attr in list.split(',') {
            match spell_out(attr, PRESERVE_WORDS) {
                "mode" => {
                    self.mode = on;
                    self.default_mode = !on;
                }
                "ownership" => self.ownership = on,
                "timestamps" => self.timestamps = on,
                "links" => self.links = on,
                // GNU's `all` also tries context and xattr, ignoring failure.
                "all" => {
                    self.set("mode,ownership,timestamps,links", on, option)?;
                    self.xattr = on;
                    self.xattr_required = false;
                    if !on {
                        self.default_mode = false;
                    }
                }
                "xattr" => {
                    self.xattr = on;
                    self.xattr_required = on;
                }
                "context" if !on => {}
                // GNU's words where there is no SELinux (none to keep); with
                // SELinux, ubio's own: it does not copy the labels.
                "context" if !std::path::Path::new("/sys/fs/selinux/enforce").exists() => {
                    bail!("cannot preserve security context without an SELinux-enabled kernel")
                }
                "context" => bail!(
                    "{option}=context is not supported: ubio cp does not copy SELinux contexts"
                ),
                _ => bail!(
                    "invalid argument '{attr}' for '{option}'\nValid arguments are:\n  - 'mode'\n  - 'timestamps'\n  - 'ownership'\n  - 'links'\n  - 'context'\n  - 'xattr'\n  - 'all'\n{}",
                    try_help()
                ),
            }
        }
        Ok(())
    }
}

/// The words of --preserve and --no-preserve.
const PRESERVE_WORDS: &[&str] = &[
    "mode",
    "timestamps",
    "ownership",
    "links",
    "context",
    "xattr",
    "all",
];

/// What the copy needs from the command line.
pub struct Options {
    pub preserve: Preserve,
    pub no_clobber: bool,
    pub interactive: bool,
    pub update: bool,
    pub force: bool,
    pub remove_destination: bool,
    /// --attributes-only: files get their metadata, not the source's data.
    pub attributes_only: bool,
    pub backup: Backup,
    pub link: LinkMode,
    pub walk: Walk,
    /// Block size, holes and cloning of the data copy.
    pub copy: ubio::copy::CopyOptions,
    pub sync: bool,
    pub backend: ubio::BackendKind,
    pub data_path: crate::data_path::DataPathArgs,
    pub window: u64,
}

impl Args {
    /// Files to copy at once: --jobs, or four per CPU within 8..=16: copies
    /// of small files wait on the device more than on a CPU (a tree of 20k
    /// small files and 4 x 256 MiB on 2 CPUs, to durability: 4 jobs 299
    /// MB/s, 8 jobs 330, 16 jobs 334; bench/runs/2026-11-24-truth/jobs.py, 3 rounds).
    pub fn jobs(&self) -> usize {
        match self.jobs {
            Some(n) => n as usize,
            None => {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                (4 * cpus).clamp(8, 16)
            }
        }
    }

    /// Take the order of the options that set --preserve's attributes
    /// from clap's `matches` of this command line (which the fields lose).
    pub fn with_preserve_order(mut self, matches: &clap::ArgMatches) -> Self {
        let mut order: Vec<(usize, String, bool)> = Vec::new();
        let flags = [
            ("archive", "all"),
            ("no_dereference_preserve_links", "links"),
            ("preserve_default", "mode,ownership,timestamps"),
        ];
        for (id, list) in flags {
            if matches.get_flag(id) {
                for at in matches.indices_of(id).into_iter().flatten() {
                    order.push((at, list.to_owned(), true));
                }
            }
        }
        for (id, on) in [("preserve", true), ("no_preserve", false)] {
            let lists = matches.get_many::<String>(id).into_iter().flatten();
            let at = matches.indices_of(id).into_iter().flatten();
            order.extend(at.zip(lists).map(|(at, list)| (at, list.clone(), on)));
        }
        order.sort_by_key(|(at, _, _)| *at);
        self.preserve_order = order.into_iter().map(|(_, l, on)| (l, on)).collect();
        self
    }

    /// The options as the copy uses them; GNU options ubio cp lacks are refused.
    pub fn options(&self) -> Result<Options> {
        let unsupported = [
            (self.strip_trailing_slashes, "--strip-trailing-slashes"),
            (self.keep_directory_symlink, "--keep-directory-symlink"),
            (self.debug, "--debug"),
            (self.context.is_some(), "-Z/--context"),
        ];
        if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
            bail!("option {name} is not supported by ubio cp");
        }
        if self.block == 0 {
            bail!("invalid --block 0: must be at least 1 byte");
        }
        let mut preserve = Preserve::default();
        for (list, on) in &self.preserve_order {
            let option = if *on { "--preserve" } else { "--no-preserve" };
            preserve.set(list, *on, option)?;
        }
        let recursive = self.recursive || self.archive;
        let link = match (self.link, self.symbolic_link) {
            (true, _) => LinkMode::Hard,
            (_, true) => LinkMode::Symbolic,
            _ => LinkMode::Copy,
        };
        let deref = if self.dereference {
            Deref::Always
        } else if self.dereference_command_line {
            Deref::CommandLine
        } else if self.no_dereference
            || self.no_dereference_preserve_links
            || self.archive
            // GNU: -r copies symlinks as symlinks, unless -l links their targets.
            || (recursive && link != LinkMode::Hard)
        {
            Deref::Never
        } else {
            Deref::Always
        };
        // GNU: a clone keeps the source's extents as they are, which
        // --sparse=always or never would change.
        if self.reflink == Reflink::Always && self.sparse != Sparse::Auto {
            bail!(
                "--reflink can be used only with --sparse=auto\n{}",
                super::try_help()
            );
        }
        let backups = self.backup.is_some() || self.backup_default || self.suffix.is_some();
        // GNU: a backup of what -n keeps makes no sense (whatever the
        // control, none too); a later -i overrides -n, and then it is fine.
        if backups && self.no_clobber {
            bail!(
                "options --backup and --no-clobber are mutually exclusive\n{}",
                super::try_help()
            );
        }
        let backup = if backups {
            let control = self.backup.as_deref().filter(|c| !c.is_empty());
            Backup::new(control, self.suffix.clone())?
        } else {
            Backup::none()
        };
        let update = self.update.as_deref();
        Ok(Options {
            preserve,
            no_clobber: self.no_clobber || update == Some("none"),
            interactive: self.interactive,
            update: update == Some("older"),
            force: self.force,
            remove_destination: self.remove_destination,
            attributes_only: self.attributes_only,
            backup,
            link,
            walk: Walk {
                recursive,
                deref,
                one_file_system: self.one_file_system,
                copy_contents: self.copy_contents,
            },
            copy: ubio::copy::CopyOptions {
                block: usize::try_from(self.block)
                    .map_err(|_| anyhow::anyhow!("invalid --block {}: too large", self.block))?,
                sparse: match self.sparse {
                    Sparse::Auto => ubio::copy::Sparse::Auto,
                    Sparse::Always => ubio::copy::Sparse::Always,
                    Sparse::Never => ubio::copy::Sparse::Never,
                },
                reflink: match self.reflink {
                    Reflink::Auto => ubio::copy::Reflink::Auto,
                    Reflink::Always => ubio::copy::Reflink::Always,
                    Reflink::Never => ubio::copy::Reflink::Never,
                },
                ..Default::default()
            },
            sync: self.sync,
            backend: self.backend,
            data_path: self.data_path,
            window: self.window,
        })
    }
}

/// GNU cp 9.1's long options (from its `--help`), in which a prefix is
/// looked up first: `--b` is --backup as in GNU, though ubio's own
/// --backend and --block begin the same.
const GNU_LONG_OPTIONS: &[&str] = &[
    "archive",
    "attributes-only",
    "backup",
    "context",
    "copy-contents",
    "dereference",
    "force",
    "help",
    "interactive",
    "link",
    "no-clobber",
    "no-dereference",
    "no-preserve",
    "no-target-directory",
    "one-file-system",
    "parents",
    "preserve",
    "recursive",
    "reflink",
    "remove-destination",
    "sparse",
    "strip-trailing-slashes",
    "suffix",
    "symbolic-link",
    "target-directory",
    "update",
    "verbose",
    "version",
];

/// Long options written as an unambiguous prefix (`--parent`,
/// `--b=simple`) spelled out, as GNU's getopt_long takes them: an exact name
/// wins, then the one GNU option the prefix begins, then the one of all
/// (`all`: every long option `ubio cp` has). An ambiguous prefix is GNU's
/// usage error. Nothing after `--` is an option.
pub fn spell_out_long_options(args: &mut [OsString], all: &[String]) -> Result<()> {
    for arg in args.iter_mut() {
        let Some(text) = arg.to_str().and_then(|a| a.strip_prefix("--")) else {
            continue;
        };
        if text.is_empty() {
            break;
        }
        let (name, value) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (text, None),
        };
        if all.iter().any(|a| a == name) {
            continue;
        }
        let gnu: Vec<&str> = GNU_LONG_OPTIONS
            .iter()
            .copied()
            .filter(|o| o.starts_with(name))
            .collect();
        let ours: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|o| o.starts_with(name))
            .collect();
        let found = match (gnu.as_slice(), ours.as_slice()) {
            ([one], _) | ([], [one]) => *one,
            ([], []) => continue, // clap says it is unknown
            (gnu_many, ours_many) => {
                let many = if gnu_many.is_empty() {
                    ours_many
                } else {
                    gnu_many
                };
                let list: Vec<String> = many.iter().map(|o| format!("'--{o}'")).collect();
                bail!(
                    "option '--{name}' is ambiguous; possibilities: {}\n{}",
                    list.join(" "),
                    try_help()
                );
            }
        };
        *arg = match value {
            Some(v) => format!("--{found}={v}").into(),
            None => format!("--{found}").into(),
        };
    }
    Ok(())
}
