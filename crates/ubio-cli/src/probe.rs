//! `ubio probe [PATH]`: what this kernel and filesystem can do, and the
//! backend `auto` picks there.

use crate::out;
use anyhow::Result;
use std::fmt::Write as _;
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
        out::print_json(&p)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    let yn = |b: bool| if b { "yes" } else { "no" };
    writeln!(o, "path:              {}", path.display())?;
    writeln!(o, "kernel:            {}", p.kernel)?;
    writeln!(o, "filesystem:        {}", p.fs.fs_type)?;
    writeln!(
        o,
        "RWF_DONTCACHE:     {} ({})",
        yn(p.fs.dontcache.available),
        p.fs.dontcache.detail
    )?;
    writeln!(
        o,
        "cachestat():       {} ({})",
        yn(p.cachestat.available),
        p.cachestat.detail
    )?;
    writeln!(
        o,
        "mincore() truthful:{}",
        if p.mincore_trustworthy {
            " yes"
        } else {
            " no (file not writable by caller)"
        }
    )?;
    if let Some(r) = &p.real_file {
        let what = if r.available {
            "real file:        "
        } else {
            "real file:         not found:"
        };
        writeln!(o, "{what} {}", r.detail)?;
    }
    for (name, check) in [
        ("sees reads:        ", &p.verified.sees_reads),
        ("drop works:        ", &p.verified.drop_works),
        ("writeback works:   ", &p.verified.writeback_works),
    ] {
        if let Some(c) = check {
            writeln!(o, "{name}{} ({})", yn(c.available), c.detail)?;
        }
    }
    match p.fs.dio_align {
        Some(a) => writeln!(
            o,
            "O_DIRECT:          yes (memory align {}, offset align {}; {})",
            a.mem_align, a.offset_align, p.fs.direct_io.detail
        ),
        None => writeln!(o, "O_DIRECT:          no ({})", p.fs.direct_io.detail),
    }?;
    match p.fs.read_ahead_kb {
        Some(kb) => writeln!(o, "readahead:         {kb} KiB"),
        None => writeln!(o, "readahead:         unknown (assuming up to 32 MiB)"),
    }?;
    if p.fs.readahead_folios_reach_2mib() {
        writeln!(
            o,
            "note:              readahead of 2 MiB or more asks for 2 MiB folios; on fragmented \
             memory kswapd reclaims for them, and beside a stream whose pages ubio drops it takes \
             other processes' pages. While it does, the streams ubio's library and shim read \
             ahead in small folios themselves (--small-readahead); programs followed by the \
             engine (the daemon, ubio run of static programs) do not: 128 KiB (blockdev \
             --setra 256 DEVICE) avoids it there (docs/faq.md, \"Large readahead\")"
        )?;
    }
    if p.fs.pages_are_storage {
        writeln!(
            o,
            "note:              the page cache is this filesystem's storage"
        )?;
    }
    writeln!(o, "auto backend:      {} ({})", p.auto, p.auto_reason)?;
    if p.auto == ubio::BackendKind::Emulated && p.fs.dio_align.is_some() {
        writeln!(
            o,
            "direct calls:      per stream, aligned calls of {} KiB or more race the page cache \
             against O_DIRECT and go the faster way (--direct-reads, --direct-writes; the \
             verdict is in the stream's stats: cp --json=files)",
            ubio::DIRECT_MIN >> 10
        )?;
    }
    out::print(&o)?;
    Ok(ExitCode::SUCCESS)
}
