//! The victim: a process that keeps re-reading a hot file that fits in memory,
//! as a database or a web server does, and counts how many reads it gets done.
//!
//! It first reads the whole file once (so it is cached, and charged to the
//! victim's memory cgroup), then does random 4 KiB `pread`s over it and
//! reports the count every `tick`. While the file stays cached it runs at
//! memory speed; when a stream next to it pushes the file out of the page
//! cache, its reads wait for the disk and the count drops. Reads per second,
//! median and worst second, against the victim running alone, is the
//! measure of the harm a stream does to its neighbours.
//!
//! [`per_second_rates`] turns the ticks that fall inside a phase into
//! per-second rates.

use crate::clock::monotonic_secs;
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

/// The victim's read size.
pub const READ_SIZE: u64 = 4096;
/// How often the victim reports by default. Short ticks let a phase of a
/// few seconds be cut into many one-second windows.
pub const DEFAULT_TICK: Duration = Duration::from_millis(100);

/// `reads` random reads completed in `[t0, t1)` (monotonic seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    pub t0: f64,
    pub t1: f64,
    pub reads: u64,
}

/// The hot file has been read through once and is (as far as the victim's
/// cgroup allows) cached.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    pub bytes: u64,
    pub seconds: f64,
}

/// What the parent can ask of a running victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Read the whole file once more (bring back what was evicted), then
    /// report [`Ready`] and go on.
    Warm,
    /// Return.
    Stop,
}

/// Runs the victim over `path` until [`Command::Stop`] arrives or the
/// command channel closes. Calls `on_ready` after the first read-through and
/// after every [`Command::Warm`], and `on_tick` every `tick`. An error from a
/// callback (say, a closed stdout) ends the run with that error.
pub fn run(
    path: &Path,
    tick: Duration,
    commands: &Receiver<Command>,
    mut on_ready: impl FnMut(Ready) -> io::Result<()>,
    mut on_tick: impl FnMut(Tick) -> io::Result<()>,
) -> io::Result<()> {
    let ctx = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
    };
    let file = File::open(path).map_err(|e| ctx("open", e))?;
    let pages = file.metadata().map_err(|e| ctx("stat", e))?.len() / READ_SIZE;
    if pages == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "hot file {} is smaller than one {READ_SIZE}-byte read",
                path.display()
            ),
        ));
    }
    on_ready(read_through(&file).map_err(|e| ctx("read", e))?)?;
    let tick = tick.as_secs_f64();
    let mut rng = SplitMix64(std::process::id() as u64 ^ monotonic_secs().to_bits());
    let mut buf = [0u8; READ_SIZE as usize];
    let mut t0 = monotonic_secs();
    let mut reads = 0u64;
    loop {
        for _ in 0..16 {
            let off = rng.below(pages) * READ_SIZE;
            file.read_exact_at(&mut buf, off)
                .map_err(|e| ctx("read", e))?;
        }
        reads += 16;
        let now = monotonic_secs();
        if now - t0 < tick {
            continue;
        }
        on_tick(Tick { t0, t1: now, reads })?;
        reads = 0;
        match commands.try_recv() {
            Ok(Command::Warm) => on_ready(read_through(&file).map_err(|e| ctx("read", e))?)?,
            Ok(Command::Stop) | Err(TryRecvError::Disconnected) => return Ok(()),
            Err(TryRecvError::Empty) => {}
        }
        t0 = monotonic_secs();
    }
}

