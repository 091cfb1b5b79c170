//! A sampling thread that runs until asked to stop (the shape of
//! [`crate::residency_sampler::ResidencySampler`]).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A thread running `sample(stop)` until `stop` is set; `sample` is to take
/// one last sample after it sees `stop` and return what it found. Dropping
/// it stops and joins the thread too.
pub struct SamplerThread<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<T>>>,
}

impl<T: Send + 'static> SamplerThread<T> {
    pub fn spawn(sample: impl FnOnce(&AtomicBool) -> io::Result<T> + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || sample(&flag));
        SamplerThread {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the thread (after its last sample) and returns its result.
    pub fn finish(mut self) -> io::Result<T> {
        self.stop.store(true, Ordering::Release);
        self.handle
            .take()
            .expect("finished once")
            .join()
            .expect("sampler thread panicked")
    }
}

impl<T> Drop for SamplerThread<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
