//! Which path a stream's large aligned calls take: the page cache (with the
//! tracker's drop-behind and write-behind) or O_DIRECT, straight between
//! the caller's buffer and the device.
//!
//! Neither is faster everywhere. On ext4 over /dev/shm here (the release
//! matrix, 2026-11-27) one reader was faster through the cache (8129 MB/s
//! against 6318 direct: readahead overlaps the device with the copy), two
//! readers and every writer direct (9856 against 7037; writes 4228-6678
//! against 3067-3401): O_DIRECT copies once where the cache copies twice,
//! and on an NVMe device not at all. A slow device with a small queue
//! turns it around again (writeback coalesces, O_DIRECT waits per call).
//! So each stream races the two on its own calls, in each direction:
//!
//! - A race is two slices, the page cache's first, then O_DIRECT's; each
//!   slice is `slice` bytes ([`Race::new`]) of the stream's eligible calls,
//!   and at least [`SLICE_CALLS`] calls. Its measure is the time spent
//!   inside the calls per byte: the caller's own time between calls is the
//!   same on both paths, what the device does meanwhile (readahead,
//!   writeback) shows as less waiting inside them. That is a sum, not a
//!   median of the calls: a reader's calls through the cache are
//!   either copies of pages readahead brought (25 GB/s here) or waits for
//!   it (2 GB/s), and only their mix says how fast the path is.
//! - A read race's cache slice comes after an untimed warm-up
//!   ([`Race::new`]'s `warm_up`): after O_DIRECT's run (and at a file's
//!   start) readahead begins small, and its first windows (about 8 MiB on
//!   ext4 over /dev/shm here, read_ahead_kb 2560) are slower than its
//!   steady state. A write slice through the cache is charged the wait
//!   for its writeback when the direct slice after it begins
//!   ([`Race::charge`]), or the direct slice would pay for it.
//! - A read race's O_DIRECT slice comes after an untimed settling
//!   ([`Race::with_settle`]): the cache slice's last calls leave readahead
//!   in flight, and the first direct calls queue behind it on the device.
//!   Four readers at once on ext4 over /dev/shm here timed their direct
//!   slice at 1.2-1.8 GB/s each, where reading all direct they ran at
//!   1.7-2.9, and took the cache, 1.5-2.1 GB/s each in all
//!   (bench/runs/2026-12-07-race-runqueue). Taken out once, when a fixed
//!   cost of 10 ms per process hid its gain; with that gone, four readers
//!   went from 0.74-0.78 to 0.90-0.92 of O_DIRECT, at a cost to the
//!   single reader, whose first race now and then goes direct
//!   (bench/runs/2026-12-07-settle-again).
//! - The faster path (direct also when even: it costs less CPU and no page
//!   cache) then runs for a phase of [`FIRST_PHASE`] bytes, twice as long
//!   after each race with the same winner, up to [`LONGEST_PHASE`]; then
//!   the paths race again, since what runs beside the stream changes.

use std::sync::Mutex;
use std::time::Duration;

/// The path of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    /// Through the page cache, which the tracker manages.
    Cache,
    /// O_DIRECT, straight between the caller's buffer and the device.
    Direct,
}

impl Path {
    fn other(self) -> Path {
        match self {
            Path::Cache => Path::Direct,
            Path::Direct => Path::Cache,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Path::Cache => "cache",
            Path::Direct => "direct",
        }
    }
}

/// Slices in one race: the page cache's, then O_DIRECT's. (Four, each
/// path twice, cost a 1 GiB stream 10% of its bytes on the slower path.)
const SLICES: u32 = 2;
/// The fewest calls in a slice, whatever their size.
pub const SLICE_CALLS: u32 = 8;
/// The first phase after a race.
pub const FIRST_PHASE: u64 = 512 << 20;
/// The longest phase between races.
pub const LONGEST_PHASE: u64 = 4 << 30;

/// The outcome of the last race, for the stream's statistics.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub path: Path,
    /// Bytes per second inside the calls of each path during the race.
    pub cache_mb_per_s: f64,
    pub direct_mb_per_s: f64,
    /// Races run so far.
    pub races: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    bytes: u64,
    nanos: u128,
}

