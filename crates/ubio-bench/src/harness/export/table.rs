//! The report as tables of text cells, shared by the Markdown and HTML
//! exporters (each escapes the cells for its own format).

use crate::harness::schema::{Backing, ModeSummary, Report, Run, Target};
use crate::harness::summary::{backed_baseline_mode, baseline_mode};
use crate::stats::Summary;
/// "1.5 GiB" style (powers of 1024): the library's formatter.
use ubio::size::human as human_bytes;

/// A table: a header and rows of cells, all plain text.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

fn strings<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.map(str::to_owned).to_vec()
}

/// What the headline's figures are, said under it.
pub const HEADLINE_NOTE: &str =
    "MB/s: whole-run throughput over the rounds (median [min–max] ± standard deviation); \
     CPU (user + system) and system s/GB, reclaim, memory reported to the host and time to \
     durability: medians over the rounds; cache: highest over the rounds.";

/// The headline: one row per mode.
pub fn headline(report: &Report) -> Table {
    let baseline = baseline_mode(report).map_or("baseline".to_owned(), |m| m.to_string());
    let twin = backed_baseline_mode(report);
    let mut header = strings(["mode", "backend", "runs", "MB/s median [min–max] ± sd"]);
    header.push(format!("vs {baseline}"));
    if let Some(t) = twin {
        header.push(format!("vs {t} (bare metal)"));
    }
    header.extend(strings([
        "CPU s/GB",
        "sys s/GB",
        "reported to host",
        "reclaimed pages/GB",
        "kswapd CPU s",
        "dataset cache peak / final",
        "dirty+writeback peak",
        "time to durable s",
        "victim median / worst % of solo",
    ]));
    Table {
        header,
        rows: report
            .modes
            .iter()
            .map(|m| mode_row(m, twin.is_some()))
            .collect(),
    }
}

fn mode_row(m: &ModeSummary, backed_column: bool) -> Vec<String> {
    let runs = match m.runs_failed {
        0 => m.runs_ok.to_string(),
        f => format!("{} ({f} failed)", m.runs_ok),
    };
    let ran = m.runs_ok > 0;
    let bytes = |b: u64| if ran { human_bytes(b) } else { "–".into() };
    let ratio = |r: Option<f64>| r.map_or("–".into(), |r| format!("{r:.2}×"));
    let mut row = vec![
        m.mode.to_string(),
        m.backend.clone(),
        runs,
        m.mb_per_s.map_or("–".into(), spread),
        ratio(m.speed_vs_baseline),
    ];
    if backed_column {
        row.push(ratio(m.speed_vs_backed_baseline));
    }
    row.extend([
        median(m.cpu_secs_per_gb, 2),
        median(m.cpu_sys_secs_per_gb, 2),
        m.reported_to_host_bytes
            .map_or("–".into(), |s| human_bytes(s.median as u64)),
        median(m.reclaimed_pages_per_gb, 0),
        median(m.kswapd_cpu_secs, 2),
        if ran {
            format!(
                "{} / {}",
                human_bytes(m.peak_dataset_cached_bytes),
                human_bytes(m.final_dataset_cached_bytes)
            )
        } else {
            "–".into()
        },
        m.peak_dataset_dirty_writeback_bytes
            .map_or("–".into(), bytes),
        median(m.time_to_durable_secs, 2),
        m.victim.map_or("–".into(), |v| {
            match (v.median_pct_of_solo, v.worst_pct_of_solo) {
                (Some(a), Some(b)) => format!("{a:.0}% / {b:.0}%"),
                _ => format!("{:.0} / {:.0} ops/s", v.median_ops_per_s, v.worst_ops_per_s),
            }
        }),
    ]);
    row
}

/// fio's figures next to the harness's.
pub fn fio(report: &Report) -> Table {
    Table {
        header: strings([
            "mode",
            "fio MB/s",
            "harness MB/s",
            "difference",
            "agrees",
            "fio command",
        ]),
        rows: report
            .fio
            .iter()
            .map(|f| {
                vec![
                    f.mode.to_string(),
                    format!("{:.0}", f.fio_mb_per_s),
                    format!("{:.0}", f.harness_mb_per_s),
                    format!("{:+.1}%", f.difference_pct),
                    if f.agrees { "yes" } else { "NO (>10%)" }.into(),
                    f.command.clone(),
                ]
            })
            .collect(),
    }
}

