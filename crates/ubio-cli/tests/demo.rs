//! `ubio demo` end to end, at a tiny scale: it runs, reports every mode, and
//! leaves nothing behind (no cgroup, no file), also when interrupted.
//!
//! Needs root and a memory cgroup; prints `SKIP <name>: <reason>` without
//! them (UBIO_NO_SKIP=1 turns that into a failure).

mod common;

use common::{assert_clean, demo_possible, run_demo_json, scratch_dir, skip, UBIO};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One demo at a time: each streams hundreds of MiB through a 64 MiB
/// cgroup, and several at once slow writeback down enough for a buffered
/// writer in a cgroup v1 to hit the cgroup's OOM killer.
static ONE_DEMO: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_demo() -> std::sync::MutexGuard<'static, ()> {
    ONE_DEMO.lock().unwrap_or_else(|e| e.into_inner())
}
// 128 MiB, not less: a plain buffered write that fills a cgroup v1 with dirty
// pages can end in its OOM killer (seen once at 64 MiB); more room, less risk.
const TINY: [&str; 6] = ["--limit", "128M", "--dataset", "384M", "--hot", "16M"];

#[test]
fn tiny_demo_reports_every_mode_and_cleans_up() {
    let _one = one_demo();
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip("tiny_demo_reports_every_mode_and_cleans_up", &reason),
    };
    let dir = scratch_dir("demo-e2e");
    let (pid, report) = run_demo_json(
        "tiny_demo_reports_every_mode_and_cleans_up",
        &[TINY.as_slice(), &["--rounds", "1"]].concat(),
        &dir,
        "throughput MB/s",
    );

    let modes = report["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["buffered write", "ubio write", "buffered read", "ubio read"]
    );
    for m in modes {
        for stat in ["median", "min", "max"] {
            let v = m["mb_per_s"][stat].as_f64().unwrap();
            assert!(v > 0.0, "{}: mb_per_s.{stat} = {v}", m["name"]);
        }
        assert!(
            m["reader"]["median_reads_per_s"].as_f64().unwrap() > 0.0,
            "{}: no reader samples",
            m["name"]
        );
    }
    assert_eq!(report["phases"].as_array().unwrap().len(), 4);
    assert_eq!(report["config"]["dataset_bytes"], 384u64 << 20);
    assert!(report["solo"]["median_reads_per_s"].as_f64().unwrap() > 0.0);
    assert!(!report["conclusion"].as_array().unwrap().is_empty());
    // The ubio side's footprint is bounded by its window (16 MiB) plus the
    // read lag and readahead, whatever the dataset size.
    for m in modes.iter().filter(|m| m["side"] == "ubio") {
        let peak = m["peak_cached_bytes"].as_u64().unwrap();
        assert!(
            peak <= 48 << 20,
            "{}: peak page cache {peak} bytes",
            m["name"]
        );
    }
    assert_clean(pid, &own_cg, &dir);
}

/// Runs the demo with `extra` arguments at the tiny sizes in a fresh
/// directory, checks that it left nothing behind, and returns its JSON report.
fn run_tiny(name: &str, own_cg: &Path, dir: &Path, extra: &[&str]) -> serde_json::Value {
    let args = [TINY.as_slice(), extra, &["--rounds", "1"]].concat();
    let (pid, report) = run_demo_json(name, &args, dir, "throughput MB/s");
    assert_clean(pid, own_cg, dir);
    report
}

/// Why RWF_DONTCACHE or O_DIRECT cannot work in `dir`, or None.
fn kernel_modes_unsupported(dir: &Path) -> Option<String> {
    use ubio_bench::workload::{check_mode, Mode};
    let probe = dir.join("probe");
    std::fs::write(&probe, b"").unwrap();
    let why = [Mode::Dontcache, Mode::Odirect]
        .into_iter()
        .find_map(|m| check_mode(m, &probe).err().map(|e| e.to_string()));
    std::fs::remove_file(&probe).unwrap();
    why
}

