//! `ubio demo --copy`: copying a file several times larger than the memory
//! cgroup with whole external commands, side by side.
//!
//! The modes are commands that copy the dataset SRC to DST, started inside
//! the demo's cgroup (next to the hot-file reader): `cp` (GNU cp),
//! `nocache-cp` (`nocache cp`), `dd-nocache` (`dd iflag=nocache
//! oflag=nocache`), `ubio-cp` (`ubio cp`) and `ubio-run-cp` (`ubio run --
//! cp`). Each run is timed to durability: the command, then fsync of DST.
//! Before each run SRC is made cold (fdatasync + fadvise(DONTNEED)), DST is
//! removed and the reader reads its hot file through again. Two samplers
//! watch the page cache of SRC and of DST (cachestat() every 10 ms); their
//! final cache is read right after the fsync. Modes are interleaved in each
//! round.

use super::{
    drop_cached, ensure_cachestat, mib, percent, print_report, reader_alone, reader_note,
    reader_rates, start_reader, table, tear_down, write_file, Args, Progress, ReaderOutcome,
    ReaderSummary, SAMPLE_EVERY, STREAMER_PID,
};
use crate::size;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fs;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::Instant;
use ubio::sys;
use ubio_bench::cgroup::MemCgroup;
use ubio_bench::clock::monotonic_secs;
use ubio_bench::residency_sampler::ResidencySampler;
use ubio_bench::stats::Summary;
use ubio_bench::victim::CachedFloor;
use ubio_bench::worker::VictimClient;

/// One way of copying SRC to DST: a whole external command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum CopyMode {
    /// `cp SRC DST` (GNU cp).
    Cp,
    /// `nocache cp SRC DST` (Debian package nocache).
    NocacheCp,
    /// `dd if=SRC of=DST bs=1M iflag=nocache oflag=nocache`.
    DdNocache,
    /// `ubio cp SRC DST`.
    UbioCp,
    /// `ubio run -- cp SRC DST`.
    UbioRunCp,
}

pub(super) const ALL: [CopyMode; 5] = [
    CopyMode::Cp,
    CopyMode::NocacheCp,
    CopyMode::DdNocache,
    CopyMode::UbioCp,
    CopyMode::UbioRunCp,
];

impl CopyMode {
    fn name(self) -> &'static str {
        match self {
            CopyMode::Cp => "cp",
            CopyMode::NocacheCp => "nocache-cp",
            CopyMode::DdNocache => "dd-nocache",
            CopyMode::UbioCp => "ubio-cp",
            CopyMode::UbioRunCp => "ubio-run-cp",
        }
    }

    fn is_ubio(self) -> bool {
        matches!(self, CopyMode::UbioCp | CopyMode::UbioRunCp)
    }

    /// The command line (program first), with `ubio` standing for `exe`.
    fn argv(self, exe: &Path, src: &Path, dst: &Path) -> Vec<String> {
        let (s, d) = (src.display().to_string(), dst.display().to_string());
        let ubio = exe.display().to_string();
        match self {
            CopyMode::Cp => vec!["cp".into(), s, d],
            CopyMode::NocacheCp => vec!["nocache".into(), "cp".into(), s, d],
            CopyMode::DdNocache => vec![
                "dd".into(),
                format!("if={s}"),
                format!("of={d}"),
                "bs=1M".into(),
                "iflag=nocache".into(),
                "oflag=nocache".into(),
                "status=none".into(),
            ],
            CopyMode::UbioCp => vec![ubio, "cp".into(), s, d],
            CopyMode::UbioRunCp => vec![ubio, "run".into(), "--".into(), "cp".into(), s, d],
        }
    }

    /// Why this mode cannot run here (a program it needs is missing).
    fn missing(self) -> Option<String> {
        let need: &[&str] = match self {
            CopyMode::Cp | CopyMode::UbioRunCp | CopyMode::UbioCp => &["cp"],
            CopyMode::NocacheCp => &["nocache", "cp"],
            CopyMode::DdNocache => &["dd"],
        };
        let absent: Vec<&str> = need.iter().copied().filter(|p| !in_path(p)).collect();
        match absent.as_slice() {
            [] => None,
            ["nocache", ..] => Some(
                "`nocache` is not installed (Debian package nocache; scripts/install-deps.sh installs it)"
                    .into(),
            ),
            other => Some(format!("{} not found in PATH", other.join(", "))),
        }
    }
}

