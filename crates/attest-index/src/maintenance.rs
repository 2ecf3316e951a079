//! The node-wide limit on concurrent seal and compaction work: each builds a FAISS index and a tantivy
//! segment and can take every core for seconds, so a node holding many shard replicas (or `attest dev`,
//! where every node shares one process) runs at most `engine.max_concurrent_maintenance` of them at a time
//! and the rest wait their turn, instead of starving searches and ingest of CPU all at once. [`Phases`] times
//! the steps of one such job for its log event.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Wall time of a seal's or merge's steps, in the order they ran, logged with its event (`phases_ms`) so an
/// operator sees where maintenance time goes (training, encoding, the text index, the files, fsync, checksums).
#[derive(Debug)]
pub struct Phases {
    last: Instant,
    done: Vec<(&'static str, u128)>,
}

impl Default for Phases {
    fn default() -> Self {
        Self {
            last: Instant::now(),
            done: Vec::new(),
        }
    }
}

impl Phases {
    /// Ends the step running since the previous mark (or since creation) under `name`.
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, (now - self.last).as_millis()));
        self.last = now;
    }

    /// Records a step that ran beside the others (on another thread) and took `took`.
    pub fn add(&mut self, name: &'static str, took: std::time::Duration) {
        self.done.push((name, took.as_millis()));
    }

    /// `name=ms` for each step, space-separated.
    pub fn summary(&self) -> String {
        let steps: Vec<String> = self
            .done
            .iter()
            .map(|(n, ms)| format!("{n}={ms}"))
            .collect();
        steps.join(" ")
    }
}

/// Default: one seal or compaction at a time per process.
pub const DEFAULT_MAX_CONCURRENT: usize = 1;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_CONCURRENT);
static RUNNING: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

/// Sets the limit for this process (at least 1); work already running is not interrupted.
pub fn set_max_concurrent(n: usize) {
    LIMIT.store(n.max(1), Ordering::SeqCst);
    FREED.notify_all();
}

/// Held while one seal or compaction runs; dropping it lets the next one start.
pub struct MaintenanceSlot(());

impl Drop for MaintenanceSlot {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        *running -= 1;
        FREED.notify_one();
    }
}

/// Waits (blocking the calling thread, never an async worker: seal and compaction run on their own threads
/// or the CPU pool) until fewer than the limit are running, then takes a slot.
pub fn acquire() -> MaintenanceSlot {
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    while *running >= LIMIT.load(Ordering::SeqCst) {
        running = FREED.wait(running).unwrap_or_else(|e| e.into_inner());
    }
    *running += 1;
    MaintenanceSlot(())
}

/// How many seals / compactions run now.
pub fn running() -> usize {
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn no_more_than_the_limit_run_at_once() {
        set_max_concurrent(2);
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let most = Arc::clone(&most);
                std::thread::spawn(move || {
                    let _slot = acquire();
                    most.fetch_max(running(), Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(10));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(running(), 0);
        set_max_concurrent(DEFAULT_MAX_CONCURRENT);
    }
}
