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
//!   slice is `slice` bytes ([`Race::new`]) of the stream's eligible calls. Its
//!   measure is the time spent inside the calls per byte: the caller's own
//!   time between calls is the same on both paths, what the device does
//!   meanwhile (readahead, writeback) shows as less waiting inside them.
//!   A write slice through the cache is also charged the wait for its
//!   writeback when the direct slice after it begins ([`Race::charge`]),
//!   or the direct slice would pay for it.
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
    /// Racing: `turn`'s slice has `left` bytes to go, then `slices` more.
    Race { turn: Path, left: u64, slices: u32 },
    /// The winner's run.
    Run { path: Path, left: u64 },
}

/// The race of one stream in one direction.
#[derive(Debug)]
pub struct Race {
    slice: u64,
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
    /// A race in slices of `slice` bytes.
    pub fn new(slice: u64) -> Race {
        Race {
            slice,
            state: Mutex::new(State {
                phase: Phase::Race {
                    turn: Path::Cache,
                    left: slice,
                    slices: SLICES - 1,
                },
                cache: Tally::default(),
                direct: Tally::default(),
                next_run: FIRST_PHASE,
                verdict: None,
            }),
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
            Phase::Race {
                left: 0, slices: 0, ..
            } => st.decide(),
            Phase::Race {
                turn,
                left: 0,
                slices,
            } => Phase::Race {
                turn: turn.other(),
                left: self.slice,
                slices: slices - 1,
            },
            Phase::Run { left: 0, .. } => self.new_race(),
            phase => phase,
        };
        match &mut st.phase {
            Phase::Race { turn, left, .. } => {
                *left = left.saturating_sub(len);
                *turn
            }
            Phase::Run { path, left } => {
                *left = left.saturating_sub(len);
                *path
            }
        }
    }

    fn new_race(&self) -> Phase {
        Phase::Race {
            turn: Path::Cache,
            left: self.slice,
            slices: SLICES - 1,
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
    fn drive(race: &Race, bytes: u64, speed: impl Fn(Path) -> f64) -> (u64, u64) {
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

    #[test]
    fn slices_alternate_cache_first() {
        let race = Race::new(2 * MIB);
        let paths: Vec<Path> = (0..6).map(|_| race.take(MIB)).collect();
        use Path::*;
        // Even: direct runs.
        assert_eq!(paths, [Cache, Cache, Direct, Direct, Direct, Direct]);
    }

    #[test]
    fn the_faster_path_runs_and_its_runs_grow() {
        let race = Race::new(8 * MIB);
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
        let race = Race::new(8 * MIB);
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
        let race = Race::new(4 * MIB);
        // Cache calls look fast (they only copy) until their writeback is
        // charged to them.
        for _ in 0..2 {
            let path = race.take(4 * MIB);
            let (secs, charge) = match path {
                Path::Cache => (0.0005, 0.002),
                Path::Direct => (0.001, 0.0),
            };
            race.record(path, 4 * MIB, Duration::from_secs_f64(secs));
            race.charge(path, Duration::from_secs_f64(charge));
        }
        race.take(MIB);
        assert_eq!(race.verdict().unwrap().path, Path::Direct);
    }

    #[test]
    fn outside_a_race_nothing_is_counted() {
        let race = Race::new(MIB);
        // The race, and the first call of the run.
        drive(&race, 3 * MIB, |_| 1000.0);
        race.charge(Path::Cache, Duration::from_secs(100));
        // The run goes on; the charge changed nothing for the next race.
        drive(&race, FIRST_PHASE - MIB + 2 * MIB + MIB, |p| match p {
            Path::Cache => 1000.0,
            Path::Direct => 900.0,
        });
        assert_eq!(race.verdict().unwrap().path, Path::Cache);
    }
}
