//! `ubio __generate-docs DIR` (hidden): man pages and shell completions made
//! from the clap definitions themselves, so they never drift from `--help`.
//! scripts/install.sh runs it and installs what it writes:
//!
//!     DIR/man/ubio.1, ubio-cp.1, ubio-bench-run.1, ...  (one page per command)
//!     DIR/completions/ubio.bash, _ubio (zsh), ubio.fish

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Where to write man/ and completions/.
    dir: PathBuf,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).with_context(|| format!("create directory {}", d.display()))?;
    }
    clap_mangen::generate_to(crate::Cli::command(), &man)
        .with_context(|| format!("write man pages to {}", man.display()))?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut crate::Cli::command(), "ubio", &completions)
            .with_context(|| format!("write {shell} completion to {}", completions.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
