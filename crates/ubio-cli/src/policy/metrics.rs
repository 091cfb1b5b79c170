//! The daemon's Prometheus endpoint (`[metrics] listen = ...`, off without
//! it): `GET /metrics` answers the figures `ubio policy status` has, in
//! Prometheus' text format (0.0.4), on loopback TCP or a unix socket.
//!
//! Names follow Prometheus' conventions: a `ubio_policy_` prefix, base
//! units (bytes, seconds), `_total` for counters. Labels are bounded: the
//! scopes' names; per-cgroup series of the budgets only with `cgroups =
//! true`, and at most `max_cgroups` of them (the cgroups most over their
//! budget first; `ubio_policy_metrics_cgroups_left_out` says how many were
//! left out). The machine's reclaim counters are deltas since the daemon
//! started, as in the status. Each scrape asks the engine's loop for fresh
//! figures, as a status request does.

use super::config::{Listen, Metrics};
use super::status::{DaemonStatus, Shared};
use anyhow::{Context, Result};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use std::collections::BTreeMap;
use std::sync::Arc;
use ubio_engine::lateness;

/// The endpoint's server; its unix socket (if any) is removed when dropped.
pub struct Server {
    socket: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(p) = &self.socket {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Listen where `m` says and answer scrapes from `shared` on a thread of
/// its own. The error names the address (taken, not permitted).
pub fn serve(m: &Metrics, shared: Arc<Shared>) -> Result<Server> {
    let (server, socket) = match &m.listen {
        Listen::Tcp(addr) => (
            tiny_http::Server::http(addr).map_err(|e| anyhow::anyhow!("{e}"))?,
            None,
        ),
        Listen::Unix(path) => {
            // A socket left by a daemon that died: only a socket is removed.
            if let Ok(old) = std::fs::symlink_metadata(path) {
                use std::os::unix::fs::FileTypeExt;
                if !old.file_type().is_socket() {
                    anyhow::bail!("{} exists and is not a socket", path.display());
                }
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    anyhow::bail!("{}: another daemon answers there", path.display());
                }
                std::fs::remove_file(path)?;
            }
            (
                tiny_http::Server::http_unix(path).map_err(|e| anyhow::anyhow!("{e}"))?,
                Some(path.clone()),
            )
        }
    };
    let opts = m.clone();
    std::thread::Builder::new()
        .name("ubio-policy-metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let resp = if req.url() == "/metrics" || req.url().starts_with("/metrics?") {
                    tiny_http::Response::from_string(render(&shared.fresh(), &opts)).with_header(
                        tiny_http::Header::from_bytes(
                            "Content-Type",
                            "text/plain; version=0.0.4; charset=utf-8",
                        )
                        .expect("a valid header"),
                    )
                } else {
                    tiny_http::Response::from_string("ubio policy: the metrics are at /metrics\n")
                        .with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        })
        .context("start the metrics thread")?;
    Ok(Server { socket })
}

