//! The neighbours report as tables and plots, shared by the Markdown and
//! HTML exporters.

use crate::harness::export::svg::{Plot, Series};
use crate::harness::export::table::Table;
use crate::harness::neighbours::latency::Second;
use crate::harness::neighbours::plan::{Beside, Load, Pressure, Stream};
use crate::harness::neighbours::report::{self, CellSummary, NeighboursReport};
use crate::stats::Summary;
use ubio::size::human as human_bytes;

/// The (pressure, load) pairs the report has, in a stable order.
pub fn sections(r: &NeighboursReport) -> Vec<(Pressure, Load)> {
    let mut v: Vec<(Pressure, Load)> = r
        .summaries
        .iter()
        .map(|s| (s.pressure, s.cell.load))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// "tar (ubio-run)", "alone".
pub fn beside_label(b: Option<Beside>) -> String {
    b.map_or("alone".into(), |b| format!("{} ({})", b.stream, b.mode))
}

/// A load's table under a pressure: one row per cell.
pub fn table(r: &NeighboursReport, pressure: Pressure, load: Load) -> Table {
    let header = [
        "beside",
        "runs",
        &format!("{} [min–max]", load.unit()),
        "% of alone",
        "p50 ms",
        "p99 ms [min–max]",
        "p99 × alone",
        "p99.9 ms",
        "worst second: rate / p99 ms",
        "set cached, lowest",
        "stream MB/s [min–max]",
        "reclaimed pages/GB",
        "stream CPU s/GB",
        "kswapd CPU s/GB",
    ]
    .map(str::to_owned)
    .to_vec();
    let rows = report::rows(r, pressure, load)
        .into_iter()
        .map(row)
        .collect();
    Table { header, rows }
}

fn row(s: &CellSummary) -> Vec<String> {
    let dash = || "–".to_owned();
    let runs = match s.runs_failed {
        0 => s.runs_ok.to_string(),
        f => format!("{} ({f} failed)", s.runs_ok),
    };
    vec![
        beside_label(s.cell.beside),
        runs,
        s.rate.map_or_else(dash, |x| spread(x, 0)),
        s.rate_pct_of_alone
            .map_or_else(dash, |p| format!("{p:.0}%")),
        s.p50_ms.map_or_else(dash, |x| format!("{:.2}", x.median)),
        s.p99_ms.map_or_else(dash, |x| spread(x, 2)),
        s.p99_x_alone.map_or_else(dash, |x| format!("{x:.2}×")),
        s.p999_ms.map_or_else(dash, |x| format!("{:.2}", x.median)),
        match (s.worst_second_rate, s.worst_second_p99_ms) {
            (Some(a), Some(b)) => format!("{:.0} / {:.2}", a.median, b.median),
            _ => dash(),
        },
        s.set_cached_min_bytes
            .map_or_else(dash, |x| human_bytes(x.median as u64)),
        s.stream_mb_per_s.map_or_else(dash, |x| spread(x, 0)),
        s.reclaimed_pages_per_gb
            .map_or_else(dash, |x| format!("{:.0}", x.median)),
        s.cpu_secs_per_gb.map_or_else(dash, |x| spread(x, 2)),
        s.kswapd_cpu_secs_per_gb
            .map_or_else(dash, |x| format!("{:.2}", x.median)),
    ]
}

/// "412 [398–430]".
fn spread(s: Summary, decimals: usize) -> String {
    format!(
        "{:.d$} [{:.d$}–{:.d$}]",
        s.median,
        s.min,
        s.max,
        d = decimals
    )
}

/// What the tables' figures are.
pub const NOTE: &str = "Medians over the rounds [min–max]. Rate and latency are the service's over the \
     stream's run (from its start to its output durable), or over the time alone; latency per \
     transaction (pgbench's log) or per request (wrk's histogram, corrected for coordinated omission \
     as wrk does). % of alone and × alone compare medians with the same load alone under the same \
     pressure. Worst second: the lowest rate and the highest p99 of a whole second. Set cached, \
     lowest: the least of the service's files (database or web set) in the page cache during the \
     run (cachestat, every second). Stream MB/s: what it read over its time to durability. \
     Reclaimed pages per GB it read: kswapd, direct and the memory cgroups' limit reclaim. \
     Stream CPU: user + system seconds per GB of the stream's command and every process it \
     waited for (`ubio run`'s engine included), plus the policy daemon's under the daemon; \
     kswapd CPU: every kswapd thread's over the stream's time.";

/// The settings and the machine, as (name, value) lines.
pub fn setup(r: &NeighboursReport) -> Vec<(String, String)> {
    let s = &r.settings;
    let e = &r.environment;
    let mut v = vec![
        ("machine".into(), format!("{}, {} CPUs, {} RAM, Linux {}", e.virtualization.summary, e.cpus, human_bytes(e.mem_total_bytes), e.kernel)),
        ("storage".into(), format!("{} on {}", e.filesystem, e.device)),
        (
            "memory left".into(),
            format!(
                "{}: under global pressure what a balloon leaves to the whole machine; in cgroups half of it is the service's limit and half the stream's (memory cgroup {})",
                human_bytes(s.memory_bytes),
                e.cgroup_version
            ),
        ),
        ("streams' data".into(), format!("a tree of {} (tar, restic) and an image file of {} (rsync, cp)", human_bytes(s.data_bytes), human_bytes(s.data_bytes))),
        ("postgres".into(), format!("pgbench scale {}, {} clients", s.pgbench_scale, s.clients)),
        ("nginx".into(), format!("{} of {} files, wrk with {} connections", human_bytes(s.web_set_bytes), human_bytes(s.web_file_bytes), s.clients)),
        ("timing".into(), format!("{:.0} s of load before and after each stream, {:.0} s alone, {} round(s), order seed {}", s.lead_secs, s.alone_secs, s.rounds, s.seed)),
    ];
    for (stream, own) in &s.own_options {
        v.push((format!("own option of {stream}"), own.clone()));
    }
    if let Some(c) = &e.git_commit {
        v.push(("commit".into(), c.clone()));
    }
    for b in &r.setups {
        let mut line = format!("set {}", human_bytes(b.set_bytes));
        if let (Some(a), Some(c)) = (b.service_limit_bytes, b.stream_limit_bytes) {
            line += &format!(
                ", cgroup limits {} (service) and {} (stream)",
                human_bytes(a),
                human_bytes(c)
            );
        }
        if let Some(p) = &b.balloon {
            line += &format!(
                ", balloon {} leaving {}",
                human_bytes(p.balloon_bytes),
                human_bytes(p.leave_bytes)
            );
        }
        v.push((format!("{} under {} pressure", b.service, b.pressure), line));
    }
    v
}

/// What bare metal would see, beside figures against the plain streams.
pub fn bare_metal_note(r: &NeighboursReport) -> String {
    let vm = &r.environment.virtualization.summary;
    match &r.environment.free_page_reporting {
        Some(_) => format!(
            "This machine ({vm}) hands free memory back to its host (free page reporting): a page the \
             page cache takes from free memory costs a host fault, which bare metal never pays. Under \
             global pressure the balloon and a filler file keep free memory small before every run, so \
             every stream takes pages just freed, as on bare metal; in the memory cgroups free memory is \
             large, so there the plain streams (and the loads, when their set is read back) pay host \
             faults that bare metal would not, and the stream speeds against plain ones are more in \
             ubio's favour than bare metal would show. The services' latency beside a stream depends \
             mostly on their set staying cached, which does not depend on that."
        ),
        None => format!("No free page reporting here ({vm}): the figures are as bare metal would show them."),
    }
}

/// The plots of a load beside one stream under a pressure: p99 per
/// second, rate per second, the set in the page cache; one line per mode
/// (its median run) and one for the load alone.
pub fn plots(r: &NeighboursReport, pressure: Pressure, load: Load, stream: Stream) -> Vec<Plot> {
    let mut lines: Vec<(String, Option<&report::CellRun>)> =
        vec![("alone".into(), report::median_run(r, pressure, load, None))];
    for mode in report::modes_of(r, stream) {
        let b = Beside { stream, mode };
        lines.push((
            mode.to_string(),
            report::median_run(r, pressure, load, Some(b)),
        ));
    }
    let series = |f: &dyn Fn(&report::CellRun) -> Vec<(f64, f64)>| -> Vec<Series> {
        lines
            .iter()
            .map(|(label, run)| Series {
                label: label.clone(),
                points: run.map(f).unwrap_or_default(),
            })
            .collect()
    };
    // The axes start at zero: the lead-in is shifted to start there.
    let shift = r.settings.lead_secs;
    let per_second = |pick: fn(&Second) -> Option<f64>| {
        move |run: &report::CellRun| -> Vec<(f64, f64)> {
            run.seconds
                .iter()
                .filter(|s| s.t_secs + shift >= 0.0)
                .filter_map(|s| Some((s.t_secs + shift, pick(s)?)))
                .collect()
        }
    };
    let title = |what: &str| format!("{load} beside {stream}, {pressure} pressure: {what}");
    let x = format!("seconds (the stream starts at {shift:.0})");
    const MIB: f64 = (1u64 << 20) as f64;
    vec![
        Plot {
            title: title("p99 latency per second"),
            x_label: x.clone(),
            y_label: "ms".into(),
            series: series(&per_second(|s| s.p99_ms)),
            limit: None,
        },
        Plot {
            title: title(load.unit()),
            x_label: x.clone(),
            y_label: load.unit().into(),
            series: series(&per_second(|s| Some(s.rate))),
            limit: None,
        },
        Plot {
            title: title("the service's set in the page cache"),
            x_label: x,
            y_label: "MiB".into(),
            series: series(&|run: &report::CellRun| {
                run.machine
                    .iter()
                    .map(|m| (m.t_secs + shift, m.set_cached_bytes as f64 / MIB))
                    .collect()
            }),
            limit: None,
        },
    ]
}

/// The streams of a report, in order.
pub fn streams(r: &NeighboursReport) -> Vec<Stream> {
    let mut v: Vec<Stream> = r
        .runs
        .iter()
        .filter_map(|x| x.cell.beside)
        .map(|b| b.stream)
        .collect();
    v.sort();
    v.dedup();
    v
}