/// "label: value" lines about the machine.
pub fn environment(report: &Report) -> Vec<(String, String)> {
    let e = &report.environment;
    let mut lines = vec![
        (
            "tool".to_owned(),
            match &e.git_commit {
                Some(c) => format!("{} ({c})", e.tool_version),
                None => e.tool_version.clone(),
            },
        ),
        ("kernel".into(), e.kernel.clone()),
        ("host".into(), e.hostname.clone()),
        ("CPU".into(), format!("{} × {}", e.cpus, e.cpu_model)),
        ("memory".into(), human_bytes(e.mem_total_bytes)),
        ("cgroup".into(), e.cgroup_version.clone()),
        (
            "virtualization".into(),
            match e.virtualization.summary.as_str() {
                "" => "not recorded".to_owned(),
                s => s.to_owned(),
            },
        ),
        (
            "free page reporting".into(),
            match &e.free_page_reporting {
                None if e.virtualization.summary.is_empty() => "not recorded".to_owned(),
                None => "off (no /sys/module/page_reporting)".to_owned(),
                Some(p) => {
                    let params: Vec<String> = p.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("on ({})", params.join(", "))
                }
            },
        ),
        (
            "filesystem".into(),
            format!("{} on {}", e.filesystem, e.device),
        ),
    ];
    lines.push(("ubio's data path".into(), settings_line(&e.ubio_settings)));
    if !e.tools.is_empty() {
        let tools: Vec<String> = e.tools.iter().map(|(k, v)| format!("{k} {v}")).collect();
        lines.push(("tools".into(), tools.join(", ")));
    }
    lines
}

/// "label: value" lines about what was asked for.
pub fn config(report: &Report) -> Vec<(String, String)> {
    let c = &report.config;
    let w = &c.workload;
    let mut workload = format!(
        "{}, {} blocks, {} thread(s) × {} file(s), dataset {}, queue depth {}",
        w.kind,
        human_bytes(w.block_bytes),
        w.threads,
        w.files_per_thread,
        human_bytes(w.dataset_bytes),
        w.queue_depth,
    );
    let streams = w.streams_note();
    if !streams.is_empty() {
        workload += &format!(" ({streams})");
    }
    if let Some(d) = w.duration_secs {
        workload += &format!(", at most {d} s");
    }
    let target = match &c.target {
        Target::Dir { path } => format!("directory {}", path.display()),
        Target::Loop {
            filesystem,
            backing,
            size_bytes,
            throttle_mb_per_s,
        } => {
            let mut t = format!(
                "{filesystem} on a {} loop device backed by {}",
                human_bytes(*size_bytes),
                match backing {
                    Backing::Shm => "a file in /dev/shm",
                    Backing::Disk => "a file on the disk (loop direct I/O)",
                }
            );
            if let Some(mbps) = throttle_mb_per_s {
                t += &format!(", throttled to {mbps} MB/s");
            }
            t
        }
    };
    let modes: Vec<String> = c.modes.iter().map(|m| m.to_string()).collect();
    let order = match &report.schedule {
        Some(s) => {
            let rounds: Vec<String> = s
                .rounds
                .iter()
                .zip(1..)
                .map(|(o, i)| {
                    let names: Vec<String> = o.iter().map(|m| m.to_string()).collect();
                    format!("{i}: {}", names.join(" "))
                })
                .collect();
            format!("seed {}; {}", s.seed, rounds.join("; "))
        }
        None => "the modes' order, every round (a report from before randomized orders)".to_owned(),
    };
    let each = if report.schedule.is_some() {
        "each in a random order"
    } else {
        "interleaved"
    };
    vec![
        ("workload".into(), workload),
        (
            "modes".into(),
            format!("{} (× {} rounds, {each})", modes.join(", "), c.rounds),
        ),
        ("order".into(), order),
        ("target".into(), target),
        (
            "memory limit".into(),
            match (c.memory_limit_bytes, c.global_pressure) {
                (Some(l), _) => format!("a memory cgroup limited to {}", human_bytes(l)),
                (None, Some(p)) => {
                    let mut s = format!(
                        "none: global pressure, a balloon of locked memory leaves {} available \
                         (floor {})",
                        human_bytes(p.leave_bytes),
                        human_bytes(p.floor_bytes)
                    );
                    if let Some(r) = &report.pressure {
                        s += &format!(
                            "; it locked {} in {:.0} s ({} available before, {} after), held {} at the end",
                            human_bytes(r.balloon_bytes),
                            r.inflate_secs,
                            human_bytes(r.available_before_bytes),
                            human_bytes(r.available_after_bytes),
                            human_bytes(r.held_at_end_bytes)
                        );
                    }
                    s
                }
                (None, None) => "none".into(),
            },
        ),
        (
            "victim".into(),
            match (c.victim_hot_bytes, &report.victim_solo) {
                (None, _) => "none".into(),
                (Some(hot), Some(solo)) => format!(
                    "re-reads a {} hot file; alone {:.0} ops/s median",
                    human_bytes(hot),
                    solo.ops_per_s.median
                ),
                (Some(hot), None) => format!("re-reads a {} hot file", human_bytes(hot)),
            },
        ),
        (
            "status".into(),
            format!(
                "{} runs in {:.0} s{}",
                report.runs.len(),
                report.wall_secs,
                if report.complete {
                    ""
                } else {
                    " (incomplete: runs still to come)"
                }
            ),
        ),
    ]
}

