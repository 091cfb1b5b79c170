//! The `ubio` command.

#![deny(unsafe_code)]

mod cat;
mod cp;
mod data_path;
mod evict;
mod external;
mod msg;
mod out;
mod policy;
mod probe;
mod run;
mod shim;
mod stat;

/// Size arguments, shared with ubio-bench.
use ubio_cmd::size;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// Uncached buffered I/O: stream big files without wrecking the page cache.
#[derive(Parser)]
#[command(
    name = "ubio",
    version = ubio_cmd::VERSION,
    after_help = "Examples:\n  ubio cp -a /data/backup /mnt/archive\n  ubio cat big.log | grep ERROR\n  ubio run -- tar cf /mnt/backup.tar /data\n\nSee 'ubio COMMAND --help' and the man pages ubio(1), ubio-cp(1), ..."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what the kernel and a filesystem can do, and the backend auto picks
    #[command(
        after_help = "Examples:\n  ubio probe            # the current directory\n  ubio probe /data --json"
    )]
    Probe(probe::Args),
    /// Concatenate files to standard output without caching them
    #[command(
        after_help = "Examples:\n  ubio cat big.log | grep ERROR\n  ubio cat part1 part2 > whole"
    )]
    Cat(cat::Args),
    /// Copy files and directories like GNU cp, without caching them
    // A repeated option is no error: the last one counts, as in GNU's getopt.
    #[command(
        version = ubio_cmd::VERSION,
        args_override_self = true,
        override_usage = "ubio cp [OPTIONS] SRC DST\n       ubio cp [OPTIONS] SRC... DIRECTORY\n       ubio cp [OPTIONS] -t DIRECTORY SRC...",
        after_help = "Examples:\n  ubio cp big.img /mnt/backup/\n  ubio cp -a photos/ /mnt/archive/photos\n  ubio cp -u --backup=numbered -t /mnt/backup *.log"
    )]
    Cp(Box<cp::Args>),
    /// Show how much of each file is in the page cache (cached, dirty, writeback)
    #[command(
        after_help = "Examples:\n  ubio stat big.img\n  ubio stat -r /var/lib/postgresql --json"
    )]
    Stat(stat::Args),
    /// Drop files' clean pages from the page cache
    #[command(after_help = "Examples:\n  ubio evict big.img\n  ubio evict -r --sync /data/done")]
    Evict(evict::Args),
    /// Stream a dataset larger than a memory cgroup, buffered and with ubio, side by side (runs ubio-bench demo)
    Demo(external::Args),
    /// Run an unmodified program (and its children) with uncached I/O
    #[command(
        after_help = "Examples:\n  ubio run -- tar cf /mnt/backup.tar /data\n  ubio run --window 64M --log -- rsync -a src/ dst/"
    )]
    Run(run::Args),
    /// Apply uncached I/O to a running process and its children (`ubio run --pid PID`)
    #[command(
        after_help = "Examples:\n  ubio attach 4242          # a backup that is already running\n  ubio attach --log $(pgrep -o restic)"
    )]
    Attach(run::AttachArgs),
    /// Apply uncached I/O to every process of configured scopes (a daemon)
    #[command(
        after_help = "Examples:\n  ubio policy check /etc/ubio/policy.toml\n  ubio policy run --config /etc/ubio/policy.toml\n  ubio policy status --json"
    )]
    Policy(policy::Args),
    /// Benchmark buffered I/O against its alternatives (runs ubio-bench, installed on its own)
    Bench(external::Args),
    #[command(name = "__generate-docs", hide = true)]
    GenerateDocs(ubio_cmd::docs::Args),
}

/// GNU cp and cat exit 1 on a bad command line (checked with coreutils
/// 9.1), not clap's 2: `ubio cp` and `ubio cat` stand in for them.
fn usage_exit_code(argv: &[OsString]) -> u8 {
    match argv.get(1) {
        Some(c) if c == "cp" || c == "cat" => 1,
        _ => 2,
    }
}

