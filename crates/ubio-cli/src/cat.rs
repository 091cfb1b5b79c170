//! `ubio cat FILE...`: concatenate files to stdout without caching them.
//! Messages and exit status as GNU cat: `ubio cat: nope: No such file or
//! directory` and on; `write error: ...` stops; 1 if anything failed.

use crate::msg;
use anyhow::Result;
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
    #[command(flatten)]
    data_path: crate::data_path::DataPathArgs,
}

const BUF: usize = 1 << 20;

/// What failed: reading a file (report it and go on) or writing stdout (stop).
enum Failure {
    Input(io::Error),
    Output(io::Error),
}

pub fn run(args: Args) -> Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut buf = ubio::AlignedBuf::page_aligned(BUF);
    let mut status = ExitCode::SUCCESS;
    for path in &args.files {
        let result = if path.as_os_str() == "-" {
            copy(&mut io::stdin().lock(), &mut out, &mut buf)
        } else {
            match args
                .data_path
                .apply(ubio::OpenOptions::new().read(true).backend(args.backend))
                .open(path)
            {
                Ok(mut f) => copy(&mut f, &mut out, &mut buf)
                    .and_then(|()| f.close().map(drop).map_err(Failure::Input)),
                Err(e) => Err(Failure::Input(e)),
            }
        };
        match result {
            Ok(()) => {}
            // A closed pipe downstream (`ubio cat big | head`) is not an error.
            Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                return Ok(ExitCode::SUCCESS)
            }
            Err(Failure::Output(e)) => return Ok(write_error(&e)),
            Err(Failure::Input(e)) => {
                eprintln!("ubio cat: {}: {}", path.display(), msg::reason(&e));
                status = ExitCode::FAILURE;
            }
        }
    }
    match out.flush() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(status),
        Err(e) => Ok(write_error(&e)),
        Ok(()) => Ok(status),
    }
}

fn write_error(e: &io::Error) -> ExitCode {
    eprintln!("ubio cat: write error: {}", msg::reason(e));
    ExitCode::FAILURE
}

fn copy(src: &mut impl Read, out: &mut impl Write, buf: &mut [u8]) -> Result<(), Failure> {
    loop {
        let n = match src.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Input(e)),
        };
        out.write_all(&buf[..n]).map_err(Failure::Output)?;
    }
}
