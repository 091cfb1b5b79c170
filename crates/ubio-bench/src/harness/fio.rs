//! fio's cross-check: the same job as every harness mode whose row of the
//! capability table ([`BenchMode::caps`]) names a fio job (same rw pattern, block size, threads as jobs,
//! files per thread, file size, fsync at the end of writes), run by fio in
//! the same memory cgroup on the harness's own dataset files, settled as
//! before the harness's runs (reads: durable and not cached; writes: fresh
//! files), once per round right after the harness's run of the mode. The
//! harness's median throughput for the mode should be within 10 % of fio's
//! median; the report shows both.
//!
//! The RWF_DONTCACHE modes use fio's `uncached=1`, only with fio 3.40 or
//! later: Debian bookworm's fio 3.33 sends 0x40 for it (RWF_ATOMIC since
//! 6.11), and every I/O fails. With an older fio their check is skipped
//! with a warning that names the version.

use super::engine::data::Layout;
use super::mode::{BenchMode, WorkloadKind, FIO_UNCACHED_SINCE};
use super::schema::{FioCheck, Report, Workload};
use crate::stats;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use ubio_testenv::cgroup::MemCgroup;

/// Agreement within this many percent.
pub const TOLERANCE_PCT: f64 = 10.0;

/// fio's arguments for `mode` running `w` over `layout`'s sizes in `dir`;
/// none where fio has no such job, or (`uncached_ok` false) where the job
/// needs an `uncached=1` that this fio gets wrong.
pub fn args(
    mode: BenchMode,
    w: &Workload,
    layout: &Layout,
    dir: &Path,
    uncached_ok: bool,
) -> Option<Vec<String>> {
    let rw = match w.kind {
        WorkloadKind::SeqRead => "read",
        WorkloadKind::SeqWrite => "write",
        WorkloadKind::RandRead => "randread",
        WorkloadKind::RandWrite => "randwrite",
        WorkloadKind::Copy => return None,
    };
    let job = mode.caps().fio?;
    if job.uncached && !uncached_ok {
        return None;
    }
    let engine = job.ioengine;
    let depth = if job.queued { w.queue_depth } else { 1 };
    let direct = u8::from(job.direct);
    let mut a = vec![
        "--name=ubio-bench".to_owned(),
        format!("--directory={}", dir.display()),
        format!("--rw={rw}"),
        format!("--bs={}", layout.block_bytes),
        format!("--numjobs={}", layout.threads),
        format!("--nrfiles={}", layout.files_per_thread),
        format!(
            "--size={}",
            layout.file_bytes * u64::from(layout.files_per_thread)
        ),
        // The harness's own files (engine::data::Layout::source).
        "--filename_format=t$jobnum-f$filenum".to_owned(),
        // The harness works through a thread's files one after the other.
        "--file_service_type=sequential".to_owned(),
        format!("--ioengine={engine}"),
        format!("--iodepth={depth}"),
        format!("--direct={direct}"),
        format!("--randseed={}", w.seed),
        // The harness's sequential writes extend fresh files.
        "--fallocate=none".to_owned(),
        "--group_reporting".to_owned(),
        "--output-format=json".to_owned(),
    ];
    if job.uncached {
        a.push("--uncached=1".to_owned());
    }
    if w.kind.writes() {
        a.push("--end_fsync=1".to_owned());
    }
    if let Some(d) = w.duration_secs {
        a.push(format!("--runtime={}", d.ceil() as u64));
    }
    Some(a)
}

/// fio's throughput in MB/s from its `--output-format=json` (read or write
/// bandwidth of the one group-reported job).
pub fn parse_mb_per_s(json: &str, writes: bool) -> Result<f64, String> {
    let start = json.find('{').ok_or("no JSON in fio's output")?;
    let v: serde_json::Value =
        serde_json::from_str(&json[start..]).map_err(|e| format!("fio's JSON: {e}"))?;
    let dir = if writes { "write" } else { "read" };
    let jobs = v["jobs"].as_array().ok_or("fio's JSON has no jobs")?;
    let bw: f64 = jobs
        .iter()
        .filter_map(|j| j[dir]["bw_bytes"].as_f64())
        .sum();
    if bw <= 0.0 {
        return Err(format!("fio reported no {dir} bandwidth"));
    }
    Ok(bw / 1e6)
}