/// The figures as Prometheus' text format.
pub fn render(s: &DaemonStatus, m: &Metrics) -> String {
    let mut f = Families::default();
    let e = &s.engine;
    f.gauge(
        "dry_run",
        "1 when the daemon only observes (dry run): its figures are what it would have done.",
        &[],
        b(e.dry_run),
    );
    f.gauge(
        "uptime_seconds",
        "Seconds since the daemon started.",
        &[],
        e.uptime_s,
    );
    let realtime =
        s.scheduling.contains("runs SCHED_FIFO") && !s.scheduling.starts_with("put back");
    f.gauge(
        "looker_realtime",
        "1 while the thread that looks runs SCHED_FIFO.",
        &[],
        b(realtime),
    );
    f.counter(
        "cpu_seconds_total",
        "The daemon's own CPU time, by mode.",
        &[("mode", "user")],
        e.cpu_user_s,
    );
    f.counter(
        "cpu_seconds_total",
        "The daemon's own CPU time, by mode.",
        &[("mode", "system")],
        e.cpu_system_s,
    );
    f.counter(
        "fanotify_events_total",
        "fanotify events read.",
        &[],
        e.events as f64,
    );
    f.counter(
        "fanotify_overflows_total",
        "fanotify queue overflows (each followed by a scan).",
        &[],
        e.overflows as f64,
    );
    f.gauge(
        "processes_followed",
        "Processes of the scopes followed now.",
        &[],
        e.processes_followed as f64,
    );
    for sc in e.per_scope() {
        let l = [("scope", sc.name.as_str())];
        let t = &sc.totals;
        f.gauge("files", "Files managed now.", &l, sc.managed_now as f64);
        f.counter(
            "files_total",
            "Files managed so far (finished and now).",
            &l,
            t.files as f64,
        );
        f.counter(
            "read_bytes_total",
            "Bytes the scope's programs read from managed files.",
            &l,
            t.bytes_read as f64,
        );
        f.counter(
            "written_bytes_total",
            "Bytes the scope's programs wrote to managed files.",
            &l,
            t.bytes_written as f64,
        );
        f.counter(
            "dropped_pages_total",
            "Page cache pages dropped behind the streams (in a dry run: would have been).",
            &l,
            t.pages_dropped as f64,
        );
        f.counter(
            "kept_pages_total",
            "Pages kept because others had them cached before the stream.",
            &l,
            t.pages_kept as f64,
        );
        f.gauge(
            "dirty_writeback_peak_bytes",
            "The most dirty + writeback bytes seen of one file.",
            &l,
            t.dirty_peak_bytes as f64,
        );
    }
    let mut per_scope: BTreeMap<&str, (u64, u64, u64, u64)> = BTreeMap::new();
    for name in &e.scopes {
        per_scope.entry(name.as_str()).or_default();
    }
    for c in &s.budgets {
        let t = per_scope.entry(c.scope.as_str()).or_default();
        t.0 += c.reclaims;
        t.1 += c.reclaimed_bytes;
        t.2 += u64::from(!c.gone);
        t.3 += u64::from(!c.gone && c.budget_bytes > 0 && c.file_bytes > c.budget_bytes);
    }
    for (scope, (n, bytes, cgroups, over)) in per_scope {
        let l = [("scope", scope)];
        f.counter(
            "budget_reclaims_total",
            "memory.reclaim writes to keep the scope's cgroups within their page-cache budget.",
            &l,
            n as f64,
        );
        f.counter(
            "budget_reclaimed_bytes_total",
            "Page cache the budget's reclaims took from the scope's cgroups.",
            &l,
            bytes as f64,
        );
        f.gauge(
            "budget_cgroups",
            "Cgroups the scope's budget is kept for.",
            &l,
            cgroups as f64,
        );
        f.gauge(
            "budget_cgroups_over",
            "Of them, those over their budget at the last look.",
            &l,
            over as f64,
        );
    }
    if m.cgroups {
        let mut list: Vec<_> = s.budgets.iter().filter(|c| !c.gone).collect();
        list.sort_by_key(|c| std::cmp::Reverse(c.file_bytes.saturating_sub(c.budget_bytes)));
        let left_out = list.len().saturating_sub(m.max_cgroups);
        for c in list.into_iter().take(m.max_cgroups) {
            let l = [("scope", c.scope.as_str()), ("cgroup", c.cgroup.as_str())];
            f.gauge(
                "cgroup_file_bytes",
                "Page cache charged to the cgroup (memory.stat file) at the last look.",
                &l,
                c.file_bytes as f64,
            );
            f.gauge(
                "cgroup_budget_bytes",
                "The cgroup's page-cache budget.",
                &l,
                c.budget_bytes as f64,
            );
            f.counter(
                "cgroup_budget_reclaimed_bytes_total",
                "Page cache the budget's reclaims took from the cgroup.",
                &l,
                c.reclaimed_bytes as f64,
            );
        }
        f.gauge(
            "metrics_cgroups_left_out",
            "Budgeted cgroups without series (beyond max_cgroups).",
            &[],
            left_out as f64,
        );
    }
    let r = &s.machine_reclaim;
    for (key, v) in &r.counters {
        let (name, help, labels): (&str, &str, Vec<(&str, &str)>) = match key.as_str() {
            "pgscan_kswapd" => (
                "machine_scanned_pages_total",
                "Pages the machine's reclaim scanned since the daemon started.",
                vec![("by", "kswapd")],
            ),
            "pgscan_direct" => (
                "machine_scanned_pages_total",
                "Pages the machine's reclaim scanned since the daemon started.",
                vec![("by", "direct")],
            ),
            "pgsteal_kswapd" => (
                "machine_reclaimed_pages_total",
                "Pages the machine's reclaim took since the daemon started.",
                vec![("by", "kswapd")],
            ),
            "pgsteal_direct" => (
                "machine_reclaimed_pages_total",
                "Pages the machine's reclaim took since the daemon started.",
                vec![("by", "direct")],
            ),
            "compact_stall" => (
                "machine_compaction_stalls_total",
                "Direct compaction stalls since the daemon started.",
                vec![],
            ),
            k if k.starts_with("allocstall_") => (
                "machine_direct_reclaim_stalls_total",
                "Direct reclaim stalls since the daemon started, by zone.",
                vec![("zone", &k["allocstall_".len()..])],
            ),
            _ => continue,
        };
        f.counter(name, help, &labels, *v as f64);
    }
    if let Some(w) = &r.kswapd_wakes {
        for (order, n) in w {
            let o = order.to_string();
            f.counter(
                "machine_kswapd_wakes_total",
                "kswapd's wakes since the daemon started, by the allocation order asked (traced).",
                &[("order", &o)],
                *n as f64,
            );
        }
    }
    f.histogram(
        "look_lateness_seconds",
        "How long after its due time each look of the engine began.",
        &e.lateness,
    );
    f.encode()
}

