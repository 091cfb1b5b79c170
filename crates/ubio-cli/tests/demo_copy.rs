//! `ubio demo --copy` end to end, at a tiny scale: every copy mode runs,
//! reports a positive speed, makes a byte-identical copy (--verify) and
//! leaves nothing behind (no cgroup, no file).
//!
//! Needs root and a memory cgroup; the `nocache-cp` mode needs the nocache
//! program. What cannot run prints `SKIP <name>: <reason>`; UBIO_NO_SKIP=1
//! (or UBIO_TEST_STRICT=1) turns that into a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const UBIO: &str = env!("CARGO_BIN_EXE_ubio");
const NAME: &str = "tiny_copy_demo_runs_every_mode_and_cleans_up";

fn skip(name: &str, reason: &str) {
    let line = format!("SKIP {name}: {reason}");
    let strict = ["UBIO_NO_SKIP", "UBIO_TEST_STRICT"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| v == "1"));
    if strict {
        panic!("{line} (UBIO_NO_SKIP=1 turns skips into failures)");
    }
    eprintln!("{line}");
}

fn in_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn tiny_copy_demo_runs_every_mode_and_cleans_up() {
    if !ubio_bench::is_root() {
        return skip(NAME, "needs root (the demo makes a memory cgroup)");
    }
    let own_cg = match ubio_bench::cgroup::own_memory_cgroup() {
        Ok(p) => p,
        Err(e) => return skip(NAME, &e.to_string()),
    };
    let mut modes = vec!["cp", "nocache-cp", "dd-nocache", "ubio-cp", "ubio-run-cp"];
    if !in_path("nocache") {
        skip(
            &format!("{NAME} (nocache-cp)"),
            "nocache is not installed (scripts/install-deps.sh installs it)",
        );
        modes.retain(|m| *m != "nocache-cp");
    }
    let dir: PathBuf =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("demo-copy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new(UBIO)
        .arg("demo")
        .args([
            "--copy",
            "--verify",
            "--limit",
            "128M",
            "--dataset",
            "256M",
            "--hot",
            "16M",
        ])
        .args(["--rounds", "1", "--json", "--modes", &modes.join(",")])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "ubio demo --copy failed ({}):\n{stderr}",
        out.status
    );
    assert!(stderr.contains("copy cache"), "no table:\n{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });

    let names: Vec<&str> = report["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, modes);
    for m in report["modes"].as_array().unwrap() {
        let v = m["mb_per_s"]["median"].as_f64().unwrap();
        assert!(v > 0.0, "{}: mb_per_s = {v}", m["name"]);
    }
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), modes.len());
    for r in runs {
        assert_eq!(
            r["identical"], true,
            "{}: copy differs from the source",
            r["mode"]
        );
    }
    assert!(!report["conclusion"].as_array().unwrap().is_empty());

    // Nothing left behind: no cgroup of ours, no file.
    let prefix = format!("ubio-demo-{pid}-");
    let left: Vec<String> = std::fs::read_dir(&own_cg)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(
        left.is_empty(),
        "cgroups left behind in {}: {left:?}",
        own_cg.display()
    );
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.is_empty(), "left behind: {files:?}");
    std::fs::remove_dir(&dir).unwrap();
}