/// fio, found once per benchmark; [`Fio::run`] runs one mirrored job, in
/// the round loop right after the harness's run of the same mode (so the
/// two are interleaved like the modes are), and [`Fio::checks`] compares.
pub struct Fio {
    path: std::path::PathBuf,
    version: String,
    /// Its `uncached=1` sends RWF_DONTCACHE.
    uncached_ok: bool,
    /// fio's figures per mode, one per round, and the command line.
    runs: Vec<(BenchMode, f64)>,
    commands: Vec<(BenchMode, String)>,
    failures: Vec<String>,
}

impl Fio {
    /// Finds fio for a workload of `kind`, or says why there is no check.
    pub fn find(kind: WorkloadKind) -> Result<Fio, String> {
        if kind == WorkloadKind::Copy {
            return Err("fio cannot copy: no fio cross-check for a copy workload".into());
        }
        let path =
            ubio_testenv::require_tool("fio").map_err(|e| format!("no fio cross-check: {e}"))?;
        let version = Command::new(&path)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let uncached_ok = parse_version(&version).is_some_and(|v| v >= FIO_UNCACHED_SINCE);
        Ok(Fio {
            path,
            version,
            uncached_ok,
            runs: Vec::new(),
            commands: Vec::new(),
            failures: Vec::new(),
        })
    }

    /// Whether fio has a job for `mode` that it runs right. An RWF_DONTCACHE
    /// mode with a fio older than 3.40 is not checked, and the report's
    /// warnings say so (once per mode), naming the version.
    pub fn mirrors(&mut self, mode: BenchMode) -> bool {
        let Some(job) = mode.caps().fio else {
            return false;
        };
        if job.uncached && !self.uncached_ok {
            let (major, minor) = FIO_UNCACHED_SINCE;
            let warning = format!(
                "{mode}: no fio cross-check: {} sends the wrong flag for uncached=1 \
                 (0x40, not RWF_DONTCACHE); fio {major}.{minor} or later is needed",
                if self.version.is_empty() {
                    "this fio"
                } else {
                    &self.version
                }
            );
            if !self.failures.contains(&warning) {
                log::warn!("{warning}");
                self.failures.push(warning);
            }
            return false;
        }
        true
    }

    /// Runs fio's job for `mode` once on the dataset, in the cgroup. The
    /// caller settles the dataset first, as before any of its own runs
    /// (the runner's `settle`). A failure is kept for [`Fio::checks`] and
    /// not retried.
    pub fn run(&mut self, mode: BenchMode, w: &Workload, layout: &Layout, cg: Option<&MemCgroup>) {
        let Some(args) = args(mode, w, layout, &layout.data_dir(), self.uncached_ok) else {
            return;
        };
        let command = format!("fio {}", args.join(" "));
        if self.failures.iter().any(|f| f.contains(&command)) {
            return;
        }
        let result =
            run_fio(&self.path, &args, cg).and_then(|out| parse_mb_per_s(&out, w.kind.writes()));
        match result {
            Ok(v) => self.runs.push((mode, v)),
            Err(e) => self
                .failures
                .push(format!("fio for {mode} failed: {e} (`{command}`)")),
        }
        if !self.commands.iter().any(|(m, _)| *m == mode) {
            self.commands.push((mode, command));
        }
    }

    /// The checks (harness median against fio's median, per mode) and a
    /// warning for each disagreement or failure.
    pub fn checks(self, report: &Report) -> (Vec<FioCheck>, Vec<String>) {
        let mut warnings = self.failures;
        let mut checks = Vec::new();
        // In the modes' order, not the (random) order they first ran in.
        let mut commands = self.commands;
        let rank = |m: &BenchMode| report.config.modes.iter().position(|c| c == m);
        commands.sort_by_key(|(m, _)| rank(m));
        for (mode, command) in commands {
            let fio_runs: Vec<f64> = self
                .runs
                .iter()
                .filter(|(m, _)| *m == mode)
                .map(|&(_, v)| v)
                .collect();
            let harness: Vec<f64> = report
                .runs
                .iter()
                .filter(|r| r.mode == mode && r.error.is_none())
                .map(|r| r.summary.mb_per_s)
                .collect();
            let (Some(fio_mb_per_s), Some(harness_mb_per_s)) =
                (stats::median(&fio_runs), stats::median(&harness))
            else {
                continue;
            };
            let difference_pct = (harness_mb_per_s - fio_mb_per_s) / fio_mb_per_s * 100.0;
            let agrees = difference_pct.abs() <= TOLERANCE_PCT;
            if !agrees {
                warnings.push(format!(
                    "{mode}: the harness measured {harness_mb_per_s:.0} MB/s and fio {fio_mb_per_s:.0} MB/s \
                     ({difference_pct:+.0} %, beyond {TOLERANCE_PCT} %): rerun with more --rounds or a larger --dataset; \
                     if it persists, the harness's {mode} is not what fio does"
                ));
            }
            checks.push(FioCheck {
                mode,
                command,
                fio_version: self.version.clone(),
                fio_mb_per_s,
                fio_runs_mb_per_s: fio_runs,
                harness_mb_per_s,
                difference_pct,
                agrees,
            });
        }
        (checks, warnings)
    }
}

