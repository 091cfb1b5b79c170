//! The machine, the software and the storage, for the report.

use crate::harness::schema::Environment;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// What the report says about where it ran. `git_commit` comes from the
/// caller (the binary knows its source tree, the library does not).
pub fn gather(
    dir: &Path,
    filesystem: &str,
    device: &str,
    cgroup_version: &str,
    git_commit: Option<String>,
) -> Environment {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mem_total_bytes = ubio_testenv::procfs::meminfo()
        .ok()
        .and_then(|m| m.get("MemTotal").copied())
        .unwrap_or(0);
    let probe = ubio::probe_path(dir)
        .map(|p| serde_json::to_value(p).unwrap_or_default())
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
    Environment {
        tool_version: format!("ubio {}", env!("CARGO_PKG_VERSION")),
        git_commit,
        kernel: ubio::sys::kernel_release(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default(),
        cpu_model,
        cpus,
        mem_total_bytes,
        cgroup_version: cgroup_version.to_owned(),
        filesystem: filesystem.to_owned(),
        device: device.to_owned(),
        probe,
        tools: tool_versions(),
    }
}

/// First lines of `fio --version`, `cp --version`, `dd --version`,
/// `rsync --version`, and whether `nocache` is installed.
pub fn tool_versions() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for tool in ["fio", "cp", "dd", "rsync"] {
        if let Some(v) = first_line(tool, &["--version"]) {
            m.insert(tool.to_owned(), v);
        }
    }
    if let Ok(p) = ubio_testenv::require_tool("nocache") {
        m.insert("nocache".to_owned(), format!("installed ({})", p.display()));
    }
    m
}

fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
}

/// `git describe --always --dirty` of the tree `path` is in, if it is one.
pub fn git_describe(path: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(path)
        .args(["describe", "--always", "--dirty"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}
