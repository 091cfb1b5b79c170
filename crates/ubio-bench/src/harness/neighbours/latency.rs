//! The services' latencies, from what their load generators write: pgbench's
//! per-transaction log (`pgbench -l`) and the histogram wrk's `done()`
//! prints through our Lua script (see [`WRK_SCRIPT`]). Both become
//! microsecond histograms ([`hdrhistogram`], 3 significant digits), read at
//! p50, p99 and p99.9 over a window (the stream's run), and per second.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// One transaction of pgbench's log: when it ended and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tx {
    /// Unix time of its end, in microseconds.
    pub end_us: u64,
    pub latency_us: u64,
}

/// What a pgbench log holds: the transactions, and the lines that were no
/// transaction (a failed or skipped one, or the torn last line of a
/// pgbench that was stopped).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PgbenchLog {
    pub txs: Vec<Tx>,
    pub failed: u64,
}

/// Parses pgbench's per-transaction log (`pgbench -l`, without
/// --aggregate-interval): `client_id transaction_no time script_no
/// time_epoch time_us [schedule_lag]`, where `time` is the latency in
/// microseconds (or `failed`/`skipped`) and the last two fields are when
/// the transaction ended.
pub fn parse_pgbench_log(text: &str) -> PgbenchLog {
    let mut log = PgbenchLog::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
        match (num(2), num(4), num(5)) {
            (Some(latency_us), Some(epoch), Some(us)) if us < 1_000_000 => log.txs.push(Tx {
                end_us: epoch * 1_000_000 + us,
                latency_us,
            }),
            _ => log.failed += 1,
        }
    }
    log
}

/// The Lua script wrk runs: a random path of the list in `paths` (one per
/// line) per request, and at the end the totals and the latency histogram
/// (`latency(i)`: the i-th distinct value in microseconds and its count;
/// wrk corrects it for coordinated omission), one line each. wrk takes
/// its arguments after `--`.
pub const WRK_SCRIPT: &str = r#"-- ubio-bench neighbours: random files of a set, and the histogram at the end.
local paths = {}
init = function(args)
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
  math.randomseed(tonumber(args[2]) or os.time())
end
request = function()
  return wrk.format("GET", paths[math.random(#paths)])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("ubio-summary %d %d %d %d\n", summary.duration, summary.requests,
    summary.bytes, e.connect + e.read + e.write + e.status + e.timeout))
  for i = 1, #latency do
    local v, n = latency(i)
    io.write(string.format("ubio-latency %d %d\n", v, n))
  end
end
"#;

/// One wrk run (a slice of a second, see the load): its totals and its
/// latency histogram.
#[derive(Debug, Clone)]
pub struct WrkSlice {
    /// Unix times (µs) of the slice's start and end, as we saw them.
    pub start_us: u64,
    pub end_us: u64,
    /// wrk's own duration of the measurement (µs).
    pub duration_us: u64,
    pub requests: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

/// Parses what [`WRK_SCRIPT`]'s `done()` printed (wrk's own report
/// around it is ignored).
pub fn parse_wrk(output: &str, start_us: u64, end_us: u64) -> Result<WrkSlice, String> {
    let mut summary = None;
    let mut latency = histogram();
    for line in output.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let nums: Option<Vec<u64>> = f.iter().skip(1).map(|s| s.parse().ok()).collect();
        match (f.first().copied(), nums.as_deref()) {
            (Some("ubio-summary"), Some(&[duration, requests, _bytes, errors])) => {
                summary = Some((duration, requests, errors))
            }
            (Some("ubio-latency"), Some(&[value, count])) => latency
                .record_n(value.max(1), count)
                .map_err(|e| format!("wrk's histogram: {e}"))?,
            (Some(w), _) if w.starts_with("ubio-") => {
                return Err(format!("a line of wrk's script not understood: {line:?}"))
            }
            _ => {}
        }
    }
    let (duration_us, requests, errors) = summary.ok_or_else(|| {
        format!(
            "wrk printed no summary (did the script run?): {:?}",
            output.lines().take(5).collect::<Vec<_>>()
        )
    })?;
    Ok(WrkSlice {
        start_us,
        end_us,
        duration_us,
        requests,
        errors,
        latency,
    })
}

/// An empty microsecond histogram that grows as needed.
pub fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits are valid")
}

