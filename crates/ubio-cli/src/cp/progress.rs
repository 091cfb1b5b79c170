//! The progress bar of `ubio cp` on stderr (bytes, rate, ETA), through
//! indicatif: drawn only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// Clones share one bar (the copies in flight each hold one).
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` bytes; silent unless stderr is a terminal.
    pub fn new(total: u64) -> Self {
        // Ten redraws a second at most; indicatif hides the bar off a terminal.
        let bar =
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(10));
        bar.set_style(
            ProgressStyle::with_template(
                "[{bar:24}] {bytes} / {total_bytes}  {binary_bytes_per_sec}  ETA {eta}",
            )
            .expect("a valid template")
            .progress_chars("#>."),
        );
        // The tick is a thread: only for a bar that is drawn.
        if Self::drawn() {
            bar.enable_steady_tick(Duration::from_millis(500));
        }
        Progress { bar }
    }

    /// Whether a bar is drawn: stderr is a terminal.
    pub fn drawn() -> bool {
        use std::io::IsTerminal;
        std::io::stderr().is_terminal()
    }

    /// `n` more bytes are done (or skipped as holes).
    pub fn add(&mut self, n: u64) {
        self.bar.inc(n);
    }

    /// Run `f` (which prints a line) with the bar cleared, then redraw it.
    pub fn suspend(&mut self, f: impl FnOnce()) {
        self.bar.suspend(f);
    }

    /// Remove the bar for good.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}