fn b(v: bool) -> f64 {
    if v {
        1.0
    } else {
        0.0
    }
}

/// The metric families of one scrape, by name, in the order first added.
#[derive(Default)]
struct Families {
    list: Vec<MetricFamily>,
}

impl Families {
    fn family(&mut self, name: &str, help: &str, kind: MetricType) -> &mut MetricFamily {
        let full = format!("ubio_policy_{name}");
        let i = match self.list.iter().position(|f| f.name() == full) {
            Some(i) => i,
            None => {
                let mut f = MetricFamily::default();
                f.set_name(full);
                f.set_help(help.to_string());
                f.set_field_type(kind);
                self.list.push(f);
                self.list.len() - 1
            }
        };
        &mut self.list[i]
    }

    fn sample(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        labels: &[(&str, &str)],
        v: f64,
    ) {
        let mut m = proto::Metric::default();
        m.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut l = proto::LabelPair::default();
                    l.set_name(k.to_string());
                    l.set_value(v.to_string());
                    l
                })
                .collect(),
        );
        match kind {
            MetricType::COUNTER => {
                let mut c = proto::Counter::default();
                c.set_value(v);
                m.set_counter(c);
            }
            _ => {
                let mut g = proto::Gauge::default();
                g.set_value(v);
                m.set_gauge(g);
            }
        }
        self.family(name, help, kind).mut_metric().push(m);
    }

    fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        self.sample(name, help, MetricType::COUNTER, labels, v);
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        self.sample(name, help, MetricType::GAUGE, labels, v);
    }

    fn histogram(&mut self, name: &str, help: &str, l: &lateness::Lateness) {
        let mut h = proto::Histogram::default();
        h.set_sample_count(l.count);
        h.set_sample_sum(l.sum_s);
        let counts = if l.buckets.is_empty() {
            vec![0; lateness::BOUNDS.len()]
        } else {
            l.buckets.clone()
        };
        h.set_bucket(
            lateness::BOUNDS
                .iter()
                .zip(counts)
                .map(|(bound, n)| {
                    let mut b = proto::Bucket::default();
                    b.set_upper_bound(*bound);
                    b.set_cumulative_count(n);
                    b
                })
                .collect(),
        );
        let mut m = proto::Metric::default();
        m.set_histogram(h);
        self.family(name, help, MetricType::HISTOGRAM)
            .mut_metric()
            .push(m);
    }

    fn encode(self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.list, &mut buf)
            .expect("text encoding into memory");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}