/// Records `us` (at least 1: the histogram's lowest value); it grows to
/// any value.
fn record(h: &mut Histogram<u64>, us: u64) {
    h.record(us.max(1))
        .expect("an auto-resizing histogram takes any value");
}

/// A latency distribution's figures, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigures {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl LatencyFigures {
    /// None for an empty histogram.
    pub fn of(h: &Histogram<u64>) -> Option<LatencyFigures> {
        if h.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(LatencyFigures {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        })
    }
}

/// One second of a service's load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Its start, in seconds from the stream's start (negative before).
    pub t_secs: f64,
    /// Transactions or requests per second.
    pub rate: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// A load's results over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowFigures {
    pub latency: Option<LatencyFigures>,
    /// Transactions or requests per second over the window.
    pub rate: f64,
    /// Failed transactions or requests in the window.
    pub errors: u64,
    /// The lowest rate of a whole second inside the window.
    pub worst_second_rate: Option<f64>,
    /// The highest p99 of a whole second inside the window.
    pub worst_second_p99_ms: Option<f64>,
}

/// The per-second series of pgbench's transactions from `origin_us`
/// (whole seconds, from the first transaction's second to the last's).
pub fn pgbench_seconds(txs: &[Tx], origin_us: u64) -> Vec<Second> {
    let Some(first) = txs.iter().map(|t| t.end_us).min() else {
        return Vec::new();
    };
    let last = txs.iter().map(|t| t.end_us).max().unwrap_or(first);
    let index = |us: u64| (us as i128 - origin_us as i128).div_euclid(1_000_000) as i64;
    let (lo, hi) = (index(first), index(last));
    let mut hists: Vec<Histogram<u64>> = (lo..=hi).map(|_| histogram()).collect();
    for t in txs {
        let i = (index(t.end_us) - lo) as usize;
        record(&mut hists[i], t.latency_us);
    }
    hists
        .iter()
        .zip(lo..)
        .map(|(h, s)| second(s as f64, h.len() as f64, h))
        .collect()
}

/// The per-second series of wrk's slices (each about a second, placed at
/// its start).
pub fn wrk_seconds(slices: &[WrkSlice], origin_us: u64) -> Vec<Second> {
    slices
        .iter()
        .map(|s| {
            let t = (s.start_us as f64 - origin_us as f64) / 1e6;
            second(t, wrk_rate(s), &s.latency)
        })
        .collect()
}

fn wrk_rate(s: &WrkSlice) -> f64 {
    if s.duration_us == 0 {
        0.0
    } else {
        s.requests as f64 * 1e6 / s.duration_us as f64
    }
}

fn second(t_secs: f64, rate: f64, h: &Histogram<u64>) -> Second {
    let q = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0);
    Second {
        t_secs,
        rate,
        p50_ms: q(0.5),
        p99_ms: q(0.99),
    }
}

/// pgbench's figures over [from_us, to_us) (transactions that ended in it).
pub fn pgbench_window(log: &PgbenchLog, from_us: u64, to_us: u64) -> WindowFigures {
    let inside: Vec<Tx> = log
        .txs
        .iter()
        .copied()
        .filter(|t| t.end_us >= from_us && t.end_us < to_us)
        .collect();
    let mut h = histogram();
    for t in &inside {
        record(&mut h, t.latency_us);
    }
    let secs = (to_us.saturating_sub(from_us)) as f64 / 1e6;
    let seconds = pgbench_seconds(&inside, from_us);
    let whole = whole_seconds(&seconds, secs);
    WindowFigures {
        latency: LatencyFigures::of(&h),
        rate: if secs > 0.0 {
            inside.len() as f64 / secs
        } else {
            0.0
        },
        // The log does not say when a failed transaction ended: counted
        // over the whole log.
        errors: log.failed,
        worst_second_rate: worst_rate(&whole),
        worst_second_p99_ms: worst_p99(&whole),
    }
}