impl std::fmt::Display for CopyMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn in_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Parses --modes for --copy: comma-separated copy modes, each at most once.
pub(super) fn parse_modes(list: &str) -> Result<Vec<CopyMode>> {
    let mut modes = Vec::new();
    for item in list.split(',').map(str::trim) {
        let Some(&mode) = ALL.iter().find(|m| m.name() == item) else {
            bail!(
                "--modes {list:?}: unknown copy mode {item:?} (with --copy: {})",
                ALL.map(CopyMode::name).join(", ")
            );
        };
        if modes.contains(&mode) {
            bail!("--modes {list:?}: {mode} is listed twice");
        }
        modes.push(mode);
    }
    Ok(modes)
}

#[derive(Serialize)]
struct Report {
    config: Config,
    solo: Option<ReaderSummary>,
    /// One entry per mode, in --modes order.
    modes: Vec<ModeSummary>,
    /// Every timed copy, in the order they ran.
    runs: Vec<Run>,
    conclusion: Vec<String>,
    warnings: Vec<String>,
    wall_seconds: f64,
}

#[derive(Serialize)]
struct Config {
    experiment: &'static str,
    limit_bytes: u64,
    dataset_bytes: u64,
    hot_bytes: u64,
    rounds: u32,
    modes: Vec<CopyMode>,
    /// The command of each mode, SRC and DST as in the first round.
    commands: Vec<String>,
    victim: bool,
    verify: bool,
    dir: PathBuf,
    filesystem: String,
    kernel: String,
    cgroup: PathBuf,
    cgroup_version: ubio_bench::cgroup::CgroupVersion,
}

#[derive(Serialize)]
struct Run {
    round: u32,
    mode: CopyMode,
    /// The command, then fsync of DST.
    seconds: f64,
    mb_per_s: f64,
    src_peak_cached_bytes: u64,
    /// Right after the fsync of DST.
    src_final_cached_bytes: u64,
    dst_peak_cached_bytes: u64,
    dst_final_cached_bytes: u64,
    dst_peak_dirty_writeback_bytes: u64,
    /// Samples of SRC and of DST (DST only once it exists).
    src_samples: u64,
    dst_samples: u64,
    reader: Option<ReaderSummary>,
    reader_rates: Vec<f64>,
    hot_cached_min_bytes: Option<u64>,
    /// DST compared byte for byte with SRC (with --verify).
    identical: Option<bool>,
}

#[derive(Serialize)]
struct ModeSummary {
    name: String,
    mode: CopyMode,
    seconds: Summary,
    mb_per_s: Summary,
    /// Median MB/s over cp's median, when cp is among the modes.
    speed_vs_cp: Option<f64>,
    src_peak_cached_bytes: Summary,
    src_final_cached_bytes: Summary,
    dst_peak_cached_bytes: Summary,
    dst_final_cached_bytes: Summary,
    dst_peak_dirty_writeback_bytes: Summary,
    #[serde(flatten)]
    hot_reader: ReaderOutcome,
}

impl ModeSummary {
    /// Median peak page cache of source and destination together.
    fn peak_cache(&self) -> f64 {
        self.src_peak_cached_bytes.median + self.dst_peak_cached_bytes.median
    }
    fn final_cache(&self) -> f64 {
        self.src_final_cached_bytes.median + self.dst_final_cached_bytes.median
    }
}

