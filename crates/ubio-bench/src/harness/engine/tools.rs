//! External copy commands, one per file (each thread runs its files one
//! after the other), then an fsync of every copy: cp, `nocache cp`, dd with
//! nocache flags, rsync, `ubio cp` and `ubio run -- cp`.

use super::{EngineJob, LaneOutcome, Shared};
use crate::clock::monotonic_secs;
use crate::harness::mode::CopyTool;
use crate::path_context;
use std::io::{self, Read};
use std::path::Path;
use std::process::{Command, Stdio};

/// The command line copying `src` to `dst` (program first); `ubio` is the
/// ubio binary.
pub fn argv(tool: CopyTool, ubio: &Path, block: u64, src: &Path, dst: &Path) -> Vec<String> {
    let (s, d) = (src.display().to_string(), dst.display().to_string());
    let ubio = ubio.display().to_string();
    match tool {
        CopyTool::Cp => vec!["cp".into(), s, d],
        CopyTool::NocacheCp => vec!["nocache".into(), "cp".into(), s, d],
        CopyTool::DdNocache => vec![
            "dd".into(),
            format!("if={s}"),
            format!("of={d}"),
            format!("bs={block}"),
            "iflag=nocache".into(),
            "oflag=nocache".into(),
            "status=none".into(),
        ],
        // A local whole-file copy: no delta algorithm, written in place.
        CopyTool::Rsync => vec![
            "rsync".into(),
            "--whole-file".into(),
            "--inplace".into(),
            s,
            d,
        ],
        CopyTool::UbioCp => vec![ubio, "cp".into(), s, d],
        CopyTool::UbioRunCp => vec![ubio, "run".into(), "--".into(), "cp".into(), s, d],
    }
}

/// The programs a tool needs (besides the ubio binary).
pub fn programs(tool: CopyTool) -> &'static [&'static str] {
    match tool {
        CopyTool::Cp | CopyTool::UbioCp | CopyTool::UbioRunCp => &["cp"],
        CopyTool::NocacheCp => &["nocache", "cp"],
        CopyTool::DdNocache => &["dd"],
        CopyTool::Rsync => &["rsync"],
    }
}

pub(super) fn lane(
    job: &EngineJob,
    tool: CopyTool,
    thread: u32,
    shared: &Shared,
) -> io::Result<LaneOutcome> {
    let layout = &job.layout;
    let mut copies = Vec::new();
    for f in 0..layout.files_per_thread {
        if shared.stopped() {
            break;
        }
        let (src, dst) = (layout.source(thread, f), layout.copy(thread, f));
        let argv = argv(tool, &job.ubio_exe, layout.block_bytes, &src, &dst);
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
        copies.push(dst);
    }
    let io_end = monotonic_secs();
    for dst in &copies {
        std::fs::File::open(dst)
            .and_then(|f| f.sync_all())
            .map_err(|e| path_context(e, "fsync", dst))?;
    }
    let template = argv(
        tool,
        &job.ubio_exe,
        layout.block_bytes,
        Path::new("SRC"),
        Path::new("DST"),
    );
    Ok(LaneOutcome {
        backend: tool.name().to_owned(),
        reason: format!("`{}` per file, then fsync of the copy", template.join(" ")),
        ubio_stats: Vec::new(),
        io_end_mono_secs: io_end,
        end_mono_secs: 0.0,
    })
}