/// wrk's figures over the slices that started in [from_us, to_us); a
/// window shorter than a slice that none started in (a stream done in a
/// tenth of a second), over the slices that overlap it.
pub fn wrk_window(slices: &[WrkSlice], from_us: u64, to_us: u64) -> WindowFigures {
    let mut inside: Vec<&WrkSlice> = slices
        .iter()
        .filter(|s| s.start_us >= from_us && s.start_us < to_us)
        .collect();
    if inside.is_empty() {
        inside = slices
            .iter()
            .filter(|s| s.start_us < to_us && s.end_us > from_us)
            .collect();
    }
    let mut h = histogram();
    for s in &inside {
        // Same bounds (auto-resizing): adding cannot fail.
        let _ = h.add(&s.latency);
    }
    let (requests, micros) = inside
        .iter()
        .fold((0, 0), |(r, d), s| (r + s.requests, d + s.duration_us));
    let seconds: Vec<Second> = inside
        .iter()
        .map(|s| second(0.0, wrk_rate(s), &s.latency))
        .collect();
    WindowFigures {
        latency: LatencyFigures::of(&h),
        rate: if micros > 0 {
            requests as f64 * 1e6 / micros as f64
        } else {
            0.0
        },
        errors: inside.iter().map(|s| s.errors).sum(),
        worst_second_rate: worst_rate(&seconds),
        worst_second_p99_ms: worst_p99(&seconds),
    }
}

/// The seconds wholly inside a window of `secs` from t = 0 (a window
/// shorter than a second keeps its only second).
fn whole_seconds(seconds: &[Second], secs: f64) -> Vec<Second> {
    let whole: Vec<Second> = seconds
        .iter()
        .copied()
        .filter(|s| s.t_secs >= 0.0 && s.t_secs + 1.0 <= secs + 1e-9)
        .collect();
    if whole.is_empty() {
        seconds.to_vec()
    } else {
        whole
    }
}

fn worst_rate(seconds: &[Second]) -> Option<f64> {
    seconds.iter().map(|s| s.rate).reduce(f64::min)
}