/// `dataset` and `hot` are the sizes `ubio demo` worked out from `args`
/// (`hot` is 0 without the reader).
pub(super) fn demo(args: Args, started: Instant, dataset: u64, hot: u64) -> Result<ExitCode> {
    let victim_on = !args.no_victim;
    let modes = parse_modes(
        args.modes
            .as_deref()
            .unwrap_or(&ALL.map(CopyMode::name).join(",")),
    )?;
    super::validate(&args, &[], dataset, hot)?;
    for &m in &modes {
        if let Some(why) = m.missing() {
            bail!("--modes {m}: {why}");
        }
    }
    let mut warnings = Vec::new();
    if dataset <= args.limit {
        warnings.push(format!(
            "the dataset ({}) fits in the cgroup limit ({}): use a --dataset several times --limit",
            size::human(dataset),
            size::human(args.limit)
        ));
    }
    let (dir, work, probe) = super::set_up(&args, dataset, hot, true)?;
    let progress = Progress::new(started);
    let hot_path = work.file("hot");
    let src = work.file("dataset");
    let dst = work.file("copy");
    let exe = std::env::current_exe().context("find the ubio binary")?;

    // The source: written once, made durable.
    progress.phase(
        &format!("writing the {} source (not timed)", size::human(dataset)),
        0,
        |_| write_file(&src, dataset),
    )?;
    ensure_cachestat(&src)?;
    drop_cached(&src)?;

    let cg = MemCgroup::create("ubio-demo", args.limit).context("make the demo's memory cgroup")?;
    let (cg_path, cg_version) = (cg.path().to_path_buf(), cg.version());
    progress.line(&format!(
        "made memory cgroup {} (limit {}); copying a {} file in {} ({}, Linux {}); modes {}; {} round(s)",
        cg.path().display(),
        mib(cg.limit_bytes()),
        size::human(dataset),
        work.path.display(),
        probe.fs.fs_type,
        probe.kernel,
        modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(", "),
        args.rounds
    ));

    let mut reader = victim_on
        .then(|| start_reader(&cg, &exe, &hot_path, hot, &progress, &mut warnings))
        .transpose()?;

    // Warm-up: one plain cp in the cgroup (not timed) cycles its memory.
    let warm = progress.phase("warm-up: cp of the source (not timed)", dataset, |_| {
        copy_once(&cg, CopyMode::Cp, &exe, &src, &dst)
    })?;
    progress.line(&format!("warm-up done ({:.1} s)", warm));

    let mut solo = None;
    if let Some(reader) = reader.as_mut() {
        settle(&src, &dst, Some(reader), &mut warnings)?;
        solo = Some(reader_alone(reader, args.solo_secs, &progress)?);
    }

    let mut runs = Vec::new();
    for round in 1..=args.rounds {
        for &mode in &modes {
            settle(&src, &dst, reader.as_mut(), &mut warnings)?;
            let src_sampler = ResidencySampler::start(&src, SAMPLE_EVERY)?;
            // The destination may not exist yet: follow its path.
            let dst_sampler = ResidencySampler::follow(&dst, SAMPLE_EVERY);
            let floor = match victim_on {
                true => Some(CachedFloor::start(&hot_path, SAMPLE_EVERY)?),
                false => None,
            };
            let label = format!("round {round}/{}: {mode}", args.rounds);
            let from = monotonic_secs();
            let result =
                progress.phase(&label, dataset, |_| copy_once(&cg, mode, &exe, &src, &dst));
            let to = monotonic_secs();
            let src_final = cached_pages(&src);
            let dst_final = cached_pages(&dst);
            let src_peaks = src_sampler.finish()?;
            let dst_peaks = dst_sampler
                .finish()
                .context("sample the destination's page cache")?;
            let hot_floor = floor.map(CachedFloor::finish).transpose()?;
            let seconds = result?;
            let (src_final, dst_final) = (src_final?, dst_final?);
            let copied = fs::metadata(&dst)
                .with_context(|| format!("{mode}: stat {}", dst.display()))?
                .len();
            if copied != dataset {
                bail!("{mode}: the copy has {copied} bytes, the source {dataset}");
            }
            let identical = if args.verify {
                Some(same_contents(&src, &dst)?)
            } else {
                None
            };
            if identical == Some(false) {
                bail!("{mode}: {} differs from {}", dst.display(), src.display());
            }
            let rates = reader_rates(reader.as_ref(), from, to);
            let page = sys::page_size();
            let run = Run {
                round,
                mode,
                seconds,
                mb_per_s: dataset as f64 / 1e6 / seconds,
                src_peak_cached_bytes: src_peaks.max_cached * page,
                src_final_cached_bytes: src_final * page,
                dst_peak_cached_bytes: dst_peaks.max_cached * page,
                dst_final_cached_bytes: dst_final * page,
                dst_peak_dirty_writeback_bytes: dst_peaks.max_dirty_writeback * page,
                src_samples: src_peaks.samples,
                dst_samples: dst_peaks.samples,
                reader: ReaderSummary::of(&rates),
                reader_rates: rates,
                hot_cached_min_bytes: hot_floor.map(|p| p * page),
                identical,
            };
            progress.line(&run_line(&label, &run));
            runs.push(run);
        }
    }

    tear_down(reader, cg, work, &mut warnings)?;

    let summaries = summarize(&modes, &runs, solo.as_ref());
    let mut conclusion = conclude(&summaries, hot);
    if victim_on && summaries.iter().any(|m| m.hot_reader.reader.is_none()) {
        warnings
            .push("some copies were too short for the reader to report from inside them".into());
    }
    let wall = started.elapsed().as_secs_f64();
    conclusion.push(format!(
        "{} round(s) in {wall:.0} s; the cgroup and the files it made are removed.",
        args.rounds
    ));
    let report = Report {
        config: Config {
            experiment: "copy",
            limit_bytes: args.limit,
            dataset_bytes: dataset,
            hot_bytes: hot,
            rounds: args.rounds,
            commands: modes
                .iter()
                .map(|m| {
                    m.argv(Path::new("ubio"), Path::new("SRC"), Path::new("DST"))
                        .join(" ")
                })
                .collect(),
            modes,
            victim: victim_on,
            verify: args.verify,
            dir,
            filesystem: probe.fs.fs_type.clone(),
            kernel: probe.kernel.clone(),
            cgroup: cg_path,
            cgroup_version: cg_version,
        },
        solo,
        modes: summaries,
        runs,
        conclusion,
        warnings,
        wall_seconds: wall,
    };
    print_report(args.json, &render_table(&report), &report)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `mode`'s command in the cgroup, then fsyncs DST; returns the seconds
/// both took.
fn copy_once(cg: &MemCgroup, mode: CopyMode, exe: &Path, src: &Path, dst: &Path) -> Result<f64> {
    let argv = mode.argv(exe, src, dst);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = cg
        .spawn(&mut cmd)
        .with_context(|| format!("{mode}: start {}", argv.join(" ")))?;
    STREAMER_PID.store(child.id(), Ordering::Relaxed);
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait();
    STREAMER_PID.store(0, Ordering::Relaxed);
    let status = status.with_context(|| format!("{mode}: wait for {}", argv[0]))?;
    if !status.success() {
        bail!(
            "{mode}: `{}` failed ({status}): {}",
            argv.join(" "),
            err.trim()
        );
    }
    fs::File::open(dst)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("{mode}: fsync {}", dst.display()))?;
    Ok(t0.elapsed().as_secs_f64())
}

