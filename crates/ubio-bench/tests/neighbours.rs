//! `ubio-bench neighbours` end to end at a tiny size (about a minute):
//! PostgreSQL and nginx of its own, each alone and beside an image copy
//! plain, under `ubio run`, under the policy daemon and with dd's nocache,
//! in memory cgroups; the report complete, every run measured, the files
//! and plots written, and nothing left behind (scratch directory, cgroups,
//! processes).

mod common;

use common::{skip, stderr, ubio_bench, workdir};
use serde_json::Value;
use std::path::Path;

/// Why the scenario cannot run here, if it cannot.
fn impossible() -> Option<String> {
    if let Err(why) = common::demo_possible() {
        return Some(why);
    }
    if let Err(why) = common::ubio_beside() {
        return Some(why);
    }
    let mut missing: Vec<&str> = ["nginx", "wrk", "setpriv", "dd"]
        .into_iter()
        .filter(|t| ubio_testenv::require_tool(t).is_err())
        .collect();
    let pg = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|v| v.path().join("bin/pgbench").is_file());
    if !pg {
        missing.push("postgresql");
    }
    (!missing.is_empty()).then(|| {
        format!(
            "missing {} (scripts/install-deps.sh installs them)",
            missing.join(", ")
        )
    })
}

/// The processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    ubio::procfs::all_pids()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

#[test]
fn neighbours_tiny_run_measures_every_cell_and_leaves_nothing() {
    let name = "neighbours_tiny_run_measures_every_cell_and_leaves_nothing";
    if let Some(why) = impossible() {
        skip(name, &why);
        return;
    }
    let dir = workdir();
    let out = dir.path().join("out");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    // workdir() is a temporary directory (0700): PostgreSQL runs as its
    // user and must reach the scratch directory.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = ubio_bench()
        .args(["neighbours", "--pressure", "cgroup", "--memory", "128M"])
        .args(["--data", "64M", "--web-set", "16M", "--scale", "2"])
        .args(["--loads", "pgbench-ro,wrk", "--streams", "image-cp"])
        .args(["--modes", "plain,ubio-run,policy,own", "--rounds", "1"])
        .args([
            "--lead-secs",
            "1",
            "--alone-secs",
            "2",
            "--seed",
            "7",
            "--json",
        ])
        .arg("--dir")
        .arg(&scratch)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["schema"], "ubio-neighbours");
    assert_eq!(r["complete"], true);
    let runs = r["runs"].as_array().unwrap();
    // Per load: alone, and the copy in four modes.
    assert_eq!(runs.len(), 2 * 5, "{:#}", r["runs"]);
    for run in runs {
        assert!(run["error"].is_null(), "{run:#}");
        let sv = &run["service"];
        assert!(sv["rate"].as_f64().unwrap() > 0.0, "{run:#}");
        assert!(sv["latency"]["p99_ms"].as_f64().unwrap() > 0.0, "{run:#}");
        assert!(!run["seconds"].as_array().unwrap().is_empty(), "{run:#}");
        assert!(
            run["set_cached_start_bytes"].as_u64().unwrap() > 0,
            "{run:#}"
        );
        if !run["cell"]["beside"].is_null() {
            let st = &run["stream"];
            assert_eq!(st["bytes"], 64 << 20, "{run:#}");
            assert!(st["mb_per_s"].as_f64().unwrap() > 0.0, "{run:#}");
            // CPU times are read (a 64 MiB copy may take under a tick).
            assert!(st["cpu_secs"].as_f64().unwrap() >= 0.0, "{run:#}");
            assert!(st["kswapd_cpu_secs"].as_f64().unwrap() >= 0.0, "{run:#}");
            let policy = run["cell"]["beside"]["mode"] == "policy";
            assert_eq!(st["daemon_cpu_secs"].is_f64(), policy, "{run:#}");
        }
    }
    assert_eq!(r["summaries"].as_array().unwrap().len(), 10);
    for f in [
        "neighbours.json",
        "runs.csv",
        "seconds.csv",
        "neighbours.md",
        "neighbours.html",
    ] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    let html = std::fs::read_to_string(out.join("neighbours.html")).unwrap();
    // Per load: three plots beside the one stream.
    assert_eq!(html.matches("<svg").count(), 6);
    // Nothing left: the scratch directory, our cgroups, the services.
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(left.is_empty(), "left in {}: {left:?}", scratch.display());
    let own = ubio_testenv::cgroup::own_memory_cgroup().unwrap();
    for prefix in ["ubio-bench-service", "ubio-bench-stream"] {
        let leaf = format!("{prefix}-{pid}-");
        let cgs: Vec<String> = std::fs::read_dir(&own)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(&leaf))
            .collect();
        assert!(cgs.is_empty(), "cgroups left in {}: {cgs:?}", own.display());
    }
    let procs = processes_naming(&scratch.display().to_string());
    assert!(procs.is_empty(), "processes left: {procs:?}");
    assert!(!Path::new(&out).join(".neighbours.json.tmp").exists());
}
