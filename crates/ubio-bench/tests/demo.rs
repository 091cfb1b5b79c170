//! `ubio-bench demo` (`ubio demo`) end to end, at a tiny scale: it runs the harness for writes
//! and reads, prints one table row per mode and operation, reports the
//! harness's figures as JSON, keeps the report files with --out, and leaves
//! nothing behind (no cgroup, no file), also when interrupted. Page-cache
//! claims come from the report's cachestat figures, never from timing.
//!
//! Needs root and a memory cgroup; prints `SKIP <name>: <reason>` without
//! them (UBIO_NO_SKIP=1 turns that into a failure).

mod common;

use common::{assert_clean, demo_possible, run_demo_json, scratch_dir, skip, ubio_bench};
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One demo at a time: each streams through a small cgroup, and several at
/// once would measure each other.
static ONE_DEMO: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_demo() -> std::sync::MutexGuard<'static, ()> {
    ONE_DEMO.lock().unwrap_or_else(|e| e.into_inner())
}

/// In a memory cgroup (the default on a VM with free page reporting is
/// global pressure, a balloon: not for a test). Twice the limit, so
/// buffered I/O fills the cgroup; one round, the reader
/// measured alone for a second. (At 64 MiB, ubio's own bounds, a 16 MiB
/// write window and up to 24 MiB of read lag and readahead, are close to
/// what the cgroup leaves buffered I/O.)
const TINY: [&str; 10] = [
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
];

/// The summary of `mode` in `report`.
fn mode<'a>(report: &'a Value, mode: &str) -> &'a Value {
    report["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == mode)
        .unwrap_or_else(|| panic!("no {mode} in {}", report["modes"]))
}

/// The table's rows: (op, mode) of every line that starts with an op.
fn table_rows(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let op = w.next()?;
            ["write", "read", "copy"]
                .contains(&op)
                .then(|| (op.to_owned(), w.next().unwrap_or("").to_owned()))
        })
        .collect()
}