#[test]
fn tiny_demo_runs_kernel_modes_with_cpu_times() {
    let _one = one_demo();
    const NAME: &str = "tiny_demo_runs_kernel_modes_with_cpu_times";
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    let dir = scratch_dir("demo-modes");
    if let Some(why) = kernel_modes_unsupported(&dir) {
        std::fs::remove_dir(&dir).unwrap();
        return skip(NAME, &why);
    }
    let report = run_tiny(
        NAME,
        &own_cg,
        &dir,
        &["--modes", "buffered,ubio,dontcache,odirect"],
    );
    assert_eq!(
        report["config"]["modes"],
        serde_json::json!(["buffered", "ubio", "dontcache", "odirect"])
    );
    let modes = report["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "buffered write",
            "ubio write",
            "dontcache write",
            "odirect write",
            "buffered read",
            "ubio read",
            "dontcache read",
            "odirect read"
        ]
    );
    for m in modes {
        let name = m["name"].as_str().unwrap();
        for stat in ["median", "min", "max"] {
            let v = m["mb_per_s"][stat].as_f64().unwrap();
            assert!(v > 0.0, "{name}: mb_per_s.{stat} = {v}");
        }
        let cpu = m["cpu_secs"]["median"].as_f64().unwrap();
        assert!(cpu > 0.0, "{name}: cpu_secs {cpu}");
        let (usr, sys) = (
            m["cpu_user_secs"]["median"].as_f64().unwrap(),
            m["cpu_sys_secs"]["median"].as_f64().unwrap(),
        );
        assert!(
            usr >= 0.0 && sys >= 0.0 && (usr + sys - cpu).abs() < 1e-6,
            "{name}"
        );
        assert!(m["speed_vs_buffered"].as_f64().unwrap() > 0.0, "{name}");
        assert!(
            m["reader"]["median_reads_per_s"].as_f64().unwrap() > 0.0,
            "{name}: no reader samples"
        );
    }
    let backend = |name: &str| {
        modes.iter().find(|m| m["name"] == name).unwrap()["backend"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(backend("dontcache read"), "RWF_DONTCACHE");
    assert_eq!(backend("odirect write"), "O_DIRECT");
    // O_DIRECT goes around the page cache (the file was truncated before
    // the write, so nothing of it was cached before either).
    for m in modes.iter().filter(|m| m["side"] == "odirect") {
        let peak = m["peak_cached_bytes"].as_u64().unwrap();
        assert!(
            peak <= 4 << 20,
            "{}: peak page cache {peak} bytes",
            m["name"]
        );
    }
    let phases = report["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 8);
    for p in phases {
        assert!(p["result"]["cpu_sys_secs"].as_f64().is_some(), "{p}");
    }
}

#[test]
fn tiny_demo_without_the_reader() {
    let _one = one_demo();
    const NAME: &str = "tiny_demo_without_the_reader";
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip(NAME, &reason),
    };
    let dir = scratch_dir("demo-novictim");
    let report = run_tiny(NAME, &own_cg, &dir, &["--no-victim", "--modes", "ubio"]);
    assert_eq!(report["config"]["victim"], false);
    assert!(report["solo"].is_null());
    let modes = report["modes"].as_array().unwrap();
    assert_eq!(modes.len(), 2);
    for m in modes {
        assert!(m["reader"].is_null() && m["hot_cached_min_bytes"].is_null());
        assert!(m["mb_per_s"]["median"].as_f64().unwrap() > 0.0);
        assert!(m["speed_vs_buffered"].is_null(), "no buffered baseline");
    }
}

#[test]
fn interrupted_demo_cleans_up() {
    let _one = one_demo();
    let own_cg = match demo_possible() {
        Ok(p) => p,
        Err(reason) => return skip("interrupted_demo_cleans_up", &reason),
    };
    let dir = scratch_dir("demo-sigint");
    let mut child = Command::new(UBIO)
        .arg("demo")
        .args(TINY)
        .args(["--rounds", "20", "--dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Interrupt it in the middle of the timed phases, while a streamer and
    // the reader run in the cgroup and both files exist.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let go = line.contains("round 1/20: ubio write");
        seen.push(line);
        if go {
            break;
        }
    }
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
    assert_clean(pid, &own_cg, &dir);
    let rest = rest.join().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "exit status after SIGINT: {status}; stderr after the signal:\n{rest}"
    );
}

#[test]
fn not_enough_space_is_a_clear_error() {
    let dir = scratch_dir("demo-space");
    let out = Command::new(UBIO)
        .args(["demo", "--dataset", "900T", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not enough free space"), "{err}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "made files before failing"
    );
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn bad_sizes_are_refused() {
    for (args, want) in [
        (&["--limit", "64M", "--hot", "60M"][..], "does not fit"),
        (&["--limit", "1M"][..], "too small"),
        (&["--rounds", "0"][..], "rounds"),
        (&["--modes", "buffered,fast"][..], "unknown mode 'fast'"),
        (&["--modes", "ubio,buffered,ubio"][..], "listed twice"),
        (&["--modes", "buffered,,ubio"][..], "empty entry"),
        (
            &["--modes", "odirect", "--dataset", "1500K"][..],
            "whole number of MiB",
        ),
    ] {
        let out = Command::new(UBIO).arg("demo").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn worker_is_hidden_from_help() {
    let out = Command::new(UBIO).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("demo") && !help.contains("__worker"),
        "{help}"
    );
}
