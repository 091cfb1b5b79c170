//! `ubio-bench demo --copy` (`ubio demo --copy`) end to end, at a tiny scale: every default copy tool
//! runs in the harness's copy workload, makes an exact copy (--verify),
//! shows up in the table, and leaves nothing behind (no cgroup, no file);
//! cp leaves the files in the page cache, ubio cp and ubio run -- cp do not
//! (the report's cachestat figures).
//!
//! Needs root and a memory cgroup; the `nocache-cp` mode needs the nocache
//! program. What cannot run prints `SKIP <name>: <reason>`; UBIO_NO_SKIP=1
//! turns that into a failure.

mod common;

use common::{assert_clean, demo_possible, run_demo_json, scratch_dir, skip};
use serde_json::Value;
use std::process::{Command, Stdio};

const NAME: &str = "tiny_copy_demo_verifies_every_tool_and_cleans_up";

fn in_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn tiny_copy_demo_verifies_every_tool_and_cleans_up() {
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    if let Err(reason) = common::ubio_beside() {
        return skip(NAME, &reason);
    }
    let mut want = vec![
        "cp",
        "cp+backed",
        "nocache-cp",
        "dd-nocache",
        "rsync",
        "xcp",
        "ubio-cp",
        "ubio-run-cp",
    ];
    for (mode, program) in [
        ("nocache-cp", "nocache"),
        ("rsync", "rsync"),
        ("xcp", "xcp"),
    ] {
        if !in_path(program) {
            skip(
                &format!("{NAME} ({mode})"),
                &format!("{program} is not installed (scripts/install-deps.sh installs it)"),
            );
            want.retain(|m| *m != mode);
        }
    }
    let dir_guard = scratch_dir("demo-copy");
    let dir = dir_guard.path();
    let (pid, stderr, demo) = run_demo_json(
        NAME,
        &[
            "--copy",
            "--verify",
            "--pressure",
            "cgroup",
            "--limit",
            "128M",
            "--dataset",
            "256M",
            "--rounds",
            "1",
            "--solo-secs",
            "1",
        ],
        dir,
        "cache peak",
    );

    let rows: Vec<String> = stderr
        .lines()
        .filter(|l| l.starts_with("copy "))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    assert_eq!(rows, want, "table rows in\n{stderr}");
    let reports = demo["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r["config"]["workload"]["kind"], "copy");
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), want.len());
    for run in runs {
        // --verify: a copy that differs from the source fails its run.
        assert!(run["error"].is_null(), "{}: {}", run["mode"], run["error"]);
        assert_eq!(run["bytes"], 256u64 << 20, "{}", run["mode"]);
    }
    let peak = |mode: &str| -> u64 {
        let m: &Value = r["modes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mode"] == mode)
            .unwrap();
        assert!(m["mb_per_s"]["median"].as_f64().unwrap() > 0.0, "{mode}");
        m["peak_dataset_cached_bytes"].as_u64().unwrap()
    };
    // Source and copy: 512 MiB through a 128 MiB cgroup.
    assert!(peak("cp") >= 16 << 20, "cp peak {}", peak("cp"));
    // Source and copy together, sampled every 10 ms: the read side's lag,
    // drop batch and readahead (up to 24 MiB) plus the write window (16 MiB).
    for m in ["ubio-cp", "ubio-run-cp"] {
        assert!(peak(m) <= 40 << 20, "{m} peak {}", peak(m));
        assert!(
            peak(m) * 2 < peak("cp"),
            "{m} peak {} vs cp {}",
            peak(m),
            peak("cp")
        );
    }
    assert!(!demo["conclusion"].as_array().unwrap().is_empty());
    assert_clean(pid, &own_cg, dir);
}