/// Before each copy: the source cold (fsync + fadvise(DONTNEED)), no
/// destination, the hot file read through again.
fn settle(
    src: &Path,
    dst: &Path,
    reader: Option<&mut VictimClient>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    match fs::remove_file(dst) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("remove {}", dst.display()))
        }
        _ => {}
    }
    super::settle(src, "source", reader, warnings)
}

/// Pages of `path` cached now (0 if it does not exist).
fn cached_pages(path: &Path) -> Result<u64> {
    match fs::File::open(path) {
        Ok(f) => Ok(sys::cachestat(f.as_fd(), 0, 0)
            .with_context(|| format!("cachestat {}", path.display()))?
            .nr_cache),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("open {}", path.display())),
    }
}

/// Compares two files byte for byte (untimed), then drops what that cached.
fn same_contents(a: &Path, b: &Path) -> Result<bool> {
    let open = |p: &Path| fs::File::open(p).with_context(|| format!("open {}", p.display()));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let same = loop {
        let n = read_full(&mut fa, &mut ba).with_context(|| format!("read {}", a.display()))?;
        let m = read_full(&mut fb, &mut bb).with_context(|| format!("read {}", b.display()))?;
        if n != m || ba[..n] != bb[..m] {
            break false;
        }
        if n == 0 {
            break true;
        }
    };
    for f in [&fa, &fb] {
        let _ = sys::fadvise(f.as_fd(), 0, 0, sys::Advice::DontNeed);
    }
    Ok(same)
}