fn worst_p99(seconds: &[Second]) -> Option<f64> {
    seconds.iter().filter_map(|s| s.p99_ms).reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_765_000_000;

    #[test]
    fn pgbench_lines_become_transactions() {
        let text = "0 1 1200 0 1765000000 250000\n\
                    1 1 830 0 1765000000 999999 17\n\
                    0 2 failed 0 1765000001 5\n\
                    1 2 skipped 0 1765000001 6\n\
                    0 3 15";
        let log = parse_pgbench_log(text);
        assert_eq!(
            log.txs,
            [
                Tx {
                    end_us: T0 * 1_000_000 + 250_000,
                    latency_us: 1200
                },
                Tx {
                    end_us: T0 * 1_000_000 + 999_999,
                    latency_us: 830
                }
            ]
        );
        assert_eq!(log.failed, 3, "failed, skipped and the torn line");
    }

    fn txs(per_second: &[(u64, u64)]) -> PgbenchLog {
        // per second: (transactions, latency µs of each)
        let mut log = PgbenchLog::default();
        for (s, &(n, lat)) in per_second.iter().enumerate() {
            for i in 0..n {
                log.txs.push(Tx {
                    end_us: (T0 + s as u64) * 1_000_000 + i * (1_000_000 / n),
                    latency_us: lat,
                });
            }
        }
        log
    }

    #[test]
    fn pgbench_percentiles_rate_and_the_worst_second() {
        // 4 seconds: 1000 tx of 1 ms, 1000 of 1 ms, 100 of 50 ms, 1000 of 1 ms.
        let log = txs(&[(1000, 1000), (1000, 1000), (100, 50_000), (1000, 1000)]);
        let from = T0 * 1_000_000;
        let w = pgbench_window(&log, from, from + 4_000_000);
        let l = w.latency.unwrap();
        assert_eq!(l.count, 3100);
        assert!((l.p50_ms - 1.0).abs() < 0.01, "{l:?}");
        // 100 of 3100 are slow: p99 falls among them.
        assert!((l.p99_ms - 50.0).abs() < 0.1, "{l:?}");
        assert!((w.rate - 775.0).abs() < 1e-9);
        assert_eq!(w.worst_second_rate, Some(100.0));
        assert!((w.worst_second_p99_ms.unwrap() - 50.0).abs() < 0.1);
        // A window of the first two seconds only.
        let w = pgbench_window(&log, from, from + 2_000_000);
        assert_eq!(w.latency.unwrap().count, 2000);
        assert!((w.latency.unwrap().p999_ms - 1.0).abs() < 0.01);
        assert_eq!(w.worst_second_rate, Some(1000.0));
    }

    #[test]
    fn pgbench_seconds_count_from_the_origin() {
        let log = txs(&[(10, 500), (0, 0), (20, 700)]);
        let origin = (T0 + 1) * 1_000_000;
        let s = pgbench_seconds(&log.txs, origin);
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].t_secs, s[0].rate), (-1.0, 10.0));
        assert_eq!((s[1].rate, s[1].p99_ms), (0.0, None));
        assert_eq!((s[2].t_secs, s[2].rate), (1.0, 20.0));
        assert!((s[2].p50_ms.unwrap() - 0.7).abs() < 0.01);
        assert!(pgbench_seconds(&[], 0).is_empty());
    }

    /// What wrk 4.1 prints with the script: its report, then ours.
    fn wrk_output(requests: u64, lat: &[(u64, u64)]) -> String {
        let mut s = String::from(
            "Running 1s test @ http://127.0.0.1:8080/\n  1 threads and 4 connections\n\
             Requests/sec:  18440.00\n",
        );
        s += &format!("ubio-summary 1000000 {requests} 123456 2\n");
        for (v, n) in lat {
            s += &format!("ubio-latency {v} {n}\n");
        }
        s
    }

    #[test]
    fn wrk_histograms_merge_over_slices() {
        let a = parse_wrk(&wrk_output(1000, &[(200, 980), (5000, 20)]), 0, 1_000_000).unwrap();
        assert_eq!((a.requests, a.errors, a.duration_us), (1000, 2, 1_000_000));
        assert_eq!(a.latency.len(), 1000);
        let b = parse_wrk(&wrk_output(500, &[(300, 500)]), 1_010_000, 2_010_000).unwrap();
        let w = wrk_window(&[a.clone(), b.clone()], 0, 3_000_000);
        let l = w.latency.unwrap();
        assert_eq!(l.count, 1500);
        assert!((l.p50_ms - 0.2).abs() < 0.001, "{l:?}");
        // 20 of 1500 took 5 ms: p99 is among them, p50 among the fast.
        assert!((l.p99_ms - 5.0).abs() < 0.01, "{l:?}");
        assert!((l.max_ms - 5.0).abs() < 0.01, "{l:?}");
        assert_eq!(w.rate, 750.0);
        assert_eq!(w.errors, 4);
        assert_eq!(w.worst_second_rate, Some(500.0));
        assert!((w.worst_second_p99_ms.unwrap() - 5.0).abs() < 0.01);
        // Only the slices that started inside count.
        assert_eq!(
            wrk_window(&[a.clone(), b.clone()], 1_000_000, 3_000_000).rate,
            500.0
        );
        // A window shorter than a slice that none started in (a stream done
        // in 0.1 s, inside `a`): the slice it fell in.
        assert_eq!(
            wrk_window(&[a.clone(), b.clone()], 400_000, 500_000).rate,
            1000.0
        );
        // Between the slices: nothing.
        assert_eq!(
            wrk_window(&[a.clone(), b], 1_000_500, 1_005_000).latency,
            None
        );
        let s = wrk_seconds(&[a], 500_000);
        assert_eq!((s[0].t_secs, s[0].rate), (-0.5, 1000.0));
    }

    #[test]
    fn wrk_without_the_scripts_lines_is_an_error() {
        let e = parse_wrk("Running 1s test\nRequests/sec: 1\n", 0, 1).unwrap_err();
        assert!(e.contains("no summary"), "{e}");
        let e = parse_wrk("ubio-latency x 1\n", 0, 1).unwrap_err();
        assert!(e.contains("not understood"), "{e}");
        assert!(WRK_SCRIPT.contains("latency(i)") && WRK_SCRIPT.contains("ubio-summary"));
    }

    #[test]
    fn an_empty_window_has_no_latency() {
        let w = pgbench_window(&PgbenchLog::default(), 0, 1_000_000);
        assert_eq!((w.latency, w.rate, w.worst_second_rate), (None, 0.0, None));
        assert_eq!(wrk_window(&[], 0, 1).latency, None);
    }
}