/// Sequential 1 MiB reads over the whole file.
fn read_through(file: &File) -> io::Result<Ready> {
    let start = monotonic_secs();
    let mut buf = ubio::AlignedBuf::page_aligned(1 << 20);
    let mut off = 0u64;
    loop {
        match file.read_at(&mut buf, off) {
            Ok(0) => break,
            Ok(n) => off += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Ready {
        bytes: off,
        seconds: monotonic_secs() - start,
    })
}

/// Reads per second over the ticks of the phase `[from, to]`: those whose
/// midpoint lies inside it (so a tick belongs to one phase at most, and a
/// phase shorter than a tick still gets the tick it mostly covers).
///
/// Every run of consecutive ticks that adds up to at least one second gives
/// one rate (sliding, so windows overlap): the minimum is the worst second at
/// any alignment, the median a typical second. If the ticks inside add up to
/// less than a second, the one rate over all of them is returned; no ticks
/// inside gives an empty vector.
pub fn per_second_rates(ticks: &[Tick], from: f64, to: f64) -> Vec<f64> {
    let inside: Vec<&Tick> = ticks
        .iter()
        .filter(|t| t.t1 > t.t0 && (from..=to).contains(&((t.t0 + t.t1) / 2.0)))
        .collect();
    let mut rates = Vec::new();
    let (mut j, mut reads, mut secs) = (0usize, 0u64, 0f64);
    for i in 0..inside.len() {
        while j < inside.len() && secs < 1.0 {
            reads += inside[j].reads;
            secs += inside[j].t1 - inside[j].t0;
            j += 1;
        }
        if secs < 1.0 {
            break;
        }
        rates.push(reads as f64 / secs);
        reads -= inside[i].reads;
        secs -= inside[i].t1 - inside[i].t0;
    }
    if rates.is_empty() && !inside.is_empty() {
        let reads: u64 = inside.iter().map(|t| t.reads).sum();
        let secs: f64 = inside.iter().map(|t| t.t1 - t.t0).sum();
        rates.push(reads as f64 / secs);
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn ticks(counts: &[u64]) -> Vec<Tick> {
        counts
            .iter()
            .enumerate()
            .map(|(i, &reads)| Tick {
                t0: 10.0 + i as f64 * 0.25,
                t1: 10.25 + i as f64 * 0.25,
                reads,
            })
            .collect()
    }

    #[test]
    fn sliding_windows_find_the_worst_second() {
        // Quarter-second ticks: 100 reads each (400/s), with one slow second.
        let t = ticks(&[100, 100, 100, 100, 10, 10, 10, 10, 100, 100, 100, 100]);
        let r = per_second_rates(&t, 0.0, 100.0);
        assert_eq!(r.len(), 9);
        assert!((r[0] - 400.0).abs() < 1e-6, "{r:?}");
        assert!((r[4] - 40.0).abs() < 1e-6, "{r:?}");
        assert!((crate::stats::min(&r).unwrap() - 40.0).abs() < 1e-6);
    }

    #[test]
    fn only_ticks_inside_the_phase_count() {
        let t = ticks(&[1000, 4, 4, 4, 4, 1000]);
        let r = per_second_rates(&t, 10.25, 11.25);
        assert_eq!(r, vec![16.0]);
        // Ticks half in count where their middle is.
        assert_eq!(per_second_rates(&t, 10.2, 11.3), vec![16.0]);
        assert_eq!(per_second_rates(&t, 10.4, 11.1), vec![12.0 / 0.75]);
        assert!(per_second_rates(&t, 20.0, 30.0).is_empty());
    }

    #[test]
    fn short_phase_gives_one_rate() {
        let t = ticks(&[1000, 50, 50, 1000]);
        assert_eq!(per_second_rates(&t, 10.25, 10.75), vec![200.0]);
        assert_eq!(
            per_second_rates(&t, 10.3, 10.45),
            vec![200.0],
            "shorter than a tick"
        );
    }

    #[test]
    fn rng_stays_below() {
        let mut r = SplitMix64(7);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[r.below(10) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn runs_warms_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hot");
        std::fs::write(&path, vec![7u8; 64 * 1024]).unwrap();
        let (tx, rx) = mpsc::channel();
        let (mut readies, mut ticks) = (0, 0);
        run(
            &path,
            Duration::from_millis(10),
            &rx,
            |r| {
                assert_eq!(r.bytes, 64 * 1024);
                readies += 1;
                Ok(())
            },
            |t| {
                assert!(t.reads > 0 && t.t1 > t.t0);
                ticks += 1;
                match ticks {
                    2 => tx.send(Command::Warm).unwrap(),
                    4 => tx.send(Command::Stop).unwrap(),
                    _ => {}
                }
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((readies, ticks), (2, 4));
    }

    #[test]
    fn refuses_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        std::fs::write(&path, b"").unwrap();
        let (_tx, rx) = mpsc::channel();
        let err = run(&path, DEFAULT_TICK, &rx, |_| Ok(()), |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("smaller than one"), "{err}");
    }
}
