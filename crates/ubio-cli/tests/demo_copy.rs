//! `ubio demo --copy` end to end, at a tiny scale: every copy mode runs,
//! reports a positive speed, makes a byte-identical copy (--verify) and
//! leaves nothing behind (no cgroup, no file).
//!
//! Needs root and a memory cgroup; the `nocache-cp` mode needs the nocache
//! program. What cannot run prints `SKIP <name>: <reason>`; UBIO_NO_SKIP=1
//! turns that into a failure.

mod common;

use common::{assert_clean, demo_possible, run_demo_json, scratch_dir, skip};
use std::process::{Command, Stdio};

const NAME: &str = "tiny_copy_demo_runs_every_mode_and_cleans_up";

fn in_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn tiny_copy_demo_runs_every_mode_and_cleans_up() {
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    let mut modes = vec!["cp", "nocache-cp", "dd-nocache", "ubio-cp", "ubio-run-cp"];
    if !in_path("nocache") {
        skip(
            &format!("{NAME} (nocache-cp)"),
            "nocache is not installed (scripts/install-deps.sh installs it)",
        );
        modes.retain(|m| *m != "nocache-cp");
    }
    let dir = scratch_dir("demo-copy");
    let modes_list = modes.join(",");
    let (pid, report) = run_demo_json(
        NAME,
        &[
            "--copy",
            "--verify",
            "--limit",
            "128M",
            "--dataset",
            "256M",
            "--hot",
            "16M",
            "--rounds",
            "1",
            "--modes",
            &modes_list,
        ],
        &dir,
        "copy cache",
    );

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
    assert_clean(pid, &own_cg, &dir);
}
