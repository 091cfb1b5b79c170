//! `PROGRAM __generate-docs DIR` (hidden): man pages and shell completions made
//! from the clap definitions themselves, so they never drift from `--help`.
//! scripts/install.sh and the packages run it and install what it writes:
//!
//! ```text
//! DIR/man/ubio.1, ubio-cp.1, ...             (one page per command)
//! DIR/completions/ubio.bash, _ubio (zsh), ubio.fish
//! ```
//!
//! (`ubio-bench __generate-docs` the same for ubio-bench: ubio-bench.1,
//! ubio-bench-run.1, ...).

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Where to write man/ and completions/.
    dir: PathBuf,
}

/// Writes the pages and completions of `cli` (named `name`). The
/// subcommands in `elsewhere` get no page of their own: another program
/// documents them (`ubio bench` and `ubio demo` run ubio-bench, whose pages
/// are ubio-bench(1) and its own).
pub fn run(args: Args, cli: clap::Command, name: &str, elsewhere: &[&str]) -> Result<ExitCode> {
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).with_context(|| format!("create directory {}", d.display()))?;
    }
    let mut pages = cli.clone().disable_help_subcommand(true);
    pages.build();
    man_pages(pages, &man, elsewhere)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cli.clone(), name, &completions)
            .with_context(|| format!("write {shell} completion to {}", completions.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// clap_mangen's pages for `cmd` and each visible subcommand, with the
/// examples (`after_help`) under EXAMPLES rather than clap_mangen's EXTRA.
fn man_pages(cmd: clap::Command, dir: &Path, elsewhere: &[&str]) -> Result<()> {
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && !elsewhere.contains(&s.get_name()))
    {
        man_pages(sub.clone(), dir, &[])?;
    }
    let page = clap_mangen::Man::new(cmd);
    let mut roff = Vec::new();
    page.render(&mut roff)?;
    let roff = String::from_utf8(roff)?
        .replace(".SH EXTRA", ".SH EXAMPLES")
        .replace("Examples:\n", "");
    let path = dir.join(page.get_filename());
    std::fs::write(&path, roff).with_context(|| format!("write {}", path.display()))
}
