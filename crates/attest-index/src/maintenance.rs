//! The node-wide limit on concurrent seal and merge work: each builds a FAISS index and a tantivy segment and
//! can take every core for seconds, so a node holding many shard replicas (or `attest dev`, where every node
//! shares one process) runs at most `engine.max_concurrent_maintenance` seals and as many merges at a time, and
//! the rest wait their turn, instead of starving searches and ingest of CPU all at once. Seals and merges wait
//! in separate queues: a merge of a million rows takes minutes, and seals queued behind it left every replica of
//! the node refusing writes as busy meanwhile (10M through the router, docs/BENCHMARKS.md). [`Phases`] times the
//! steps of one such job for its log event.

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

/// Default: one seal and one merge at a time per process.
pub const DEFAULT_MAX_CONCURRENT: usize = 1;

/// The kind of maintenance work a slot is taken for; each kind has its own queue and limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Writing the growing segment out: writes wait on it once the unsealed backlog is full.
    Seal,
    /// Merging sealed segments (tiered, or a full compaction): only searches wait on it, for fewer segments.
    Merge,
}

struct Queue {
    running: Mutex<usize>,
    freed: Condvar,
}

impl Queue {
    const fn new() -> Self {
        Self {
            running: Mutex::new(0),
            freed: Condvar::new(),
        }
    }
}

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_CONCURRENT);
static SEALS: Queue = Queue::new();
static MERGES: Queue = Queue::new();

fn queue(work: Work) -> &'static Queue {
    match work {
        Work::Seal => &SEALS,
        Work::Merge => &MERGES,
    }
}

/// Sets the limit of each kind for this process (at least 1); work already running is not interrupted.
pub fn set_max_concurrent(n: usize) {
    LIMIT.store(n.max(1), Ordering::SeqCst);
    for q in [&SEALS, &MERGES] {
        let _running = q.running.lock().unwrap_or_else(|e| e.into_inner());
        q.freed.notify_all();
    }
}

/// Held while one seal or merge runs; dropping it lets the next one of its kind start, and hands what the job
/// freed back to the system ([`crate::freed_memory`]: the job's buffers are gone by then, the slot being taken
/// before them).
pub struct MaintenanceSlot(&'static Queue);

impl Drop for MaintenanceSlot {
    fn drop(&mut self) {
        {
            let mut running = self.0.running.lock().unwrap_or_else(|e| e.into_inner());
            *running -= 1;
            self.0.freed.notify_one();
        }
        crate::freed_memory::release();
    }
}

/// Waits (blocking the calling thread, never an async worker: seals and merges run on their own threads or the
/// CPU pool) until fewer than the limit of `work`'s kind are running, then takes a slot.
pub fn acquire(work: Work) -> MaintenanceSlot {
    let q = queue(work);
    let mut running = q.running.lock().unwrap_or_else(|e| e.into_inner());
    while *running >= LIMIT.load(Ordering::SeqCst) {
        running = q.freed.wait(running).unwrap_or_else(|e| e.into_inner());
    }
    *running += 1;
    MaintenanceSlot(q)
}

/// How many seals or merges run now.
pub fn running(work: Work) -> usize {
    *queue(work)
        .running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn no_more_than_the_limit_run_at_once_and_seals_never_queue_behind_merges() {
        set_max_concurrent(2);
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let most = Arc::clone(&most);
                std::thread::spawn(move || {
                    let _slot = acquire(Work::Merge);
                    most.fetch_max(running(Work::Merge), Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(10));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(running(Work::Merge), 0);

        // Every merge slot taken (a long merge): a seal still starts at once.
        set_max_concurrent(1);
        let merging = acquire(Work::Merge);
        let (tx, rx) = std::sync::mpsc::channel();
        let seal = std::thread::spawn(move || {
            let _slot = acquire(Work::Seal);
            tx.send(running(Work::Seal)).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
        seal.join().unwrap();
        drop(merging);
        set_max_concurrent(DEFAULT_MAX_CONCURRENT);
    }
}
