//! `ubio run [--window SIZE] [--backend NAME] [--log] -- CMD [ARGS...]`: run
//! an unmodified program with the LD_PRELOAD shim (libubio_preload.so), so
//! that its file I/O is uncached. The settings reach the shim through the
//! environment (UBIO_WINDOW, UBIO_BACKEND, UBIO_LOG); children of the
//! program inherit them. `ubio` replaces itself with the program (exec), so
//! the exit status is the program's.
//!
//! A statically linked program cannot load the shim: `ubio run` says so on
//! stderr and runs it anyway, uncached no more (refusing would break
//! scripts that wrap whatever they are given).

use anyhow::{bail, Context, Result};
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Dirty + writeback bytes per file (e.g. 16M).
    #[arg(long, value_parser = crate::size::parse_nonzero)]
    window: Option<u64>,
    /// Backend: auto, kernel, emulated, direct or buffered.
    #[arg(long)]
    backend: Option<ubio::BackendKind>,
    /// Log each managed file's backend and statistics at close (to stderr,
    /// or to the file named by UBIO_LOG_FILE).
    #[arg(long)]
    log: bool,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

const LIB: &str = "libubio_preload.so";

pub fn run(args: Args) -> Result<ExitCode> {
    let lib = find_shim()?;
    let (cmd, rest) = args.command.split_first().expect("clap requires CMD");
    let Some(exe) = which(cmd) else {
        eprintln!("ubio run: {}: command not found", Path::new(cmd).display());
        return Ok(ExitCode::from(127));
    };
    if exe.is_dir() {
        eprintln!("ubio run: {}: Is a directory", exe.display());
        return Ok(ExitCode::from(126));
    }
    if let Some(why) = not_dynamic(&exe) {
        eprintln!(
            "ubio run: warning: {} {why}: the shim cannot be loaded into it; running it with ordinary (cached) I/O",
            exe.display()
        );
    }
    let mut preload = OsString::from(&lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let mut c = std::process::Command::new(cmd);
    c.args(rest).env("LD_PRELOAD", preload);
    if let Some(w) = args.window {
        c.env("UBIO_WINDOW", w.to_string());
    }
    if let Some(b) = args.backend {
        c.env("UBIO_BACKEND", b.name());
    }
    if args.log {
        c.env("UBIO_LOG", "debug");
    }
    let err = c.exec();
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    eprintln!("ubio run: cannot run {}: {err}", Path::new(cmd).display());
    Ok(ExitCode::from(code))
}

/// The shim: UBIO_PRELOAD if set, else next to this binary (target/<profile>/
/// in a build tree, or the directory ubio was installed to), as an absolute
/// path so that children in other directories find it too.
fn find_shim() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("UBIO_PRELOAD").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return std::fs::canonicalize(&p)
            .with_context(|| format!("UBIO_PRELOAD={}: no such shim library", p.display()));
    }
    let exe = std::env::current_exe().context("cannot find the ubio binary's directory")?;
    let dir = exe.parent().context("the ubio binary has no directory")?;
    for cand in [dir.join(LIB), dir.join("../lib").join(LIB)] {
        if cand.is_file() {
            return Ok(std::fs::canonicalize(&cand)?);
        }
    }
    bail!(
        "{LIB} not found next to {} (build it with `cargo build --release -p ubio-preload`, or set UBIO_PRELOAD)",
        exe.display()
    )
}

/// The program `cmd` names, searched in PATH as exec does.
fn which(cmd: &OsStr) -> Option<PathBuf> {
    let p = Path::new(cmd);
    if p.components().count() > 1 || cmd.to_string_lossy().contains('/') {
        // Anything that exists: exec's own error (EACCES, ELOOP) says why
        // it cannot run, better than "command not found".
        return p.symlink_metadata().is_ok().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
}

/// Why the shim cannot go into `exe`, if it cannot: an ELF executable
/// without a PT_INTERP program header is statically linked (the dynamic
/// loader that honours LD_PRELOAD never runs). Scripts (#!) and unreadable
/// files are left for the kernel to judge.
fn not_dynamic(exe: &Path) -> Option<&'static str> {
    let mut head = Vec::new();
    std::fs::File::open(exe)
        .ok()?
        .take(64 << 10)
        .read_to_end(&mut head)
        .ok()?;
    if head.len() < 64 || &head[..4] != b"\x7fELF" {
        return None;
    }
    let le = head[5] == 1;
    let u16_at = |o: usize| {
        let b = [head[o], head[o + 1]];
        if le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let u32_at = |o: usize| {
        let b = [head[o], head[o + 1], head[o + 2], head[o + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[o..o + 8]);
        if le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    };
    // ELFCLASS32: e_phoff at 28 (4 bytes), e_phentsize at 42, e_phnum at 44.
    // ELFCLASS64: e_phoff at 32 (8 bytes), e_phentsize at 54, e_phnum at 56.
    let (phoff, entsize, num) = match head[4] {
        1 => (
            u32_at(28) as usize,
            u16_at(42) as usize,
            u16_at(44) as usize,
        ),
        2 => (
            u64_at(32) as usize,
            u16_at(54) as usize,
            u16_at(56) as usize,
        ),
        _ => return None,
    };
    const PT_INTERP: u32 = 3;
    for i in 0..num {
        let o = phoff.checked_add(i.checked_mul(entsize)?)?;
        if o + 4 > head.len() {
            return None; // headers beyond what we read: do not guess
        }
        if u32_at(o) == PT_INTERP {
            return None;
        }
    }
    Some("is statically linked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_programs_are_recognised() {
        assert_eq!(not_dynamic(Path::new("/bin/sh")), None);
        assert_eq!(not_dynamic(Path::new("/etc/passwd")), None);
    }
}