impl Tally {
    fn mb_per_s(self) -> f64 {
        if self.nanos == 0 {
            return 0.0;
        }
        self.bytes as f64 / self.nanos as f64 * 1e3
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Before a race: the page cache's path, untimed, `left` bytes more.
    WarmUp { left: u64 },
    /// Between the page cache's slice and O_DIRECT's: O_DIRECT, untimed,
    /// `left` bytes more, then O_DIRECT's slice and `slices` more.
    Settle { left: u64, slices: u32 },
    /// Racing: `turn`'s slice has `left` bytes and `calls` calls to go,
    /// then `slices` more.
    Race {
        turn: Path,
        left: u64,
        calls: u32,
        slices: u32,
    },
    /// The winner's run.
    Run { path: Path, left: u64 },
}

/// The race of one stream in one direction.
#[derive(Debug)]
pub struct Race {
    slice: u64,
    warm_up: u64,
    settle: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    cache: Tally,
    direct: Tally,
    next_run: u64,
    verdict: Option<Verdict>,
}

impl Race {
    /// A race in slices of `slice` bytes (and [`SLICE_CALLS`] calls),
    /// each after `warm_up` bytes through the page cache, untimed.
    pub fn new(slice: u64, warm_up: u64) -> Race {
        Race {
            slice,
            warm_up,
            settle: 0,
            state: Mutex::new(State {
                // An empty run: the first call starts the first race.
                phase: Phase::Run {
                    path: Path::Cache,
                    left: 0,
                },
                cache: Tally::default(),
                direct: Tally::default(),
                next_run: FIRST_PHASE,
                verdict: None,
            }),
        }
    }

    /// Each O_DIRECT slice after `settle` bytes of O_DIRECT, untimed.
    pub fn with_settle(mut self, settle: u64) -> Race {
        self.settle = settle;
        self
    }

    /// The first phase of a race.
    fn start(&self) -> Phase {
        match self.warm_up {
            0 => self.slice_of(Path::Cache, SLICES - 1),
            left => Phase::WarmUp { left },
        }
    }

