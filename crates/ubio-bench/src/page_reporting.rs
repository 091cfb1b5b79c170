//! Free page reporting (virtio-balloon): a guest kernel that hands free
//! memory back to its host, about 2 s after it is freed, in blocks of
//! 2^page_reporting_order pages. Every page taken from that memory again
//! costs a host fault, so on such a VM a buffered run's speed depends on
//! where its page-cache pages come from. The module's sysfs directory says
//! whether it is on, and `reported_kib` counts what it handed back.
//!
//! Every reader takes the directory, so tests can give a fake one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The module's directory on a kernel that has it.
pub const SYSFS: &str = "/sys/module/page_reporting";

/// The module's parameters (name -> value, trimmed), or None when the
/// directory does not exist (free page reporting not built in or not
/// loaded).
pub fn parameters(root: &Path) -> Option<BTreeMap<String, String>> {
    let dir = std::fs::read_dir(root.join("parameters")).ok()?;
    let mut params = BTreeMap::new();
    for entry in dir.flatten() {
        if let Ok(v) = std::fs::read_to_string(entry.path()) {
            params.insert(
                entry.file_name().to_string_lossy().into_owned(),
                v.trim().to_owned(),
            );
        }
    }
    Some(params)
}

/// Whether this machine hands free memory back to its host: then a
/// buffered run in a memory cgroup pays host faults that bare metal never
/// pays, and the benchmarks' default is global pressure, which holds free
/// memory small (see `ubio-bench demo --help`).
pub fn on_here() -> bool {
    parameters(Path::new(SYSFS)).is_some()
}

/// KiB handed back to the host since boot; None where the counter is
/// missing or unreadable (kernels without it).
pub fn reported_kib(root: &Path) -> Option<u64> {
    std::fs::read_to_string(root.join("parameters/reported_kib"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The counter at the start of a run, for the memory reported during it.
#[derive(Debug, Clone)]
pub struct Reported {
    root: PathBuf,
    start_kib: Option<u64>,
}

impl Reported {
    pub fn start(root: &Path) -> Reported {
        Reported {
            root: root.to_owned(),
            start_kib: reported_kib(root),
        }
    }

    /// Bytes reported to the host since [`Reported::start`]; None without
    /// the counter (or if it went backwards: a module reloaded).
    pub fn bytes_since(&self) -> Option<u64> {
        let now = reported_kib(&self.root)?;
        now.checked_sub(self.start_kib?).map(|k| k * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(reported: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("parameters");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("page_reporting_order"), "9\n").unwrap();
        std::fs::write(p.join("reported_kib"), reported).unwrap();
        dir
    }

    #[test]
    fn parameters_are_read_and_absent_means_off() {
        let dir = fake("3605112\n");
        let params = parameters(dir.path()).unwrap();
        assert_eq!(params["page_reporting_order"], "9");
        assert_eq!(params["reported_kib"], "3605112");
        assert_eq!(parameters(&dir.path().join("nope")), None);
        assert_eq!(reported_kib(&dir.path().join("nope")), None);
    }

    #[test]
    fn the_delta_is_what_was_reported_in_between() {
        let dir = fake("1000\n");
        let r = Reported::start(dir.path());
        assert_eq!(r.bytes_since(), Some(0));
        std::fs::write(dir.path().join("parameters/reported_kib"), "5096\n").unwrap();
        assert_eq!(r.bytes_since(), Some(4096 * 1024));
        std::fs::write(dir.path().join("parameters/reported_kib"), "garbage").unwrap();
        assert_eq!(r.bytes_since(), None);
        std::fs::write(dir.path().join("parameters/reported_kib"), "10").unwrap();
        assert_eq!(r.bytes_since(), None, "went backwards");
        let off = Reported::start(&dir.path().join("nope"));
        assert_eq!(off.bytes_since(), None);
    }
}
