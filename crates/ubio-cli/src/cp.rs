//! `ubio cp SRC DST`: copy one file through the library. The source's pages
//! that were cached before stay cached; neither file stays in the cache.

use crate::size;
use anyhow::{bail, Context, Result};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    src: PathBuf,
    /// Destination file, or a directory to copy into.
    dst: PathBuf,
    /// Backend: auto, kernel, emulated, direct or buffered.
    #[arg(long, default_value = "auto")]
    backend: ubio::BackendKind,
    /// Write-behind window (dirty + writeback bytes in flight), e.g. 16M.
    #[arg(long, value_parser = size::parse, default_value = "16M")]
    window: u64,
    /// Request size, e.g. 1M.
    #[arg(long, value_parser = size::parse, default_value = "1M")]
    block: u64,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Summary<'a> {
    src: &'a Path,
    dst: &'a Path,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    src_stats: ubio::Stats,
    dst_stats: ubio::Stats,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.block == 0 {
        bail!("invalid --block 0: must be at least 1 byte");
    }
    let dst = if args.dst.is_dir() {
        let name = args
            .src
            .file_name()
            .with_context(|| format!("copy {}: source has no file name", args.src.display()))?;
        args.dst.join(name)
    } else {
        args.dst.clone()
    };
    let src_meta =
        std::fs::metadata(&args.src).with_context(|| format!("stat {}", args.src.display()))?;
    if src_meta.is_dir() {
        bail!(
            "copy {}: is a directory (recursive copy comes with `cp -r`)",
            args.src.display()
        );
    }
    if let Ok(d) = std::fs::metadata(&dst) {
        if d.dev() == src_meta.dev() && d.ino() == src_meta.ino() {
            bail!(
                "copy {} to {}: are the same file",
                args.src.display(),
                dst.display()
            );
        }
    }
    let start = Instant::now();
    let mut src = ubio::OpenOptions::new()
        .read(true)
        .backend(args.backend)
        .open(&args.src)?;
    let mut out = ubio::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(src_meta.permissions().mode() & 0o7777)
        .backend(args.backend)
        .window(args.window)
        .open(&dst)?;
    let mut buf = vec![0u8; args.block as usize];
    let mut copied = 0u64;
    let result = (|| -> io::Result<()> {
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            io::Write::write_all(&mut out, &buf[..n])?;
            copied += n as u64;
        }
        Ok(())
    })();
    let src_stats = src.close();
    let dst_stats = out.close();
    let failure = result
        .err()
        .or(dst_stats.as_ref().err().map(ubio_error_copy));
    if let Some(e) = failure {
        bail!(
            "{e}\nubio cp: {} is incomplete ({} of {} bytes copied); {} is unchanged",
            dst.display(),
            copied,
            src_meta.len(),
            args.src.display()
        );
    }
    let (src_stats, dst_stats) = (src_stats?, dst_stats?);
    let secs = start.elapsed().as_secs_f64();
    if args.json {
        let s = Summary {
            src: &args.src,
            dst: &dst,
            bytes: copied,
            seconds: secs,
            mb_per_s: copied as f64 / 1e6 / secs,
            src_stats,
            dst_stats,
        };
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else if std::env::var_os("UBIO_VERBOSE").is_some() {
        eprintln!(
            "copied {} in {secs:.2} s ({:.0} MB/s) with {} -> {}",
            size::human(copied),
            copied as f64 / 1e6 / secs,
            src_stats.backend,
            dst_stats.backend
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn ubio_error_copy(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}
