//! The snapshot transfers a shard node is running (a replica's upload to a snapshot destination, or its
//! download into the staging area), and how far each has come: what `TransferProgress` answers, so that the
//! router running a snapshot job can show per-shard bytes while a transfer that may take hours runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use attest_proto::v1 as pb;
use parking_lot::Mutex;

/// One transfer's counters (bytes of the replica's files).
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub skipped: AtomicU64,
    pub total: AtomicU64,
}

impl Progress {
    pub fn add_done(&self, bytes: u64) {
        self.done.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_skipped(&self, bytes: u64) {
        self.skipped.fetch_add(bytes, Ordering::Relaxed);
    }
}

type Key = (String, u32);

#[derive(Debug, Default)]
pub struct Transfers {
    running: Arc<Mutex<HashMap<Key, Arc<Progress>>>>,
}

/// Keeps a transfer listed while it runs; dropping it (the transfer ended, or its call was cancelled) unlists it.
pub struct Running {
    key: Key,
    progress: Arc<Progress>,
    running: Arc<Mutex<HashMap<Key, Arc<Progress>>>>,
}

impl Running {
    pub fn progress(&self) -> &Progress {
        &self.progress
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = self.running.lock();
        // Only this transfer's entry: a newer one of the same replica may have replaced it.
        if running
            .get(&self.key)
            .is_some_and(|p| Arc::ptr_eq(p, &self.progress))
        {
            running.remove(&self.key);
        }
    }
}

impl Transfers {
    /// Lists a transfer of `collection`/`shard` of `total` bytes (a newer one of the same replica replaces it).
    pub fn start(&self, collection: &str, shard: u32, total: u64) -> Running {
        let progress = Arc::new(Progress::default());
        progress.total.store(total, Ordering::Relaxed);
        let key = (collection.to_string(), shard);
        self.running
            .lock()
            .insert(key.clone(), Arc::clone(&progress));
        Running {
            key,
            progress,
            running: Arc::clone(&self.running),
        }
    }

    pub fn report(&self, collection: &str, shard: u32) -> pb::TransferProgressResponse {
        let running = self.running.lock();
        match running.get(&(collection.to_string(), shard)) {
            Some(p) => pb::TransferProgressResponse {
                active: true,
                bytes_done: p.done.load(Ordering::Relaxed),
                bytes_skipped: p.skipped.load(Ordering::Relaxed),
                bytes_total: p.total.load(Ordering::Relaxed),
            },
            None => pb::TransferProgressResponse::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_is_reported_while_it_runs_and_unlisted_when_dropped() {
        let transfers = Transfers::default();
        assert!(!transfers.report("docs", 0).active);
        let first = transfers.start("docs", 0, 100);
        first.progress().add_done(40);
        first.progress().add_skipped(10);
        let r = transfers.report("docs", 0);
        assert_eq!(
            (r.active, r.bytes_done, r.bytes_skipped, r.bytes_total),
            (true, 40, 10, 100)
        );
        // A retry replaces it; the first one's end does not unlist the retry.
        let second = transfers.start("docs", 0, 100);
        drop(first);
        assert!(transfers.report("docs", 0).active);
        drop(second);
        assert!(!transfers.report("docs", 0).active);
    }
}
