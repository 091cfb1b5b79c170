//! The O_DIRECT side of a stream of the emulated backend: which of its
//! calls go through a second descriptor of the file opened with O_DIRECT
//! (as the direct backend's) instead of the page cache, and the counts.
//!
//! Two reasons to go direct: the kernel reclaims the stream's own pages
//! before it drops them (reads only, [`ReadSwitch`]), and O_DIRECT moves
//! the data faster on this device at this moment ([`Race`]). Only calls
//! that O_DIRECT takes as they are race: one buffer, aligned for the
//! device, at least [`DIRECT_MIN`] bytes, and for writes whole filesystem
//! blocks at an offset of one, so that no block is ever written by both
//! paths (a file's tail goes through the page cache). Ranges that hold
//! pages others cached stay on the page cache's path: a direct read would
//! read the device again, a direct write would take their pages away.

use crate::backend::{Direct, WriteAt};
use crate::race::{Path, Race, Verdict};
use crate::read_switch::ReadSwitch;
use crate::setting::{from_str_by_name, Setting};
use crate::sys::DioAlign;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The smallest call that goes through O_DIRECT (`Always` reads: any): a
/// direct read has no readahead and a direct write no coalescing, so a
/// small one waits for the device each time.
pub const DIRECT_MIN: usize = 512 << 10;

/// Bytes of each slice of a read race ([`Race`]): long enough that one
/// call that waited for a CPU does not decide it (32 MiB take about 5 ms
/// at the speeds of /dev/shm here).
const READ_SLICE: u64 = 32 << 20;
/// Bytes read through the cache before a read race, untimed: readahead's
/// first windows after a direct run.
const READ_WARM_UP: u64 = 8 << 20;
/// Bytes read through O_DIRECT before a read race's direct slice, untimed:
/// the cache slice's readahead still in flight.
const READ_SETTLE: u64 = 8 << 20;

/// When a stream of the emulated backend reads through O_DIRECT. Reads
/// of at least [`DIRECT_MIN`] (`Always`: any); ranges that hold pages
/// others cached are read from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirectReads {
    Never,
    /// While kswapd reclaims (it scanned within [`crate::reclaim::ACTIVE_FOR`])
    /// and takes the stream's own pages before the stream drops them
    /// ([`crate::read_switch`]-judged, in phases): 1.61x the page cache's
    /// speed and a sixteenth of its reclaim where that happened, unchanged
    /// where it did not (bench/runs/2026-11-27-read-gap).
    UnderReclaim,
    /// Under reclaim as above, and also where reads the buffer of which
    /// O_DIRECT takes as it is are faster direct ([`Race`]). Both also
    /// read direct while the kernel's readahead would ask for 2 MiB folios
    /// that fail ([`crate::readahead`]).
    #[default]
    WhenFaster,
    /// Always, whatever the read's size (where O_DIRECT works): for tests.
    Always,
}

/// When a stream of the emulated backend writes through O_DIRECT: writes of
/// whole filesystem blocks from a buffer aligned for the device, of at
/// least [`DIRECT_MIN`] (`Always`: any such write), where no page others
/// cached is written over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirectWrites {
    Never,
    /// Where they are faster direct ([`Race`]), the writeback of the page
    /// cache's path counted in.
    #[default]
    WhenFaster,
    /// Always: for tests.
    Always,
}

impl Setting for DirectReads {
    const ALL: &'static [Self] = &[
        DirectReads::Never,
        DirectReads::UnderReclaim,
        DirectReads::WhenFaster,
        DirectReads::Always,
    ];
    const WHAT: &'static str = "direct reads";
    const ENV: &'static str = "UBIO_DIRECT_READS";
    fn name(self) -> &'static str {
        match self {
            DirectReads::Never => "never",
            DirectReads::UnderReclaim => "under-reclaim",
            DirectReads::WhenFaster => "when-faster",
            DirectReads::Always => "always",
        }
    }
}

impl Setting for DirectWrites {
    const ALL: &'static [Self] = &[
        DirectWrites::Never,
        DirectWrites::WhenFaster,
        DirectWrites::Always,
    ];
    const WHAT: &'static str = "direct writes";
    const ENV: &'static str = "UBIO_DIRECT_WRITES";
    fn name(self) -> &'static str {
        match self {
            DirectWrites::Never => "never",
            DirectWrites::WhenFaster => "when-faster",
            DirectWrites::Always => "always",
        }
    }
}