/// "fio-3.33" -> (3, 33).
fn parse_version(v: &str) -> Option<(u32, u32)> {
    let v = v.trim().strip_prefix("fio-")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn run_fio(fio: &Path, args: &[String], cg: Option<&MemCgroup>) -> Result<String, String> {
    let mut cmd = Command::new(fio);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ubio_testenv::cgroup::spawn_in(cg, &mut cmd).map_err(|e| e.to_string())?;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("fio exited with {status}: {}", err.trim()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(kind: WorkloadKind) -> Workload {
        Workload {
            kind,
            block_bytes: 65536,
            threads: 2,
            files_per_thread: 4,
            dataset_bytes: 64 << 20,
            duration_secs: None,
            queue_depth: 8,
            seed: 1,
            processes: 1,
            shared_file: false,
        }
    }

    #[test]
    fn mirrors_the_workload() {
        let w = workload(WorkloadKind::RandWrite);
        let l = Layout::new(Path::new("/b"), &w);
        let a = args(BenchMode::OdirectUring, &w, &l, Path::new("/b/fio"), true)
            .unwrap()
            .join(" ");
        for want in [
            "--rw=randwrite",
            "--bs=65536",
            "--numjobs=2",
            "--nrfiles=4",
            "--size=33554432",
            "--ioengine=io_uring",
            "--iodepth=8",
            "--direct=1",
            "--end_fsync=1",
        ] {
            assert!(a.contains(want), "{want} in {a}");
        }
        assert!(!a.contains("uncached"), "never fio's uncached option");
        let b = args(
            BenchMode::Buffered,
            &workload(WorkloadKind::SeqRead),
            &l,
            Path::new("/f"),
            false,
        )
        .unwrap();
        assert!(b.contains(&"--direct=0".to_owned()) && b.contains(&"--ioengine=psync".to_owned()));
        assert!(!b.iter().any(|x| x.contains("fsync")));
        // A fio whose uncached=1 is wrong (3.33) gets no dontcache job.
        assert!(args(BenchMode::Dontcache, &w, &l, Path::new("/f"), false).is_none());
        assert!(args(
            BenchMode::Buffered,
            &workload(WorkloadKind::Copy),
            &l,
            Path::new("/f"),
            true
        )
        .is_none());
        // fio 3.40+: the RWF_DONTCACHE modes, with uncached=1.
        let d = args(BenchMode::DontcacheUring, &w, &l, Path::new("/f"), true)
            .unwrap()
            .join(" ");
        for want in [
            "--ioengine=io_uring",
            "--iodepth=8",
            "--direct=0",
            "--uncached=1",
        ] {
            assert!(d.contains(want), "{want} in {d}");
        }
        let d = args(BenchMode::Dontcache, &w, &l, Path::new("/f"), true)
            .unwrap()
            .join(" ");
        assert!(
            d.contains("--ioengine=pvsync2") && d.contains("--uncached=1"),
            "{d}"
        );
    }

    #[test]
    fn fio_versions() {
        assert_eq!(parse_version("fio-3.33\n"), Some((3, 33)));
        assert_eq!(parse_version("fio-3.41-2-gabc"), Some((3, 41)));
        assert!(parse_version("fio-3.33").unwrap() < FIO_UNCACHED_SINCE);
        assert!(parse_version("fio-3.40").unwrap() >= FIO_UNCACHED_SINCE);
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn parses_fio_json() {
        let out = "note: something\n{\"jobs\":[{\"read\":{\"bw_bytes\":2000000},\"write\":{\"bw_bytes\":0}}]}";
        assert_eq!(parse_mb_per_s(out, false), Ok(2.0));
        assert!(parse_mb_per_s(out, true).is_err());
        assert!(parse_mb_per_s("garbage", false).is_err());
    }
}