/// The names under which ubio is cp (a symlink or copy of it by one of
/// them on a PATH). Any other name is ubio: a renamed binary (`ubio.old`)
/// must not quietly become cp and copy a file named like a command.
const CP_NAMES: [&str; 2] = ["cp", "ubio-cp"];

/// The command line as `ubio COMMAND ...`. Invoked as `cp` or `ubio-cp`,
/// ubio is cp: it stands in for GNU's cp on a PATH and names itself as
/// invoked in its messages (`cp: ...`).
fn command_line() -> Vec<OsString> {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    let invoked = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .filter(|n| CP_NAMES.contains(n))
        .map(str::to_owned);
    if let Some(name) = invoked {
        cp::invoked_as(name);
        argv.splice(0..1, ["ubio".into(), "cp".into()]);
    }
    if argv.get(1).is_some_and(|c| c == "cp") {
        let cp = Cli::command();
        let longs: Vec<String> = cp
            .find_subcommand("cp")
            .into_iter()
            .flat_map(|c| c.get_arguments())
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect();
        if let Err(e) = cp::spell_out_long_options(&mut argv[2..], &longs) {
            eprintln!("{}: {e}", cp::name());
            std::process::exit(1);
        }
    }
    argv
}

/// How the command names itself in messages: "ubio cp" (or "cp" when
/// invoked as cp), "ubio" before a command is known.
fn program_name(argv: &[OsString]) -> String {
    match argv.get(1).and_then(|c| c.to_str()) {
        Some("cp") => cp::name().to_owned(),
        Some(c) if !c.starts_with('-') => format!("ubio {c}"),
        _ => "ubio".to_owned(),
    }
}

fn main() -> ExitCode {
    ubio_cmd::init_log();
    let argv = command_line();
    let parsed = Cli::command().try_get_matches_from(&argv).and_then(|m| {
        let cli = Cli::from_arg_matches(&m).map_err(|e| e.format(&mut Cli::command()))?;
        Ok((cli, m))
    });
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        // cp ends a usage error with GNU's line, naming itself as invoked.
        Err(e) if e.use_stderr() && argv.get(1).is_some_and(|c| c == "cp") => {
            let text = e.render().to_string();
            let text = text
                .trim_end()
                .trim_end_matches("For more information, try '--help'.");
            eprintln!("{}\n{}", text.trim_end(), cp::try_help());
            return ExitCode::from(usage_exit_code(&argv));
        }
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(usage_exit_code(&argv));
        }
        // --help, --version: a write that fails (a full disk) fails, as in GNU.
        Err(e) => {
            use std::io::Write;
            // cp's version in GNU's form, saying whose cp it is.
            let printed = if e.kind() == clap::error::ErrorKind::DisplayVersion
                && argv.get(1).is_some_and(|c| c == "cp")
            {
                let mut out = std::io::stdout();
                writeln!(out, "cp (ubio) {}", ubio_cmd::VERSION)
            } else {
                e.print()
            };
            if let Err(w) = printed.and_then(|()| std::io::stdout().flush()) {
                eprintln!("{}: write error: {}", program_name(&argv), msg::reason(&w));
                return ExitCode::FAILURE;
            }
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let who = program_name(&argv);
    let result = match cli.command {
        Command::Probe(a) => probe::run(a),
        Command::Cat(a) => cat::run(a),
        Command::Cp(a) => {
            let cp = matches.subcommand_matches("cp").expect("cp's matches");
            cp::run(a.with_preserve_order(cp))
        }
        Command::Stat(a) => stat::run(a),
        Command::Evict(a) => evict::run(a),
        Command::Demo(a) => external::exec_bench("demo", Some("demo"), a),
        Command::Run(a) => run::run(a),
        Command::Attach(a) => run::attach_cmd(a),
        Command::Policy(a) => policy::run(a),
        Command::Bench(a) => external::exec_bench("bench", None, a),
        Command::GenerateDocs(a) => {
            ubio_cmd::docs::run(a, Cli::command(), "ubio", &["bench", "demo"])
        }
    };
    ubio_cmd::finish(&who, result, msg::anyhow)
}