#[test]
fn tiny_demo_compares_buffered_and_ubio_and_cleans_up() {
    const NAME: &str = "tiny_demo_compares_buffered_and_ubio_and_cleans_up";
    let _one = one_demo();
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    let dir_guard = scratch_dir("demo-e2e");
    let dir = dir_guard.path();
    let out_guard = scratch_dir("demo-e2e-out");
    let out = out_guard.path();
    let args = [&TINY[..], &["--out", out.to_str().unwrap()]].concat();
    let (pid, stderr, demo) = run_demo_json(NAME, &args, dir, "cache peak");

    assert_eq!(
        table_rows(&stderr),
        [
            ("write", "buffered"),
            ("write", "buffered+backed"),
            ("write", "ubio"),
            ("read", "buffered"),
            ("read", "buffered+backed"),
            ("read", "ubio")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(demo["schema"], "ubio-demo");
    assert!(!demo["conclusion"].as_array().unwrap().is_empty());
    let reports = demo["reports"].as_array().unwrap();
    let kinds: Vec<&str> = reports
        .iter()
        .map(|r| r["config"]["workload"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["seq-write", "seq-read"]);
    for r in reports {
        let kind = r["config"]["workload"]["kind"].as_str().unwrap();
        assert_eq!(r["schema"], "ubio-bench");
        assert_eq!(r["complete"], true, "{kind}");
        assert_eq!(
            r["config"]["modes"],
            serde_json::json!(["buffered", "buffered+backed", "ubio"])
        );
        assert_eq!(r["config"]["memory_limit_bytes"], 128u64 << 20);
        assert_eq!(
            r["config"]["victim_hot_bytes"],
            64u64 << 20,
            "half the limit"
        );
        assert!(r["victim_solo"]["ops_per_s"]["median"].as_f64().unwrap() > 0.0);
        for run in r["runs"].as_array().unwrap() {
            assert!(run["error"].is_null(), "{kind}: {}", run["error"]);
            assert_eq!(run["bytes"], 256u64 << 20, "{kind}");
        }
        let (buffered, ubio) = (mode(r, "buffered"), mode(r, "ubio"));
        for m in [buffered, ubio] {
            assert!(
                m["mb_per_s"]["median"].as_f64().is_some_and(|v| v > 0.0),
                "{kind} {}: {}",
                m["mode"],
                m["mb_per_s"]
            );
            assert!(
                m["victim"]["median_ops_per_s"]
                    .as_f64()
                    .is_some_and(|v| v > 0.0),
                "{kind} {}: the reader ran (victim: {})",
                m["mode"],
                m["victim"]
            );
        }
        // Buffered I/O leaves a good part of the 128 MiB cgroup full of the
        // dataset; ubio keeps it within its window.
        let peak = |m: &Value| m["peak_dataset_cached_bytes"].as_u64().unwrap();
        assert!(
            peak(buffered) >= 16 << 20,
            "{kind}: buffered peak {}",
            peak(buffered)
        );
        // Writes: the 16 MiB window; reads: the lag, a drop batch and the
        // kernel's readahead (the contract tests' bound is 64 MiB).
        assert!(peak(ubio) <= 32 << 20, "{kind}: ubio peak {}", peak(ubio));
        assert!(
            peak(ubio) * 2 < peak(buffered),
            "{kind}: ubio {} vs buffered {}",
            peak(ubio),
            peak(buffered)
        );
    }
    // --out kept the harness's report files, one directory per workload.
    for kind in kinds {
        for f in [
            "report.json",
            "samples.csv",
            "runs.csv",
            "report.md",
            "report.html",
        ] {
            assert!(out.join(kind).join(f).is_file(), "{kind}/{f}");
        }
    }
    std::fs::remove_dir_all(out).unwrap();
    assert_clean(pid, &own_cg, dir);
}

#[test]
fn tiny_demo_without_the_reader_or_a_baseline() {
    const NAME: &str = "tiny_demo_without_the_reader_or_a_baseline";
    let _one = one_demo();
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    let dir_guard = scratch_dir("demo-novictim");
    let dir = dir_guard.path();
    let args = [
        &TINY[..],
        &["--no-victim", "--modes", "ubio:emulated,odirect"],
    ]
    .concat();
    let (pid, stderr, demo) = run_demo_json(NAME, &args, dir, "cache peak");
    assert_eq!(table_rows(&stderr).len(), 4, "{stderr}");
    for r in demo["reports"].as_array().unwrap() {
        assert!(r["victim_solo"].is_null());
        assert!(r["config"]["victim_hot_bytes"].is_null());
        for m in r["modes"].as_array().unwrap() {
            assert!(m["victim"].is_null(), "{m}");
            assert!(m["speed_vs_baseline"].is_null(), "no buffered baseline");
            assert!(m["mb_per_s"]["median"].as_f64().unwrap() > 0.0);
        }
        // O_DIRECT goes around the page cache.
        let odirect = mode(r, "odirect")["peak_dataset_cached_bytes"]
            .as_u64()
            .unwrap();
        assert!(odirect <= 4 << 20, "odirect peak {odirect}");
    }
    let conclusion = demo["conclusion"].to_string();
    assert!(conclusion.contains("no buffered baseline"), "{conclusion}");
    assert_clean(pid, &own_cg, dir);
}

#[test]
fn interrupted_demo_cleans_up() {
    const NAME: &str = "interrupted_demo_cleans_up";
    let _one = one_demo();
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    let dir_guard = scratch_dir("demo-sigint");
    let dir = dir_guard.path();
    let mut child = ubio_bench()
        .args([
            "demo",
            "--pressure",
            "cgroup",
            "--limit",
            "64M",
            "--dataset",
            "128M",
            "--solo-secs",
            "1",
        ])
        .args(["--rounds", "20", "--dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Interrupt it in the middle of the measured runs, while a worker and
    // the reader run in the cgroup and the files exist.
    let (seen, lines) = common::read_until(child.stderr.take().unwrap(), |l| {
        l.ends_with("round 1/20: ubio")
    });
    assert!(
        seen.last().is_some_and(|l| l.contains("round 1/20")),
        "demo ended early:\n{}",
        seen.join("\n")
    );
    // Keep reading its stderr, as a terminal would.
    let rest =
        std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    // SAFETY: kill has no memory-safety preconditions; `pid` is our child,
    // not yet waited for.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "demo did not exit after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Nothing left behind, whatever the exit status says.
    assert_clean(pid, &own_cg, dir);
    let rest = rest.join().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "exit status after SIGINT: {status}; stderr after the signal:\n{rest}"
    );
}

#[test]
fn not_enough_space_is_a_clear_error() {
    const NAME: &str = "not_enough_space_is_a_clear_error";
    if let Err(reason) = demo_possible() {
        return skip(NAME, &reason);
    }
    let dir_guard = scratch_dir("demo-space");
    let dir = dir_guard.path();
    let out = ubio_bench()
        .args(["demo", "--dataset", "900T", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not enough free space"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        0,
        "made files before failing"
    );
    std::fs::remove_dir(dir).unwrap();
}

#[test]
fn bad_options_are_refused() {
    for (args, want) in [
        (&["--limit", "64M", "--hot", "60M"][..], "does not fit"),
        (&["--limit", "1M"][..], "too small"),
        (&["--dataset", "100K"][..], "too small"),
        (&["--rounds", "0"][..], "rounds"),
        (&["--modes", "buffered,fast"][..], "unknown mode 'fast'"),
        (&["--modes", "ubio,buffered,ubio"][..], "listed twice"),
        (&["--modes", "buffered,,ubio"][..], "empty entry"),
        (&["--modes", "buffered,cp"][..], "use it with --copy"),
        (&["--modes", "ubio:nope"][..], "nope"),
    ] {
        let out = ubio_bench().arg("demo").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn worker_is_hidden_from_help() {
    let out = ubio_bench().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("demo") && !help.contains("__worker"),
        "{help}"
    );
}
