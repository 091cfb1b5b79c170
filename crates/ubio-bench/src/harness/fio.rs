//! fio's cross-check: the same job as the harness's buffered, odirect and
//! odirect-uring modes (same rw pattern, block size, threads as jobs,
//! files per thread, file size, fsync at the end of writes), run by fio in
//! the same memory cgroup. The harness's median throughput for the mode
//! should be within 10 % of fio's; the report shows both.
//!
//! fio's `uncached` option is never used: Debian's fio 3.33 sends an
//! obsolete flag value for it.

use super::engine::data::Layout;
use super::mode::{BenchMode, WorkloadKind};
use super::runner::Progress;
use super::schema::{FioCheck, Report, Workload};
use crate::cgroup::MemCgroup;
use crate::stats;
use std::io::{self, Read};
use std::path::Path;
use std::process::{Command, Stdio};

/// Agreement within this many percent.
pub const TOLERANCE_PCT: f64 = 10.0;

/// The modes fio can mirror.
pub const MIRRORED: [BenchMode; 3] = [
    BenchMode::Buffered,
    BenchMode::Odirect,
    BenchMode::OdirectUring,
];

/// fio's arguments for `mode` running `w` over `layout`'s sizes in `dir`.
pub fn args(mode: BenchMode, w: &Workload, layout: &Layout, dir: &Path) -> Option<Vec<String>> {
    let rw = match w.kind {
        WorkloadKind::SeqRead => "read",
        WorkloadKind::SeqWrite => "write",
        WorkloadKind::RandRead => "randread",
        WorkloadKind::RandWrite => "randwrite",
        WorkloadKind::Copy => return None,
    };
    let (engine, depth, direct) = match mode {
        BenchMode::Buffered => ("psync", 1, 0),
        BenchMode::Odirect => ("psync", 1, 1),
        BenchMode::OdirectUring => ("io_uring", w.queue_depth, 1),
        _ => return None,
    };
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
        "--filename_format=f.$jobnum.$filenum".to_owned(),
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

/// Runs fio for every mirrored mode among `modes` and records the checks
/// (and a warning for each disagreement or failure) in `report`.
pub fn check_all(
    report: &mut Report,
    modes: &[BenchMode],
    layout: &Layout,
    cg: &MemCgroup,
    progress: &dyn Progress,
) -> io::Result<()> {
    let w = report.config.workload.clone();
    if w.kind == WorkloadKind::Copy {
        report
            .warnings
            .push("fio cannot copy: no fio cross-check for a copy workload".into());
        return Ok(());
    }
    let fio = match crate::require_tool("fio") {
        Ok(p) => p,
        Err(e) => {
            report.warnings.push(format!("no fio cross-check: {e}"));
            return Ok(());
        }
    };
    let version = Command::new(&fio)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let dir = layout.dir.join("fio");
    for mode in MIRRORED.into_iter().filter(|m| modes.contains(m)) {
        let Some(args) = args(mode, &w, layout, &dir) else {
            continue;
        };
        std::fs::create_dir_all(&dir)?;
        progress.message(&format!("fio: {mode}"));
        let result = lay_out(&fio, &args, &dir, w.kind, cg)
            .and_then(|()| run_fio(&fio, &args, cg))
            .and_then(|out| parse_mb_per_s(&out, w.kind.writes()));
        let _ = std::fs::remove_dir_all(&dir);
        let command = format!("fio {}", args.join(" "));
        let fio_mb_per_s = match result {
            Ok(v) => v,
            Err(e) => {
                report
                    .warnings
                    .push(format!("fio for {mode} failed: {e} (`{command}`)"));
                continue;
            }
        };
        let harness: Vec<f64> = report
            .runs
            .iter()
            .filter(|r| r.mode == mode && r.error.is_none())
            .map(|r| r.summary.mb_per_s)
            .collect();
        let Some(harness_mb_per_s) = stats::median(&harness) else {
            continue;
        };
        let difference_pct = (harness_mb_per_s - fio_mb_per_s) / fio_mb_per_s * 100.0;
        let agrees = difference_pct.abs() <= TOLERANCE_PCT;
        if !agrees {
            report.warnings.push(format!(
                "{mode}: the harness measured {harness_mb_per_s:.0} MB/s and fio {fio_mb_per_s:.0} MB/s \
                 ({difference_pct:+.0} %, beyond {TOLERANCE_PCT} %): rerun with more --rounds or a larger --dataset; \
                 if it persists, the harness's {mode} is not what fio does"
            ));
        }
        report.fio.push(FioCheck {
            mode,
            command,
            fio_version: version.clone(),
            fio_mb_per_s,
            harness_mb_per_s,
            difference_pct,
            agrees,
        });
    }
    Ok(())
}

/// As the harness does before a run of anything but a sequential write:
/// the files exist, are durable and not cached. fio lays them out first
/// (`--create_only=1`), then their pages are dropped (fsync + DONTNEED).
fn lay_out(
    fio: &Path,
    args: &[String],
    dir: &Path,
    kind: WorkloadKind,
    cg: &MemCgroup,
) -> Result<(), String> {
    if kind == WorkloadKind::SeqWrite {
        return Ok(());
    }
    let mut a = args.to_vec();
    a.push("--create_only=1".to_owned());
    run_fio(fio, &a, cg)?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let p = e.path();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| format!("open {}: {e}", p.display()))?;
        f.sync_all()
            .map_err(|e| format!("fsync {}: {e}", p.display()))?;
        use std::os::fd::AsFd;
        ubio::sys::fadvise(f.as_fd(), 0, 0, ubio::sys::Advice::DontNeed)
            .map_err(|e| format!("fadvise {}: {e}", p.display()))?;
    }
    Ok(())
}

fn run_fio(fio: &Path, args: &[String], cg: &MemCgroup) -> Result<String, String> {
    let mut cmd = Command::new(fio);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cg.spawn(&mut cmd).map_err(|e| e.to_string())?;
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
        }
    }

    #[test]
    fn mirrors_the_workload() {
        let w = workload(WorkloadKind::RandWrite);
        let l = Layout::new(Path::new("/b"), &w);
        let a = args(BenchMode::OdirectUring, &w, &l, Path::new("/b/fio"))
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
        )
        .unwrap();
        assert!(b.contains(&"--direct=0".to_owned()) && b.contains(&"--ioengine=psync".to_owned()));
        assert!(!b.iter().any(|x| x.contains("fsync")));
        assert!(args(BenchMode::Dontcache, &w, &l, Path::new("/f")).is_none());
        assert!(args(
            BenchMode::Buffered,
            &workload(WorkloadKind::Copy),
            &l,
            Path::new("/f")
        )
        .is_none());
    }

    #[test]
    fn parses_fio_json() {
        let out = "note: something\n{\"jobs\":[{\"read\":{\"bw_bytes\":2000000},\"write\":{\"bw_bytes\":0}}]}";
        assert_eq!(parse_mb_per_s(out, false), Ok(2.0));
        assert!(parse_mb_per_s(out, true).is_err());
        assert!(parse_mb_per_s("garbage", false).is_err());
    }
}