from_str_by_name!(DirectReads);
from_str_by_name!(DirectWrites);

/// The path of one call, and the race that is to hear how long it took.
#[derive(Debug)]
pub(super) struct Route<'a> {
    /// The O_DIRECT descriptor, when the call goes through it.
    pub direct: Option<&'a Direct>,
    race: Option<&'a Race>,
    began: Instant,
}

impl Route<'_> {
    pub fn cache() -> Route<'static> {
        Route {
            direct: None,
            race: None,
            began: Instant::now(),
        }
    }

    fn path(&self) -> Path {
        match self.direct {
            Some(_) => Path::Direct,
            None => Path::Cache,
        }
    }

    /// The call's time counts from now (not from the route's making).
    pub fn restart_clock(&mut self) {
        self.began = Instant::now();
    }

    /// The call moved `bytes` (its time is counted from the route's making).
    pub fn done(&self, bytes: u64) {
        if let Some(race) = self.race {
            race.record(self.path(), bytes, self.began.elapsed());
        }
    }
}

/// The O_DIRECT side of one stream.
#[derive(Debug)]
pub(super) struct DirectPath {
    reads: DirectReads,
    writes: DirectWrites,
    align: DioAlign,
    /// Opened at the first call that may go direct; None if it could not be.
    direct: OnceLock<Option<Direct>>,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    /// Whether the kernel takes the stream's own pages (under reclaim).
    switch: ReadSwitch,
    read_race: Race,
    write_race: Race,
    /// The path of the last write (0: none yet, 1: cache, 2: direct).
    last_write: AtomicU8,
    /// O_DIRECT refused a call that statx's alignment says it takes: no
    /// more direct calls on this stream.
    refused: AtomicBool,
}

impl DirectPath {
    /// The direct side, unless neither reads nor writes may use it. Write
    /// races in slices of `window` (at least 16 MiB): the page cache's
    /// slice is then long enough for its write-behind to wait as it does
    /// in a long stream.
    pub fn new(
        reads: DirectReads,
        writes: DirectWrites,
        align: DioAlign,
        window: u64,
    ) -> Option<DirectPath> {
        (reads != DirectReads::Never || writes != DirectWrites::Never).then(|| DirectPath {
            reads,
            writes,
            align,
            direct: OnceLock::new(),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            switch: ReadSwitch::default(),
            read_race: Race::new(READ_SLICE, READ_WARM_UP).with_settle(READ_SETTLE),
            write_race: Race::new(window.max(16 << 20), 0),
            last_write: AtomicU8::new(0),
            refused: AtomicBool::new(false),
        })
    }

    #[cfg(test)]
    pub fn reads(&self) -> DirectReads {
        self.reads
    }

    pub fn writes(&self) -> DirectWrites {
        self.writes
    }

    fn direct(&self, fd: BorrowedFd<'_>) -> Option<&Direct> {
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        self.direct
            .get_or_init(|| {
                Direct::open(fd, self.align)
                    .inspect_err(|e| log::debug!("no direct calls: O_DIRECT open: {e}"))
                    .ok()
            })
            .as_ref()
    }

    /// The under-reclaim switch, for a read of `len` that could go direct
    /// while kswapd runs ([`ReadSwitch`]).
    pub fn reclaim_switch(
        &self,
        len: u64,
        kswapd_active: impl FnOnce() -> bool,
    ) -> Option<&ReadSwitch> {
        Some(&self.switch)
            .filter(|_| {
                matches!(
                    self.reads,
                    DirectReads::UnderReclaim | DirectReads::WhenFaster
                )
            })
            .filter(|_| len >= DIRECT_MIN as u64)
            .filter(|_| kswapd_active())
    }

