//! External commands, one per file (each thread runs its files one after
//! the other). Copy tools (cp, `nocache cp`, dd with nocache flags, rsync,
//! xcp, `ubio cp`, `ubio run -- cp`) copy each file, then every copy is
//! fsynced; read tools (cat, dd, `ubio cat`, `ubio run -- cat`) read each
//! file to /dev/null. What each tool is, is its row of [`Tool::caps`].

use super::{EngineJob, LaneOutcome, Shared};
use crate::clock::monotonic_secs;
use crate::harness::mode::{Tool, WorkloadKind};
use crate::path_context;
use std::io::{self, Read};
use std::path::Path;
use std::process::{Command, Stdio};

/// The command line copying `src` to `dst`, or reading `src` (`dst` unused:
/// the harness sends stdout to /dev/null); program first; `ubio` is the
/// ubio binary.
pub fn argv(tool: Tool, ubio: &Path, block: u64, src: &Path, dst: &Path) -> Vec<String> {
    let (s, d) = (src.display().to_string(), dst.display().to_string());
    let ubio = ubio.display().to_string();
    match tool {
        Tool::Cp => vec!["cp".into(), s, d],
        Tool::NocacheCp => vec!["nocache".into(), "cp".into(), s, d],
        Tool::DdNocache => vec![
            "dd".into(),
            format!("if={s}"),
            format!("of={d}"),
            format!("bs={block}"),
            "iflag=nocache".into(),
            "oflag=nocache".into(),
            "status=none".into(),
        ],
        // A local whole-file copy: no delta algorithm, written in place.
        Tool::Rsync => vec![
            "rsync".into(),
            "--whole-file".into(),
            "--inplace".into(),
            s,
            d,
        ],
        Tool::Xcp => vec!["xcp".into(), s, d],
        Tool::UbioCp => vec![ubio, "cp".into(), s, d],
        Tool::UbioRunCp => vec![ubio, "run".into(), "--".into(), "cp".into(), s, d],
        Tool::Cat => vec!["cat".into(), s],
        Tool::Dd => vec![
            "dd".into(),
            format!("if={s}"),
            "of=/dev/null".into(),
            format!("bs={block}"),
            "status=none".into(),
        ],
        Tool::UbioCat => vec![ubio, "cat".into(), s],
        Tool::UbioRunCat => vec![ubio, "run".into(), "--".into(), "cat".into(), s],
    }
}

pub(super) fn lane(
    job: &EngineJob,
    tool: Tool,
    thread: u32,
    shared: &Shared,
) -> io::Result<LaneOutcome> {
    let layout = &job.layout;
    // check_mode left out every ubio tool when no ubio binary was found.
    let ubio = job.ubio_exe.as_deref().unwrap_or(Path::new("ubio"));
    let copies_files = tool.caps().workload == WorkloadKind::Copy;
    let mut copies = Vec::new();
    for f in 0..layout.files_per_thread {
        if shared.stopped() {
            break;
        }
        let (src, dst) = (layout.source(thread, f), layout.copy(thread, f));
        let argv = argv(tool, ubio, layout.block_bytes, &src, &dst);
        let cmdline = argv.join(" ");
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // A tool must not outlive the engine (killed on Ctrl-C), or its
        // cgroup could not be removed.
        ubio_testenv::cleanup::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(e.kind(), format!("{}: start `{cmdline}`: {e}", tool.name()))
        })?;
        let pid = child.id();
        shared
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = child.wait();
        shared
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != pid);
        let status = status?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "`{cmdline}` failed ({status}): {}",
                err.trim()
            )));
        }
        shared.add(layout.file_bytes);
        if copies_files {
            copies.push(dst);
        }
    }
    let io_end = monotonic_secs();
    for dst in &copies {
        std::fs::File::open(dst)
            .and_then(|f| f.sync_all())
            .map_err(|e| path_context(e, "fsync", dst))?;
    }
    let template = argv(
        tool,
        ubio,
        layout.block_bytes,
        Path::new("SRC"),
        Path::new("DST"),
    );
    let then = if copies_files {
        ", then fsync of the copy"
    } else {
        ", output to /dev/null"
    };
    Ok(LaneOutcome {
        backend: tool.name().to_owned(),
        reason: format!("`{}` per file{then}", template.join(" ")),
        ubio_stats: Vec::new(),
        io_end_mono_secs: io_end,
        end_mono_secs: 0.0,
    })
}
