//! A one-line progress bar on stderr (bytes, rate, ETA), drawn only when
//! stderr is a terminal and redrawn at most ten times a second.

use crate::size;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const REDRAW: Duration = Duration::from_millis(100);
const BAR_WIDTH: usize = 24;

pub struct Progress {
    enabled: bool,
    total: u64,
    done: u64,
    start: Instant,
    last_draw: Option<Instant>,
}

impl Progress {
    /// A bar for `total` bytes; silent unless stderr is a terminal.
    pub fn new(total: u64) -> Self {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            total,
            done: 0,
            start: Instant::now(),
            last_draw: None,
        }
    }

    /// `n` more bytes are done (or skipped as holes).
    pub fn add(&mut self, n: u64) {
        self.done += n;
        if self.enabled && self.last_draw.is_none_or(|t| t.elapsed() >= REDRAW) {
            self.draw();
        }
    }

    /// Run `f` (which prints a line) with the bar cleared, then redraw it.
    pub fn suspend(&mut self, f: impl FnOnce()) {
        self.clear();
        f();
        if self.enabled && self.last_draw.is_some() {
            self.draw();
        }
    }

    /// Remove the bar for good.
    pub fn finish(&mut self) {
        self.clear();
        self.enabled = false;
    }

    fn clear(&mut self) {
        if self.enabled && self.last_draw.is_some() {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }

    fn draw(&mut self) {
        self.last_draw = Some(Instant::now());
        let secs = self.start.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.done as f64 / secs
        } else {
            0.0
        };
        let frac = if self.total > 0 {
            (self.done as f64 / self.total as f64).min(1.0)
        } else {
            1.0
        };
        let filled = (frac * BAR_WIDTH as f64) as usize;
        let eta = if rate > 0.0 {
            let left = self.total.saturating_sub(self.done) as f64 / rate;
            format!("{}:{:02}", left as u64 / 60, left as u64 % 60)
        } else {
            "-:--".to_string()
        };
        eprint!(
            "\r\x1b[2K[{}{}] {} / {}  {:.0} MB/s  ETA {eta}",
            "#".repeat(filled),
            ".".repeat(BAR_WIDTH - filled),
            size::human(self.done),
            size::human(self.total),
            rate / 1e6,
        );
        let _ = std::io::stderr().flush();
    }
}