fn read_full(f: &mut fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn summarize(modes: &[CopyMode], runs: &[Run], solo: Option<&ReaderSummary>) -> Vec<ModeSummary> {
    let mut out: Vec<ModeSummary> = Vec::new();
    for &mode in modes {
        let these: Vec<&Run> = runs.iter().filter(|r| r.mode == mode).collect();
        let of = |f: &dyn Fn(&Run) -> f64| -> Option<Summary> {
            Summary::of(&these.iter().map(|r| f(r)).collect::<Vec<f64>>())
        };
        let (Some(seconds), Some(mb_per_s)) = (of(&|r| r.seconds), of(&|r| r.mb_per_s)) else {
            continue;
        };
        let bytes = |f: &dyn Fn(&Run) -> u64| of(&|r| f(r) as f64).expect("runs");
        out.push(ModeSummary {
            name: mode.name().to_owned(),
            mode,
            seconds,
            mb_per_s,
            speed_vs_cp: None,
            src_peak_cached_bytes: bytes(&|r| r.src_peak_cached_bytes),
            src_final_cached_bytes: bytes(&|r| r.src_final_cached_bytes),
            dst_peak_cached_bytes: bytes(&|r| r.dst_peak_cached_bytes),
            dst_final_cached_bytes: bytes(&|r| r.dst_final_cached_bytes),
            dst_peak_dirty_writeback_bytes: bytes(&|r| r.dst_peak_dirty_writeback_bytes),
            hot_reader: ReaderOutcome::of(
                these
                    .iter()
                    .map(|r| (r.hot_cached_min_bytes, r.reader_rates.as_slice())),
                solo,
            ),
        });
    }
    let cp = out
        .iter()
        .find(|m| m.mode == CopyMode::Cp)
        .map(|m| m.mb_per_s.median);
    for m in &mut out {
        m.speed_vs_cp = cp.filter(|&c| c > 0.0).map(|c| m.mb_per_s.median / c);
    }
    out
}

/// Findings computed from the numbers: each ubio mode against the best of
/// the others on cache and on the hot reader, and against plain cp on time.
fn conclude(modes: &[ModeSummary], hot: u64) -> Vec<String> {
    let mut out = Vec::new();
    let others: Vec<&ModeSummary> = modes.iter().filter(|m| !m.mode.is_ubio()).collect();
    let ours: Vec<&ModeSummary> = modes.iter().filter(|m| m.mode.is_ubio()).collect();
    let mibf = |b: f64| format!("{:.0} MiB", b / (1 << 20) as f64);
    let each = |f: &dyn Fn(&ModeSummary) -> String| -> String {
        modes
            .iter()
            .map(|m| format!("{} {}", m.name, f(m)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push(format!(
        "Page cache of source + destination, peak (final), median of rounds: {}.",
        each(&|m| format!("{} ({})", mibf(m.peak_cache()), mibf(m.final_cache())))
    ));
    if hot > 0 {
        out.push(format!(
            "Hot-file reader's worst second, % of its speed alone: {}.",
            each(&|m| m
                .hot_reader
                .reader_worst_pct_of_solo
                .map(percent)
                .unwrap_or_else(|| "-".into()))
        ));
    }
    out.push(format!(
        "Time to durability, median: {}.",
        each(&|m| format!("{:.1} s", m.seconds.median))
    ));
    if ours.is_empty() || others.is_empty() {
        return out;
    }
    let best_cache = others
        .iter()
        .map(|m| m.peak_cache())
        .fold(f64::INFINITY, f64::min);
    let best_final = others
        .iter()
        .map(|m| m.final_cache())
        .fold(f64::INFINITY, f64::min);
    let best_worst = others
        .iter()
        .filter_map(|m| m.hot_reader.reader_worst_pct_of_solo)
        .fold(f64::NEG_INFINITY, f64::max);
    let best_median = others
        .iter()
        .filter_map(|m| m.hot_reader.reader_median_pct_of_solo)
        .fold(f64::NEG_INFINITY, f64::max);
    let cp = modes.iter().find(|m| m.mode == CopyMode::Cp);
    for u in ours {
        let mut verdict = Vec::new();
        let cache_win = u.peak_cache() <= best_cache && u.final_cache() <= best_final;
        verdict.push(if cache_win {
            format!(
                "the least page cache ({} peak, {} final; the best of the others {} and {})",
                mibf(u.peak_cache()),
                mibf(u.final_cache()),
                mibf(best_cache),
                mibf(best_final)
            )
        } else {
            format!(
                "NOT the least page cache ({} peak, {} final; the best of the others {} and {})",
                mibf(u.peak_cache()),
                mibf(u.final_cache()),
                mibf(best_cache),
                mibf(best_final)
            )
        });
        if let (Some(uw), Some(um)) = (
            u.hot_reader.reader_worst_pct_of_solo,
            u.hot_reader.reader_median_pct_of_solo,
        ) {
            if best_worst.is_finite() {
                let win = uw >= best_worst && um >= best_median;
                verdict.push(format!(
                    "{} for the hot reader (median {}, worst second {} of solo; the best of the others {} and {})",
                    if win { "the best" } else { "NOT the best" },
                    percent(um),
                    percent(uw),
                    percent(best_median),
                    percent(best_worst)
                ));
            }
        }
        if let Some(cp) = cp {
            let ratio = u.mb_per_s.median / cp.mb_per_s.median;
            verdict.push(if ratio >= 1.0 {
                format!(
                    "at least as fast as cp ({:.0} vs {:.0} MB/s, {ratio:.2}x)",
                    u.mb_per_s.median, cp.mb_per_s.median
                )
            } else {
                format!(
                    "{:.0}% slower than cp ({:.0} vs {:.0} MB/s)",
                    100.0 * (1.0 - ratio),
                    u.mb_per_s.median,
                    cp.mb_per_s.median
                )
            });
        }
        out.push(format!("{}: {}.", u.name, verdict.join("; ")));
    }
    out
}

fn run_line(label: &str, r: &Run) -> String {
    let reader = r.reader.as_ref().map(reader_note).unwrap_or_default();
    format!(
        "{label}: {:.1} s, {:.0} MB/s; source cache peak {} final {}; copy cache peak {} final {}, dirty+wb {}{reader}",
        r.seconds,
        r.mb_per_s,
        mib(r.src_peak_cached_bytes),
        mib(r.src_final_cached_bytes),
        mib(r.dst_peak_cached_bytes),
        mib(r.dst_final_cached_bytes),
        mib(r.dst_peak_dirty_writeback_bytes)
    )
}

fn render_table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let c = &r.config;
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "ubio demo --copy: a {} file copied inside a {} memory cgroup{} ({} on {}, Linux {}).",
        size::human(c.dataset_bytes),
        mib(c.limit_bytes),
        if c.victim {
            format!(
                ", while another process in it re-reads a {} hot file",
                mib(c.hot_bytes)
            )
        } else {
            String::new()
        },
        c.dir.display(),
        c.filesystem,
        c.kernel
    );
    for (m, cmd) in c.modes.iter().zip(&c.commands) {
        let _ = writeln!(o, "  {:<12} {cmd}", m.name());
    }
    let _ = writeln!(
        o,
        "Each copy timed to durability (command + fsync of DST), source cold, {} round(s) interleaved: \
         median (min-max); caches: median of rounds.",
        c.rounds
    );
    let _ = writeln!(o);
    let row = |o: &mut String, cols: [&str; 12]| {
        let [a, b, cc, d, e, f, g, h, i, j, k, l] = cols;
        table::push_line(
            o,
            format!("{a:<12} {b:>5} {cc:>11} {d:>6}  {e:>8} {f:>8}  {g:>8} {h:>8} {i:>8}"),
            c.victim.then(|| format!("  {j:>6}  {k:>11} {l:>11}")),
        );
    };
    table::push_line(
        &mut o,
        format!(
            "{:<12} {:^17} {:>6}  {:^17}  {:^26}",
            "", "MB/s", "time", "source cache", "copy cache"
        ),
        c.victim
            .then(|| format!("  {:>6}  {:^23}", "hot", "hot-file reader")),
    );
    row(
        &mut o,
        [
            "mode",
            "med",
            "(min-max)",
            "s",
            "peak",
            "final",
            "peak",
            "final",
            "dirty+wb",
            "cached",
            "reads/s",
            "worst sec",
        ],
    );
    for m in &r.modes {
        let [hot, med, worst] = table::reader_columns(&m.hot_reader, c.hot_bytes);
        let [median, range] = table::speed_cells(&m.mb_per_s);
        let mb = |s: &Summary| mib(s.median as u64);
        row(
            &mut o,
            [
                &m.name,
                &median,
                &range,
                &format!("{:.1}", m.seconds.median),
                &mb(&m.src_peak_cached_bytes),
                &mb(&m.src_final_cached_bytes),
                &mb(&m.dst_peak_cached_bytes),
                &mb(&m.dst_final_cached_bytes),
                &mb(&m.dst_peak_dirty_writeback_bytes),
                &hot,
                &med,
                &worst,
            ],
        );
    }
    if let Some(solo) = &r.solo {
        let (med, worst) = table::solo_cells(solo);
        row(
            &mut o,
            [
                "reader alone",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                &med,
                &worst,
            ],
        );
    }
    table::push_findings(&mut o, &r.conclusion, &r.warnings);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_copy_modes() {
        assert_eq!(
            parse_modes("cp,ubio-cp").unwrap(),
            [CopyMode::Cp, CopyMode::UbioCp]
        );
        assert_eq!(
            parse_modes(&ALL.map(CopyMode::name).join(",")).unwrap(),
            ALL
        );
        assert!(parse_modes("cp,cp")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(parse_modes("buffered")
            .unwrap_err()
            .to_string()
            .contains("unknown copy mode"));
    }

    #[test]
    fn commands() {
        let (u, s, d) = (Path::new("/x/ubio"), Path::new("S"), Path::new("D"));
        assert_eq!(
            CopyMode::UbioRunCp.argv(u, s, d).join(" "),
            "/x/ubio run -- cp S D"
        );
        assert_eq!(
            CopyMode::NocacheCp.argv(u, s, d).join(" "),
            "nocache cp S D"
        );
        assert_eq!(
            CopyMode::DdNocache.argv(u, s, d).join(" "),
            "dd if=S of=D bs=1M iflag=nocache oflag=nocache status=none"
        );
    }
}
