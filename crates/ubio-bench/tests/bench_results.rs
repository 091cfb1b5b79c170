//! `ubio-bench compare` and `ubio-bench report` on mock results (no disk
//! work, no root): exit codes 0/1/2 and a re-render from the JSON alone.

mod common;

use common::{stderr, ubio_bench, workdir};
use std::path::{Path, PathBuf};
use std::process::Output;
use ubio_bench::harness::export;
use ubio_bench::harness::mock;
use ubio_bench::harness::mode::BenchMode;
use ubio_bench::harness::schema::Report;

fn write_report(dir: &Path, name: &str, report: &Report) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, export::json::render(report).unwrap()).unwrap();
    path
}

fn compare(old: &Path, new: &Path, extra: &[&str]) -> Output {
    ubio_bench()
        .arg("compare")
        .arg(old)
        .arg(new)
        .args(extra)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Exit status 2 (bad input), and stderr says every one of `what`.
fn assert_exits_2_saying(out: &Output, what: &[&str]) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    for w in what {
        assert!(stderr(out).contains(w), "{w}: {}", stderr(out));
    }
}

/// The mock report with one mode's throughput scaled.
fn slower(mode: BenchMode, factor: f64) -> Report {
    let mut report = mock::report(1);
    mock::scale_throughput(&mut report, mode, factor);
    report
}

#[test]
fn compare_identical_exits_0() {
    let dir = workdir();
    let path = write_report(dir.path(), "a.json", &mock::report(1));
    let out = compare(&path, &path, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no regression"), "{}", stdout(&out));
}

#[test]
fn compare_slower_mode_exits_1_naming_it() {
    let dir = workdir();
    let old = write_report(dir.path(), "old.json", &mock::report(1));
    let new = write_report(dir.path(), "new.json", &slower(BenchMode::Buffered, 0.8));
    let out = compare(&old, &new, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("- buffered: throughput MB/s -20.0%"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn compare_threshold_above_the_change_exits_0() {
    let dir = workdir();
    let old = write_report(dir.path(), "old.json", &mock::report(1));
    let new = write_report(dir.path(), "new.json", &slower(BenchMode::Buffered, 0.8));
    let out = compare(&old, &new, &["--threshold", "25"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn compare_json_says_regressed() {
    let dir = workdir();
    let old = write_report(dir.path(), "old.json", &mock::report(1));
    let new = write_report(dir.path(), "new.json", &slower(BenchMode::Odirect, 0.5));
    let out = compare(&old, &new, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["regressed"], true);
}

#[test]
fn compare_missing_file_exits_2_naming_it() {
    let dir = workdir();
    let old = write_report(dir.path(), "old.json", &mock::report(1));
    let missing = dir.path().join("nope.json");
    let out = compare(&old, &missing, &[]);
    assert_exits_2_saying(&out, &["cannot read", "nope.json"]);
}

#[test]
fn compare_not_a_report_exits_2() {
    let dir = workdir();
    let old = write_report(dir.path(), "old.json", &mock::report(1));
    let other = dir.path().join("fio.json");
    std::fs::write(&other, r#"{"fio version": "fio-3.33", "jobs": []}"#).unwrap();
    let out = compare(&old, &other, &[]);
    assert_exits_2_saying(&out, &["fio.json: not a ubio bench report"]);
}

#[test]
fn compare_newer_schema_exits_2() {
    let dir = workdir();
    let old = write_report(dir.path(), "old.json", &mock::report(1));
    let mut future = mock::report(1);
    future.schema_version += 1;
    let new = write_report(dir.path(), "future.json", &future);
    let out = compare(&old, &new, &[]);
    assert_exits_2_saying(&out, &["future.json: schema_version"]);
}

#[test]
fn report_rerenders_every_export_from_the_json() {
    let dir = workdir();
    let report = mock::report(3);
    let json = write_report(dir.path(), "result.json", &report);
    let out_dir = dir.path().join("out");
    let out = ubio_bench()
        .arg("report")
        .arg(&json)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in export::FILES {
        let path = out_dir.join(name);
        assert!(
            stdout(&out).contains(&path.display().to_string()),
            "{name} listed"
        );
        assert!(path.metadata().unwrap().len() > 0, "{name} written");
    }
    let back = std::fs::read_to_string(out_dir.join("report.json")).unwrap();
    assert!(Report::from_json(&back).unwrap() == report);
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert_eq!(html, export::html::render(&report));
}

#[test]
fn report_of_a_bad_file_exits_2() {
    let dir = workdir();
    let out = ubio_bench()
        .arg("report")
        .arg(dir.path().join("missing.json"))
        .output()
        .unwrap();
    assert_exits_2_saying(&out, &["missing.json"]);
}

/// `path` gzipped into `path.gz` (as bench/runs keeps its reports), and
/// `path` removed.
fn gzip(path: &Path) -> PathBuf {
    use std::io::Write;
    let gz = PathBuf::from(format!("{}.gz", path.display()));
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&std::fs::read(path).unwrap()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    std::fs::remove_file(path).unwrap();
    gz
}

/// A gzipped report (report.json.gz) is read as it is by compare and
/// report, named by its .gz or by the plain name; report rewrites the
/// JSON gzipped beside it, with no uncompressed copy.
#[test]
fn a_gzipped_report_is_read_and_rewritten_gzipped() {
    let dir = workdir();
    let report = mock::report(2);
    let old = write_report(dir.path(), "old.json", &report);
    let gz = gzip(&write_report(dir.path(), "report.json", &report));
    for new in [gz.clone(), dir.path().join("report.json")] {
        let out = compare(&old, &new, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("no regression"), "{}", stdout(&out));
    }
    let out = ubio_bench().arg("report").arg(&gz).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&gz.display().to_string()),
        "{}",
        stdout(&out)
    );
    assert!(!dir.path().join("report.json").exists(), "no second copy");
    let back = ubio_bench::harness::gz::read_to_string(&gz).unwrap();
    assert!(Report::from_json(&back).unwrap() == report);
    assert!(dir.path().join("report.md").is_file());
    // Not gzip: said, with the file's name.
    std::fs::write(dir.path().join("bad.json.gz"), "not gzip").unwrap();
    let out = compare(&old, &dir.path().join("bad.json.gz"), &[]);
    assert_exits_2_saying(&out, &["bad.json.gz"]);
}

/// A report committed under bench/runs (gzipped there) renders again.
#[test]
fn a_committed_gzipped_report_renders_again() {
    let gz = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../../bench/runs/2026-11-26-matrix-shm/points/ext4-shm_seq-read_bs1M_t1_f1_x2/report.json.gz",
    );
    let dir = workdir();
    let out = ubio_bench()
        .arg("report")
        .arg(&gz)
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in export::FILES {
        assert!(dir.path().join(name).is_file(), "{name} written");
    }
}
