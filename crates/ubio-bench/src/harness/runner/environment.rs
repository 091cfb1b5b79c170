//! The machine, the software and the storage, for the report.

use crate::harness::data_path::DataPath;
use crate::harness::schema::{Environment, Virtualization};
use crate::page_reporting;
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
    let mem_total_bytes = ubio::procfs::meminfo_field("MemTotal").unwrap_or(0);
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
        virtualization: virtualization(
            detect_virt(),
            Path::new(DMI),
            &cpuinfo,
            &std::fs::read_to_string("/proc/cmdline").unwrap_or_default(),
        ),
        free_page_reporting: page_reporting::parameters(Path::new(page_reporting::SYSFS)),
        ubio_settings: DataPath::from_env().map(|d| d.named()).unwrap_or_default(),
    }
}

/// Where the firmware's identity is (absent on Firecracker).
const DMI: &str = "/sys/class/dmi/id";

/// `systemd-detect-virt --vm` and `--container`, where it is installed
/// ("none" and failures are None).
fn detect_virt() -> (Option<String>, Option<String>) {
    let ask = |flag| first_line("systemd-detect-virt", &[flag]).filter(|v| v != "none");
    (ask("--vm"), ask("--container"))
}

/// What the machine runs on, from systemd-detect-virt's answers (vm,
/// container), the DMI directory, /proc/cpuinfo and the kernel command line.
pub fn virtualization(
    (vm, container): (Option<String>, Option<String>),
    dmi_dir: &Path,
    cpuinfo: &str,
    cmdline: &str,
) -> Virtualization {
    let read = |name: &str| {
        std::fs::read_to_string(dmi_dir.join(name))
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let dmi_parts: Vec<String> = ["sys_vendor", "product_name"]
        .into_iter()
        .filter_map(read)
        .collect();
    let dmi = (!dmi_parts.is_empty()).then(|| dmi_parts.join(" "));
    let cpuinfo_hypervisor = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    // Firecracker gives no DMI; its guests' command lines usually name it.
    let named = |text: &str| text.to_lowercase().contains("firecracker");
    let hypervisor = if dmi.as_deref().is_some_and(named) || named(cmdline) {
        Some("Firecracker".to_owned())
    } else {
        dmi.clone().filter(|_| cpuinfo_hypervisor || vm.is_some())
    };
    let mut summary = match (&hypervisor, &vm) {
        (Some(h), Some(v)) => format!("{h} ({v}) VM"),
        (Some(h), None) => format!("{h} VM"),
        (None, Some(v)) => format!("{v} VM"),
        (None, None) if cpuinfo_hypervisor => "a VM (cpuinfo's hypervisor flag)".to_owned(),
        (None, None) => "no VM found (bare metal?)".to_owned(),
    };
    if let Some(c) = &container {
        summary += &format!(", in a {c} container");
    }
    Virtualization {
        summary,
        vm,
        container,
        dmi,
        cpuinfo_hypervisor,
        hypervisor,
    }
}

/// First lines of `fio --version`, `cp --version`, `dd --version`,
/// `rsync --version`, `xcp --version`, `cat --version`, and whether
/// `nocache` is installed.
pub fn tool_versions() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for tool in ["fio", "cp", "dd", "rsync", "xcp", "cat"] {
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

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &str = "processor : 0\nflags : fpu sse2 hypervisor lahf_lm\n";

    #[test]
    fn firecracker_is_named_without_dmi() {
        let none = Path::new("/nonexistent-dmi");
        let v = virtualization(
            (Some("kvm".into()), Some("docker".into())),
            none,
            FLAGS,
            "console=ttyS0 -- --firecracker-init",
        );
        assert_eq!(v.summary, "Firecracker (kvm) VM, in a docker container");
        assert!(v.cpuinfo_hypervisor && v.dmi.is_none());
        let v = virtualization((None, None), none, FLAGS, "quiet");
        assert_eq!(v.summary, "a VM (cpuinfo's hypervisor flag)");
        let v = virtualization((None, None), none, "flags : fpu sse2\n", "quiet");
        assert_eq!(v.summary, "no VM found (bare metal?)");
        assert!(!v.cpuinfo_hypervisor);
    }

    #[test]
    fn dmi_names_the_machine() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sys_vendor"), "QEMU\n").unwrap();
        std::fs::write(dir.path().join("product_name"), "Standard PC (Q35)\n").unwrap();
        let v = virtualization((Some("kvm".into()), None), dir.path(), FLAGS, "");
        assert_eq!(v.dmi.as_deref(), Some("QEMU Standard PC (Q35)"));
        assert_eq!(v.summary, "QEMU Standard PC (Q35) (kvm) VM");
    }

    /// The report of this machine says what it is and whether free page
    /// reporting is on, whatever the answers.
    #[test]
    fn the_environment_has_both_fields() {
        let dir = tempfile::tempdir().unwrap();
        let e = gather(dir.path(), "ext4", "/dev/x", "v1", None);
        assert!(!e.virtualization.summary.is_empty());
        let sysfs = Path::new(page_reporting::SYSFS);
        assert_eq!(e.free_page_reporting.is_some(), sysfs.is_dir());
        let json = serde_json::to_value(&e).unwrap();
        assert!(json["virtualization"]["summary"].is_string());
        assert!(json.get("free_page_reporting").is_some());
    }
}
