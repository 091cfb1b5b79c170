//! `ubio probe [PATH]`: what this kernel and filesystem can do, and the
//! backend `auto` picks there.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A file or directory (default: the current directory).
    path: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let path = args.path.unwrap_or_else(|| PathBuf::from("."));
    let p = ubio::probe_path(&path)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
        return Ok(ExitCode::SUCCESS);
    }
    let yn = |b: bool| if b { "yes" } else { "no" };
    println!("path:              {}", path.display());
    println!("kernel:            {}", p.kernel);
    println!("filesystem:        {}", p.fs.fs_type);
    println!(
        "RWF_DONTCACHE:     {} ({})",
        yn(p.fs.dontcache.available),
        p.fs.dontcache.detail
    );
    println!(
        "cachestat():       {} ({})",
        yn(p.cachestat.available),
        p.cachestat.detail
    );
    println!(
        "mincore() truthful:{}",
        if p.mincore_trustworthy {
            " yes"
        } else {
            " no (file not writable by caller)"
        }
    );
    match p.fs.dio_align {
        Some(a) => println!(
            "O_DIRECT:          yes (memory align {}, offset align {}; {})",
            a.mem_align, a.offset_align, p.fs.direct_io.detail
        ),
        None => println!("O_DIRECT:          no ({})", p.fs.direct_io.detail),
    }
    match p.fs.read_ahead_kb {
        Some(kb) => println!("readahead:         {kb} KiB"),
        None => println!("readahead:         unknown (assuming up to 32 MiB)"),
    }
    if p.fs.pages_are_storage {
        println!("note:              the page cache is this filesystem's storage");
    }
    println!("auto backend:      {} ({})", p.auto, p.auto_reason);
    Ok(ExitCode::SUCCESS)
}