/// The per-second figures of one run, as the seeds print theirs (sar,
/// pidstat, "1s: 1856MB/sec"): throughput, kswapd's share of a CPU (all
/// its threads), pages scanned and reclaimed per second by kswapd and by
/// the allocating tasks (direct), free memory and page cache at each
/// second's end, and the victim's reads.
pub fn per_second(run: &Run) -> Table {
    let victim = run.samples.iter().any(|s| s.victim_ops_per_s.is_some());
    let mut header = strings([
        "s",
        "MB/s",
        "kswapd %CPU",
        "pgscan kswapd/s",
        "pgscan direct/s",
        "pgsteal kswapd/s",
        "pgsteal direct/s",
        "free",
        "cached",
    ]);
    if victim {
        header.push("victim reads/s".into());
    }
    let rows = run
        .samples
        .iter()
        .map(|s| {
            let rate = |n: u64| format!("{:.0}", n as f64 / s.interval_secs);
            let mut row = vec![
                format!("{:.1}", s.t_secs),
                format!("{:.0}", s.mb_per_s),
                format!("{:.0}", s.kswapd_pct()),
                rate(s.pgscan_kswapd),
                rate(s.pgscan_direct),
                rate(s.pgsteal_kswapd),
                rate(s.pgsteal_direct),
                s.free_bytes.map_or("–".into(), human_bytes),
                human_bytes(s.cached_bytes),
            ];
            if victim {
                row.push(s.victim_ops_per_s.map_or("–".into(), |v| format!("{v:.0}")));
            }
            row
        })
        .collect();
    Table { header, rows }
}

/// "412 [398–420] ± 8.1".
fn spread(s: Summary) -> String {
    format!(
        "{:.0} [{:.0}–{:.0}] ± {:.1}",
        s.median, s.min, s.max, s.stddev
    )
}

fn median(s: Option<Summary>, decimals: usize) -> String {
    s.map_or("–".into(), |s| format!("{:.d$}", s.median, d = decimals))
}

/// The ubio modes' data-path settings in a line: "UBIO_DIRECT_READS=always",
/// or the library's defaults.
pub fn settings_line(settings: &std::collections::BTreeMap<String, String>) -> String {
    if settings.is_empty() {
        return "the library's defaults".into();
    }
    let set: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{} (the library's defaults otherwise)", set.join(", "))
}