    /// The path of a read of `bufs` at `off`; `fragmented`: the kernel's
    /// readahead would ask for 2 MiB folios that fail
    /// ([`crate::readahead`]); `others` says whether pages others cached
    /// may be in the range.
    pub fn read_route(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSliceMut<'_>],
        off: u64,
        switch: Option<&ReadSwitch>,
        fragmented: bool,
        others: impl FnOnce() -> bool,
    ) -> Route<'_> {
        let len: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let reclaimed = switch.is_some_and(|s| s.take_direct(len));
        let fragmented = fragmented && len >= DIRECT_MIN as u64;
        let (raced, forced) = match self.reads {
            DirectReads::Always => (false, len > 0),
            DirectReads::Never => (false, false),
            _ if reclaimed || fragmented => (false, true),
            DirectReads::WhenFaster => (len >= DIRECT_MIN as u64, false),
            DirectReads::UnderReclaim => (false, false),
        };
        if !(raced || forced) {
            return Route::cache();
        }
        let Some(direct) = self.direct(fd) else {
            return Route::cache();
        };
        // A forced read goes direct whatever its buffer (the direct backend
        // bounces what O_DIRECT does not take); a raced one only as it is.
        let takes =
            forced || matches!(bufs, [buf] if direct.takes_read(buf.as_ptr(), off, buf.len()));
        // Others' pages there are read from the cache (looked at last: it
        // takes the tracker's lock). This stream's own (its readahead
        // before a switch) are not: each buffered read of them would set
        // off the next readahead, and the stream would never leave the
        // page cache.
        if !takes || others() {
            return Route::cache();
        }
        match forced {
            true => self.direct_route(direct, None),
            false => self.raced(direct, &self.read_race, len),
        }
    }

    /// The path of a write of `bufs` at `at`; `keeps_cached` says whether
    /// the range holds pages others cached (which the write must keep).
    pub fn write_route(
        &self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
        at: WriteAt,
        keeps_cached: impl FnOnce() -> bool,
    ) -> Route<'_> {
        let off = match (self.writes, at) {
            (DirectWrites::Never, _) => return Route::cache(),
            (_, WriteAt::Offset(o) | WriteAt::Position(o)) => o,
            // The end moves under an appender; the page cache's path.
            (_, WriteAt::End | WriteAt::EndPositional) => return Route::cache(),
        };
        let [buf] = bufs else {
            return Route::cache();
        };
        let len = buf.len() as u64;
        let least = match self.writes {
            DirectWrites::Always => 1,
            _ => DIRECT_MIN as u64,
        };
        if len < least {
            return Route::cache();
        }
        let Some(direct) = self.direct(fd) else {
            return Route::cache();
        };
        if !direct.takes_write(buf.as_ptr(), off, buf.len()) || keeps_cached() {
            return Route::cache();
        }
        match self.writes {
            DirectWrites::Always => self.direct_route(direct, None),
            _ => self.raced(direct, &self.write_race, len),
        }
    }

    fn direct_route<'a>(&'a self, direct: &'a Direct, race: Option<&'a Race>) -> Route<'a> {
        Route {
            direct: Some(direct),
            race,
            began: Instant::now(),
        }
    }

    fn raced<'a>(&'a self, direct: &'a Direct, race: &'a Race, len: u64) -> Route<'a> {
        match race.take(len) {
            Path::Direct => self.direct_route(direct, Some(race)),
            Path::Cache => Route {
                direct: None,
                race: Some(race),
                began: Instant::now(),
            },
        }
    }

    /// A write takes `route`: true when it goes direct after one that went
    /// through the cache (the caller then writes back what that left
    /// dirty, and charges it with [`charge_cache_writes`]).
    ///
    /// [`charge_cache_writes`]: Self::charge_cache_writes
    pub fn switches_to_direct(&self, route: &Route<'_>) -> bool {
        let now = match route.path() {
            Path::Cache => 1,
            Path::Direct => 2,
        };
        self.last_write.swap(now, Ordering::Relaxed) == 1 && now == 2
    }

    /// The writeback of the page cache's writes took `spent` (their part
    /// of a race).
    pub fn charge_cache_writes(&self, spent: Duration) {
        self.write_race.charge(Path::Cache, spent);
    }

    /// O_DIRECT failed with `err` before moving anything: true if the
    /// call is to be made through the page cache instead (EINVAL, an
    /// alignment statx did not tell), and then so are the stream's next.
    pub fn refused(&self, err: &std::io::Error) -> bool {
        if err.raw_os_error() != Some(libc::EINVAL) {
            return false;
        }
        if !self.refused.swap(true, Ordering::Relaxed) {
            log::warn!(
                "O_DIRECT refused an aligned call ({err}): this stream uses the page cache only"
            );
        }
        true
    }

    pub fn count_read(&self, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
    }

    pub fn count_written(&self, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    pub fn reclaim_phases(&self) -> u64 {
        self.switch.phases()
    }

    pub fn read_verdict(&self) -> Option<Verdict> {
        self.read_race.verdict()
    }

    pub fn write_verdict(&self) -> Option<Verdict> {
        self.write_race.verdict()
    }
}
