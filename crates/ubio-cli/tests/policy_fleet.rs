//! `ubio policy` as a fleet runs it: the metrics endpoint scraped by a real
//! Prometheus (Debian's `prometheus` package), queried through its HTTP API
//! and checked by `promtool check metrics`; the endpoint on a unix socket,
//! and a listen address already taken; and the daemon in a container, run
//! by podman as a DaemonSet runs it (the host's PID namespace, /proc and
//! /sys/fs/cgroup, the unit's capabilities), governing processes in cgroups
//! of the test's own, and what it says when it lacks them.
//!
//! Needs root, the workspace built, and prometheus, promtool, podman and
//! runc (scripts/install-deps.sh installs them).

mod common;

use common::engine::*;
use common::policy::*;
use common::{skip, UBIO};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `GET path` over `stream` (HTTP/1.0); the status line and the body.
fn get(mut stream: impl Read + Write, path: &str) -> (String, String) {
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut all = String::new();
    stream.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `promtool check metrics` on `text`: its exit status and what it said.
fn promtool(text: &str) -> (bool, String) {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// A Prometheus server scraping `target` every second, its data in `dir`;
/// killed when dropped.
struct Prometheus {
    child: Child,
    api: SocketAddr,
}

impl Prometheus {
    fn start(dir: &Path, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: ubio\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={api}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .unwrap();
        Prometheus { child, api }
    }

    /// The value of a PromQL query's first sample (None: no sample yet, or
    /// the server not up yet).
    fn query(&self, promql: &str) -> Option<f64> {
        let enc: String = promql
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let s = TcpStream::connect(self.api).ok()?;
        let (status, body) = get(s, &format!("/api/v1/query?query={enc}"));
        if !status.contains(" 200 ") {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real Prometheus scrapes the endpoint on loopback; a PromQL query of
/// the bytes the scope's programs read returns what a stream in scope read;
/// `promtool check metrics` passes on what the endpoint serves.
#[test]
fn prometheus_scrapes_the_endpoint_and_promql_returns_the_bytes_read() {
    let _s = serial();
    let name = "prometheus_scrapes_the_endpoint_and_promql_returns_the_bytes_read";
    let Some(fx) = fixture(name) else { return };
    for tool in ["prometheus", "promtool"] {
        if !have(tool) {
            return skip(name, &format!("no {tool} (Debian's prometheus package)"));
        }
    }
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let cfg = fx.config(
        "policy.toml",
        &format!("[metrics]\nlisten = \"{addr}\"\ncgroups = true"),
        "",
    );
    let input = fx.path("in");
    write_input(&input, SIZE);
    let daemon = Daemon::start(&fx, &cfg, &[]);
    let (status, text) = get(TcpStream::connect(addr).unwrap(), "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    let (ok, said) = promtool(&text);
    assert!(ok, "promtool check metrics: {said}\n{text}");
    assert!(
        text.contains("ubio_policy_read_bytes_total{scope=\"t\"} 0"),
        "{text}"
    );
    let (status, _) = get(TcpStream::connect(addr).unwrap(), "/");
    assert!(status.contains(" 404 "), "{status}");

    let prom_dir = fx.path("prometheus");
    std::fs::create_dir(&prom_dir).unwrap();
    let prom = Prometheus::start(&prom_dir, addr);
    let before = daemon.finished_files();
    let out = fx.sh(&fx.inside, "cat in > /dev/null");
    assert!(out.status.success());
    daemon.wait_finished_since(before);
    let read = daemon.status()["owners"][0]["finished"]["bytes_read"]
        .as_u64()
        .unwrap();
    // (What the daemon counted from its first look at the file: cat's
    // first reads may come before it.)
    assert!(read >= SIZE / 2, "the daemon counted {read} B read");
    // Prometheus 2.x hands new targets to its scraper every 5 s.
    let t = Instant::now();
    let got = loop {
        let v = prom.query("ubio_policy_read_bytes_total{scope=\"t\"}");
        if v.is_some_and(|v| v >= read as f64) {
            break v.unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "Prometheus has {v:?} after 60 s; its log:\n{}",
            std::fs::read_to_string(prom_dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let cpu = prom
        .query("sum(ubio_policy_cpu_seconds_total)")
        .unwrap_or(0.0);
    let looks = prom
        .query("ubio_policy_look_lateness_seconds_count")
        .unwrap_or(0.0);
    eprintln!(
        "Prometheus: ubio_policy_read_bytes_total{{scope=\"t\"}} = {got} ({:.1} s after the stream); daemon CPU {cpu:.2} s; {looks} looks",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(
        got, read as f64,
        "Prometheus has {got}, the daemon counted {read}"
    );
    // The metrics once more, with the finished file's figures in them.
    let (_, text) = get(TcpStream::connect(addr).unwrap(), "/metrics");
    let (ok, said) = promtool(&text);
    assert!(ok, "promtool check metrics: {said}\n{text}");
    drop(prom);
    daemon.stop();
}

/// The endpoint on a unix socket answers; an address another program
/// listens on ends the daemon's start with the file, the line and the key.
#[test]
fn metrics_on_a_unix_socket_and_an_address_in_use_is_named() {
    let _s = serial();
    let name = "metrics_on_a_unix_socket_and_an_address_in_use_is_named";
    let Some(fx) = fixture(name) else { return };
    let sock = fx.path("run/metrics.sock");
    let cfg = fx.config(
        "policy.toml",
        &format!("[metrics]\nlisten = \"unix:{}\"", sock.display()),
        "",
    );
    let daemon = Daemon::start(&fx, &cfg, &[]);
    let (status, text) = get(
        std::os::unix::net::UnixStream::connect(&sock).unwrap(),
        "/metrics",
    );
    assert!(
        status.contains(" 200 ") && text.contains("ubio_policy_dry_run 0"),
        "{status}\n{text}"
    );
    daemon.stop();
    assert!(!sock.exists(), "the socket stayed");

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let cfg = fx.config("taken.toml", &format!("[metrics]\nlisten = \"{addr}\""), "");
    let out = Command::new(UBIO)
        .args(["policy", "run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let line = format!("{}:4: [metrics] listen = \"{addr}\": ", cfg.display());
    assert!(err.contains(&line) && err.contains("in use"), "{err}");
}

/// The options a DaemonSet gives the daemon's container
/// (dist/kubernetes/ubio-policy.yaml), as podman's: the host's PID
/// namespace (and so its /proc), a cgroup namespace of its own (a pod's on
/// cgroup v2: the daemon enters the host's), the host's /sys/fs/cgroup
/// (read-write: a budget's memory.reclaim), / at /host (the daemon marks
/// the filesystems it sees mounted), the systemd unit's four capabilities
/// and nothing else, no new privileges, a read-only root with a tmpfs for
/// the status socket, no network. `seccomp`: a profile file, or None for
/// podman's default (which refuses cachestat()).
fn daemonset_options(
    config: &Path,
    seccomp: Option<&Path>,
    caps: &str,
    pid_host: bool,
) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "--network=none".into(),
        "--cgroupns=private".into(),
        "--cap-drop=all".into(),
        format!("--cap-add={caps}"),
        "--security-opt=no-new-privileges".into(),
        "--read-only".into(),
        "--tmpfs=/run/ubio:rw,mode=0755".into(),
        "--volume=/sys/fs/cgroup:/sys/fs/cgroup:rw".into(),
        "--volume=/:/host:ro,rslave".into(),
        format!("--volume={}:/etc/ubio/policy.toml:ro", config.display()),
    ];
    if pid_host {
        v.push("--pid=host".into());
    }
    if let Some(p) = seccomp {
        v.push(format!("--security-opt=seccomp={}", p.display()));
    }
    v
}

/// The unit's capabilities (dist/systemd/ubio-policy.service.in), as
/// podman's --cap-add list.
fn unit_capabilities() -> String {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dist/systemd/ubio-policy.service.in"
    ))
    .unwrap();
    unit.lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(",")
}

/// The daemon in a container, as a DaemonSet runs it: an image built
/// offline by scripts/container.sh (from scratch, with the binary under
/// test), run by podman with [`daemonset_options`]. It governs a reader in
/// a cgroup of the test's own (nothing of its file left cached) and leaves
/// one in the sibling cgroup alone (its file stays cached). Then what it
/// says at start without what it needs: without CAP_SYS_PTRACE, without
/// the host's PID namespace, and under podman's default seccomp profile.
/// Where the kernel has RT_GROUP_SCHED, the container gets the real-time
/// budget the daemon's note asks for (`--cpu-rt-runtime`, its parents
/// too), so that its looks run SCHED_FIFO as the unit's do (without it the
/// reader's cache peaked at 36-56 of the 64 MiB allowed in 5 runs on an
/// idle machine here, with it at 38-48 in 6).
#[test]
fn the_daemon_in_a_podman_container_governs_sibling_cgroups() {
    let _s = serial();
    let name = "the_daemon_in_a_podman_container_governs_sibling_cgroups";
    let Some(fx) = fixture(name) else { return };
    let podman = match ubio_testenv::podman::Podman::new(&fx.root) {
        Ok(p) => p,
        Err(e) => return skip(name, &format!("no podman: {e}")),
    };
    let t = Instant::now();
    let built = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/container.sh"
    ))
    .args([
        "--binary",
        UBIO,
        "--tag",
        "localhost/ubio-policy:test",
        "--out",
    ])
    .arg(podman.dir())
    .envs(podman.envs())
    .output()
    .unwrap();
    assert!(
        built.status.success(),
        "scripts/container.sh: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    eprintln!("image built in {:.1} s", t.elapsed().as_secs_f64());
    let image = "localhost/ubio-policy:test";
    let seccomp = podman.dir().join("seccomp.json");
    let config = fx.path("container.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nsocket = \"/run/ubio/policy.sock\"\n[[scope]]\nname = \"t\"\ncgroups = [{:?}]\n",
            pattern(&fx.inside)
        ),
    )
    .unwrap();
    let caps = unit_capabilities();
    // The daemon's status, or why `podman exec` of `ubio policy status`
    // gave none (the daemon not up yet, or exec failing now and then).
    let status = |container: &str| -> Result<serde_json::Value, String> {
        let out = podman
            .output(&[
                "exec",
                container,
                "/usr/bin/ubio",
                "policy",
                "status",
                "--json",
            ])
            .unwrap();
        match out.status.success() {
            true => Ok(serde_json::from_slice(&out.stdout).unwrap()),
            false => Err(format!(
                "podman exec {container} ubio policy status: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    };
    let logs = |container: &str| -> String {
        let out = podman.output(&["logs", container]).unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    // The first status within `within`, asked every 50 ms; the last reason
    // and the daemon's log if none came.
    let status_within = |container: &str, within: Duration| -> serde_json::Value {
        let t = Instant::now();
        loop {
            match status(container) {
                Ok(st) => return st,
                Err(why) => assert!(
                    t.elapsed() < within,
                    "no status from {container} within {within:?}: {why}\n{}",
                    logs(container)
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let launch = |container: &str, opts: &[String]| {
        let mut args: Vec<&str> = opts.iter().map(String::as_str).collect();
        args.push(image);
        let out = podman.run_detached(container, &args).unwrap();
        assert!(
            out.status.success(),
            "podman run: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let start = |container: &str, opts: Vec<String>| {
        launch(container, &opts);
        status_within(container, Duration::from_secs(20));
    };

    // 50 ms of each second.
    let real_time = podman.give_real_time(50_000).unwrap();
    let mut opts = daemonset_options(&config, Some(&seccomp), &caps, true);
    if real_time {
        opts.push("--cpu-rt-runtime=50000".into());
    }
    start("ubio-policy", opts);
    let input = fx.path("in");
    let theirs = fx.path("theirs");
    write_input(&input, SIZE);
    write_input(&theirs, SIZE);
    let finished = |st: &serde_json::Value| -> u64 {
        st["owners"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["finished"]["files"].as_u64().unwrap())
            .sum()
    };
    let before = finished(&status_within("ubio-policy", Duration::from_secs(20)));
    let si = ubio_testenv::residency_sampler::ResidencySampler::follow_all(
        vec![input.clone()],
        SAMPLE_EVERY,
    );
    for (cg, cmd) in [
        (&fx.inside, "cat in > /dev/null"),
        (&fx.outside, "cat theirs > /dev/null"),
    ] {
        let out = fx.sh(cg, cmd);
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let t = Instant::now();
    loop {
        let st = status_within("ubio-policy", Duration::from_secs(20));
        if finished(&st) > before && st["files"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(
            t.elapsed() < FINISH_WITHIN,
            "the daemon finished nothing: {st}\n{}",
            logs("ubio-policy")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let peak = si.finish().unwrap();
    let (left, kept) = (cached(&input), cached(&theirs));
    let log = logs("ubio-policy");
    eprintln!(
        "in a container: in scope peak {:.1} MiB, left {left} B; out of scope {} MiB of {} cached; log:\n{log}",
        (peak.max_cached * PAGE) as f64 / MIB as f64,
        kept / MIB,
        SIZE / MIB
    );
    assert_eq!(left, 0, "in scope, the file stayed cached");
    assert!(peak.max_cached * PAGE <= PEAK_LIMIT, "{peak:?}");
    assert!(
        kept >= SIZE / 2,
        "out of scope, only {kept} B stayed cached"
    );
    assert!(
        !log.contains("without CAP_") && !log.contains("PID namespace of its own"),
        "{log}"
    );
    assert!(log.contains("entered the host's cgroup namespace"), "{log}");
    // Real-time with the unit's CAP_SYS_NICE (and, where the kernel has
    // RT_GROUP_SCHED, the budget given above).
    assert!(log.contains("runs SCHED_FIFO at priority 1"), "{log}");
    let _ = podman.output(&["rm", "-f", "-t", "2", "ubio-policy"]);

    // What it lacks, said at start.
    let lacking = [
        (
            "no-ptrace",
            daemonset_options(
                &config,
                Some(&seccomp),
                &caps
                    .replace("CAP_SYS_PTRACE,", "")
                    .replace(",CAP_SYS_PTRACE", ""),
                true,
            ),
            "CAP_SYS_PTRACE is needed",
        ),
        (
            "own-pids",
            daemonset_options(&config, Some(&seccomp), &caps, false),
            "a PID namespace of its own",
        ),
        (
            "default-seccomp",
            daemonset_options(&config, None, &caps, true),
            "cachestat() refused (ENOSYS on a kernel that has it",
        ),
    ];
    for (container, opts, said) in lacking {
        // It starts and says so, or it cannot and ends saying why.
        launch(container, &opts);
        let t = Instant::now();
        while status(container).is_err() && !logs(container).contains(said) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{container}: neither up nor said {said:?}:\n{}",
                logs(container)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = logs(container);
        eprintln!(
            "{container}: {}",
            log.lines()
                .find(|l| l.contains(said))
                .unwrap_or("(not said)")
        );
        assert!(log.contains(said), "{container}: {said:?} not said:\n{log}");
        let rm = podman.output(&["rm", "-f", "-t", "2", container]).unwrap();
        assert!(
            rm.status.success(),
            "podman rm {container}: {}",
            String::from_utf8_lossy(&rm.stderr)
        );
    }
}

/// What dist/kubernetes/ubio-policy.yaml gives the daemon's container, as
/// JSON, read with PyYAML from the tests' venv (ubio_testenv::pyenv).
const MANIFEST_FACTS: &str = r#"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
cm = next(d for d in docs if d["kind"] == "ConfigMap")
spec = ds["spec"]["template"]["spec"]
c = spec["containers"][0]
sc = c["securityContext"]
vols = {v["name"]: v for v in spec["volumes"]}
mounts = []
for m in c["volumeMounts"]:
    v = vols[m["name"]]
    source = v["hostPath"]["path"] if "hostPath" in v else next(k for k in v if k != "name")
    mounts.append({"path": m["mountPath"], "ro": bool(m.get("readOnly")), "source": source})
print(json.dumps({
    "host_pid": spec.get("hostPID", False),
    "host_network": spec.get("hostNetwork", False),
    "cap_add": ["CAP_" + x for x in sc["capabilities"]["add"]],
    "cap_drop": sc["capabilities"]["drop"],
    "no_new_privileges": sc.get("allowPrivilegeEscalation") is False,
    "read_only_root": sc.get("readOnlyRootFilesystem", False),
    "seccomp": sc["seccompProfile"]["type"],
    "mounts": mounts,
    "policy": cm["data"]["policy.toml"],
}))
"#;

/// The DaemonSet's manifest passes Kubernetes' schemas (kubernetes-validate,
/// offline), gives the container what the podman test runs it with
/// ([`daemonset_options`]: the host's PID namespace, the unit's
/// capabilities and no others, no new privileges, a read-only root, the
/// same mounts with the same modes), and its ConfigMap's configuration
/// passes `ubio policy check`.
#[test]
fn the_daemonset_manifest_is_valid_and_runs_what_the_podman_test_runs() {
    let name = "the_daemonset_manifest_is_valid_and_runs_what_the_podman_test_runs";
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dist/kubernetes/ubio-policy.yaml"
    );
    let env = ubio_testenv::pyenv();
    let validate = env.join("bin/kubernetes-validate");
    if !validate.exists() {
        return skip(
            name,
            &format!(
                "no {} (scripts/install-deps.sh installs it)",
                validate.display()
            ),
        );
    }
    let out = Command::new(&validate)
        .args(["--strict", manifest])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubernetes-validate: {said}");
    assert_eq!(said.matches(" passed for resource ").count(), 3, "{said}");
    let out = Command::new(env.join("bin/python"))
        .args(["-c", MANIFEST_FACTS, manifest])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let caps: Vec<String> = unit_capabilities().split(',').map(str::to_string).collect();
    let mut added: Vec<String> = serde_json::from_value(m["cap_add"].clone()).unwrap();
    added.sort();
    let mut want = caps.clone();
    want.sort();
    assert_eq!(
        added, want,
        "the DaemonSet's capabilities are not the unit's"
    );
    assert_eq!(m["cap_drop"], serde_json::json!(["ALL"]));
    assert_eq!(m["host_pid"], true);
    assert_eq!(m["host_network"], false);
    assert_eq!(m["no_new_privileges"], true);
    assert_eq!(m["read_only_root"], true);
    assert_eq!(m["seccomp"], "RuntimeDefault");
    // Every mount of the podman test, at the same place with the same mode.
    let podman = daemonset_options(
        Path::new("/etc/ubio/policy.toml"),
        None,
        &caps.join(","),
        true,
    );
    let mounts = m["mounts"].as_array().unwrap();
    for opt in &podman {
        let (dst, ro) = if let Some(v) = opt.strip_prefix("--volume=") {
            let parts: Vec<&str> = v.split(':').collect();
            (parts[1].to_string(), parts[2].split(',').any(|o| o == "ro"))
        } else if let Some(t) = opt.strip_prefix("--tmpfs=") {
            (t.split(':').next().unwrap().to_string(), false)
        } else {
            continue;
        };
        // The podman test mounts the configuration file; the DaemonSet its
        // ConfigMap's directory.
        let dst = if dst == "/etc/ubio/policy.toml" {
            "/etc/ubio".to_string()
        } else {
            dst
        };
        let found = mounts
            .iter()
            .find(|x| x["path"] == dst.as_str())
            .unwrap_or_else(|| panic!("the DaemonSet does not mount {dst}: {mounts:?}"));
        assert_eq!(
            found["ro"], ro,
            "{dst}: read-only {} in the DaemonSet, {ro} in podman's",
            found["ro"]
        );
    }
    assert_eq!(mounts.len(), 4, "{mounts:?}");
    // Its configuration, as the daemon would read it.
    let dir = common::workdir();
    let cfg = dir.path().join("policy.toml");
    std::fs::write(&cfg, m["policy"].as_str().unwrap()).unwrap();
    let out = Command::new(UBIO)
        .args(["policy", "check"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ubio policy check: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("page-cache budget 25% of memory.max per cgroup"),
        "{said}"
    );
}