    fn slice_of(&self, turn: Path, slices: u32) -> Phase {
        Phase::Race {
            turn,
            left: self.slice,
            calls: SLICE_CALLS,
            slices,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The path of a call of `len` bytes, which uses up that much of the
    /// current slice or run.
    pub fn take(&self, len: u64) -> Path {
        let mut st = self.lock();
        // What is used up moves on first, so that a slice's last call is
        // recorded before the race is decided.
        st.phase = match st.phase {
            Phase::WarmUp { left: 0 } => self.slice_of(Path::Cache, SLICES - 1),
            Phase::Race {
                left: 0,
                calls: 0,
                slices: 0,
                ..
            } => st.decide(),
            Phase::Race {
                turn: Path::Cache,
                left: 0,
                calls: 0,
                slices,
            } if self.settle > 0 => Phase::Settle {
                left: self.settle,
                slices: slices - 1,
            },
            Phase::Settle { left: 0, slices } => self.slice_of(Path::Direct, slices),
            Phase::Race {
                turn,
                left: 0,
                calls: 0,
                slices,
            } => self.slice_of(turn.other(), slices - 1),
            Phase::Run { left: 0, .. } => self.start(),
            phase => phase,
        };
        match &mut st.phase {
            Phase::WarmUp { left } => {
                *left = left.saturating_sub(len);
                Path::Cache
            }
            Phase::Settle { left, .. } => {
                *left = left.saturating_sub(len);
                Path::Direct
            }
            Phase::Race {
                turn, left, calls, ..
            } => {
                *left = left.saturating_sub(len);
                *calls = calls.saturating_sub(1);
                *turn
            }
            Phase::Run { path, left } => {
                *left = left.saturating_sub(len);
                *path
            }
        }
    }

    /// A call of `bytes` on `path` took `spent` inside it. Counted while
    /// racing only.
    pub fn record(&self, path: Path, bytes: u64, spent: Duration) {
        let mut st = self.lock();
        if let Phase::Race { .. } = st.phase {
            st.tally(path).bytes += bytes;
            st.tally(path).nanos += spent.as_nanos();
        }
    }

    /// `spent` more belongs to `path` (a cache slice's writeback, waited
    /// for when the direct slice after it starts). Counted while racing.
    pub fn charge(&self, path: Path, spent: Duration) {
        let mut st = self.lock();
        if let Phase::Race { .. } = st.phase {
            st.tally(path).nanos += spent.as_nanos();
        }
    }

    /// The last race's outcome, if one finished.
    pub fn verdict(&self) -> Option<Verdict> {
        self.lock().verdict
    }
}

impl State {
    fn tally(&mut self, path: Path) -> &mut Tally {
        match path {
            Path::Cache => &mut self.cache,
            Path::Direct => &mut self.direct,
        }
    }

    /// The end of a race: the winner's run, as long as the verdict repeats.
    fn decide(&mut self) -> Phase {
        let (cache, direct) = (self.cache.mb_per_s(), self.direct.mb_per_s());
        let path = if direct >= cache {
            Path::Direct
        } else {
            Path::Cache
        };
        let races = self.verdict.map_or(0, |v| v.races) + 1;
        let repeated = self.verdict.is_some_and(|v| v.path == path);
        let run = if repeated { self.next_run } else { FIRST_PHASE };
        self.next_run = (run * 2).min(LONGEST_PHASE);
        log::debug!(
            "race {races}: {} for {} MiB (cache {cache:.0} MB/s, direct {direct:.0} MB/s inside the calls)",
            path.name(),
            run >> 20
        );
        self.verdict = Some(Verdict {
            path,
            cache_mb_per_s: cache,
            direct_mb_per_s: direct,
            races,
        });
        self.cache = Tally::default();
        self.direct = Tally::default();
        Phase::Run { path, left: run }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Runs `bytes` of 1 MiB calls through `race`, each taking the time
    /// `speed` gives its path (MB/s), and returns the bytes per path.
    fn drive(race: &Race, bytes: u64, mut speed: impl FnMut(Path) -> f64) -> (u64, u64) {
        let (mut cache, mut direct) = (0, 0);
        for _ in 0..bytes / MIB {
            let path = race.take(MIB);
            let secs = MIB as f64 / (speed(path) * 1e6);
            race.record(path, MIB, Duration::from_secs_f64(secs));
            match path {
                Path::Cache => cache += MIB,
                Path::Direct => direct += MIB,
            }
        }
        (cache, direct)
    }

    /// Speeds (MB/s) for [`drive`] where the first 4 calls on `path`
    /// after one on the other path run at 500, the rest at `steady`; the
    /// other path runs at `other`.
    fn slow_start(path: Path, steady: f64, other: f64) -> impl FnMut(Path) -> f64 {
        let mut since_other = 0;
        move |p| {
            if p != path {
                since_other = 0;
                return other;
            }
            since_other += 1;
            if since_other <= 4 {
                500.0
            } else {
                steady
            }
        }
    }

    #[test]
    fn slices_alternate_cache_first_and_hold_enough_calls_for_a_median() {
        // Slices of 2 MiB, but of 1 MiB calls: each takes SLICE_CALLS.
        let race = Race::new(2 * MIB, 0);
        let paths: Vec<Path> = (0..20).map(|_| race.take(MIB)).collect();
        let calls = SLICE_CALLS as usize;
        assert!(
            paths[..calls].iter().all(|&p| p == Path::Cache),
            "{paths:?}"
        );
        // Even: direct runs.
        assert!(
            paths[calls..].iter().all(|&p| p == Path::Direct),
            "{paths:?}"
        );
    }

    #[test]
    fn a_warm_up_goes_through_the_cache_untimed_before_each_race() {
        // Readahead's first windows are slow (500 MB/s), its steady state
        // fast (8000 MB/s): the warm-up takes the slow ones.
        let race = Race::new(8 * MIB, 4 * MIB);
        let mut speed = slow_start(Path::Cache, 8000.0, 6000.0);
        let (cache, direct) = drive(&race, 4 * MIB + 16 * MIB + FIRST_PHASE, &mut speed);
        assert_eq!((cache, direct), (4 * MIB + 8 * MIB + FIRST_PHASE, 8 * MIB));
        let v = race.verdict().unwrap();
        assert!((v.cache_mb_per_s - 8000.0).abs() < 1.0, "{v:?}");
        // The next race warms up again.
        let (cache, _) = drive(&race, 4 * MIB + 16 * MIB, &mut speed);
        assert_eq!(cache, 12 * MIB);
        race.take(MIB);
        let v = race.verdict().unwrap();
        assert_eq!(v.races, 2);
        assert!((v.cache_mb_per_s - 8000.0).abs() < 1.0, "{v:?}");
    }

    #[test]
    fn a_settling_goes_direct_untimed_before_each_direct_slice() {
        // The first 4 MiB direct after the cache wait behind its readahead
        // (500 MB/s), then direct runs at 9000: the settling takes them.
        let race = Race::new(8 * MIB, 0).with_settle(4 * MIB);
        let speed = || slow_start(Path::Direct, 9000.0, 7000.0);
        let (cache, direct) = drive(&race, 8 * MIB + 4 * MIB + 8 * MIB + MIB, speed());
        assert_eq!((cache, direct), (8 * MIB, 13 * MIB));
        let v = race.verdict().unwrap();
        assert_eq!(v.path, Path::Direct, "{v:?}");
        assert!((v.direct_mb_per_s - 9000.0).abs() < 1.0, "{v:?}");
        // Without the settling the slow calls decide for the cache.
        let race = Race::new(8 * MIB, 0);
        drive(&race, 16 * MIB + MIB, speed());
        assert_eq!(race.verdict().unwrap().path, Path::Cache);
    }

    #[test]
    fn the_faster_path_runs_and_its_runs_grow() {
        let race = Race::new(8 * MIB, 0);
        let speed = |p| if p == Path::Direct { 9000.0 } else { 7000.0 };
        // The race, then the first run: all direct.
        let (_, direct) = drive(&race, 16 * MIB + FIRST_PHASE, speed);
        assert_eq!(direct, 8 * MIB + FIRST_PHASE);
        let v = race.verdict().unwrap();
        assert_eq!((v.path, v.races), (Path::Direct, 1));
        assert!((v.direct_mb_per_s - 9000.0).abs() < 1.0, "{v:?}");
        // A second race with the same winner: a run twice as long.
        let (cache, _) = drive(&race, 16 * MIB + 2 * FIRST_PHASE, speed);
        assert_eq!(cache, 8 * MIB);
        assert_eq!(race.verdict().unwrap().races, 2);
    }

    #[test]
    fn the_cache_wins_where_it_is_faster_and_a_change_is_followed() {
        let race = Race::new(8 * MIB, 0);
        let (cache, direct) = drive(&race, 16 * MIB + FIRST_PHASE, |p| match p {
            Path::Cache => 8000.0,
            Path::Direct => 6000.0,
        });
        assert_eq!((cache, direct), (8 * MIB + FIRST_PHASE, 8 * MIB));
        assert_eq!(race.verdict().unwrap().path, Path::Cache);
        // The device changes (another stream starts): the next race follows,
        // and its run starts short again.
        let (_, direct) = drive(&race, 16 * MIB + FIRST_PHASE, |p| match p {
            Path::Cache => 4000.0,
            Path::Direct => 6000.0,
        });
        assert_eq!(direct, 8 * MIB + FIRST_PHASE);
        assert_eq!(race.verdict().unwrap().path, Path::Direct);
    }

    #[test]
    fn a_charge_counts_against_its_path_while_racing() {
        let race = Race::new(4 * MIB, 0);
        // Cache calls look fast (they only copy) until their writeback is
        // charged to them: 2 ms more per 4 MiB, spread over the slice.
        let calls = SLICE_CALLS as u64;
        for _ in 0..calls {
            assert_eq!(race.take(4 * MIB), Path::Cache);
            race.record(Path::Cache, 4 * MIB, Duration::from_micros(500));
        }
        race.charge(Path::Cache, Duration::from_millis(2 * calls));
        for _ in 0..calls {
            assert_eq!(race.take(4 * MIB), Path::Direct);
            race.record(Path::Direct, 4 * MIB, Duration::from_millis(1));
        }
        race.take(MIB);
        let v = race.verdict().unwrap();
        assert_eq!(v.path, Path::Direct, "{v:?}");
        // 4 MiB in 2.5 ms.
        assert!((v.cache_mb_per_s - 1677.7).abs() < 1.0, "{v:?}");
    }

    #[test]
    fn outside_a_race_nothing_is_counted() {
        let race = Race::new(MIB, 0);
        let race_bytes = 2 * SLICE_CALLS as u64 * MIB;
        // The race, and the first call of the run.
        drive(&race, race_bytes + MIB, |_| 1000.0);
        race.charge(Path::Cache, Duration::from_secs(100));
        // The run goes on; the charge changed nothing for the next race.
        drive(&race, FIRST_PHASE - MIB + race_bytes + MIB, |p| match p {
            Path::Cache => 1000.0,
            Path::Direct => 900.0,
        });
        assert_eq!(race.verdict().unwrap().path, Path::Cache);
    }
}
