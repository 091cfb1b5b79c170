//! `ubio cat FILE...`: concatenate files to stdout without caching them.

use anyhow::{Context, Result};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Files to print ("-" is stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Backend: auto, kernel, emulated, direct or buffered.
    #[arg(long, default_value = "auto")]
    backend: ubio::BackendKind,
}

const BUF: usize = 1 << 20;

pub fn run(args: Args) -> Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut buf = ubio::AlignedBuf::page_aligned(BUF);
    let mut status = ExitCode::SUCCESS;
    for path in &args.files {
        let result = if path.as_os_str() == "-" {
            copy(&mut io::stdin().lock(), &mut out, &mut buf)
        } else {
            match ubio::OpenOptions::new()
                .read(true)
                .backend(args.backend)
                .open(path)
            {
                Ok(mut f) => copy(&mut f, &mut out, &mut buf).and_then(|()| f.close().map(drop)),
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(()) => {}
            // A closed pipe downstream (`ubio cat big | head`) is not an error.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            Err(e) => {
                eprintln!("ubio cat: {e}");
                status = ExitCode::FAILURE;
            }
        }
    }
    match out.flush() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        r => r.context("write stdout")?,
    }
    Ok(status)
}

fn copy(src: &mut impl Read, out: &mut impl Write, buf: &mut [u8]) -> io::Result<()> {
    loop {
        let n = match src.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Keep the kind (BrokenPipe is handled by the caller), add the context.
        out.write_all(&buf[..n])
            .map_err(|e| io::Error::new(e.kind(), format!("write stdout: {e}")))?;
    }
}
