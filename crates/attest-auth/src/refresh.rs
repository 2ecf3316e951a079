//! [`KeyRefresh`]: how a node's key ring reads meta's keys at once when it is shown a key it does not know, so a
//! key is accepted by every front as soon as it is minted rather than from the next poll.
//!
//! A key minted through one router is in meta before its creator sees it, but every other front (the answer tier,
//! other routers) learns of it only from its own poll. So when a well-formed key is unknown, the ring reads meta's
//! state (linearizably) and looks again. Reads are coalesced: a caller waits for one read that *started after* it
//! arrived (an earlier one may predate the key), and every caller that arrived meanwhile shares that read, so a
//! flood of made-up keys costs at most one meta read in flight per node.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use attest_proto::v1 as pb;

/// A read of meta's current cluster state (`None` when meta could not be reached).
pub type StateFetch =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Option<pb::ClusterState>> + Send>> + Send + Sync>;

/// The on-demand read of meta a key ring may be given (none: it relies on its node's poll alone).
#[derive(Default)]
pub struct KeyRefresh {
    fetch: OnceLock<StateFetch>,
    /// Held while a read is under way; the reads themselves are counted in `started`.
    running: tokio::sync::Mutex<()>,
    started: AtomicU64,
}

impl KeyRefresh {
    /// Sets the read (once: a second call is ignored, the node has one meta).
    pub fn set(&self, fetch: StateFetch) {
        let _ = self.fetch.set(fetch);
    }

    pub fn is_set(&self) -> bool {
        self.fetch.get().is_some()
    }

    /// A ticket for [`KeyRefresh::state_since`]: how many reads had started when the caller arrived.
    pub fn ticket(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Meta's state as of a read that started after `ticket` was taken: `None` when another caller's such read
    /// has already been applied (or meta did not answer), in which case there is nothing new to apply.
    pub async fn state_since(&self, ticket: u64) -> Option<pb::ClusterState> {
        let fetch = self.fetch.get()?;
        let _running = self.running.lock().await;
        // Every read counted in `started` has finished while the lock is held: one that began after the ticket
        // has seen whatever key the caller holds.
        if self.started.load(Ordering::SeqCst) > ticket {
            return None;
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        let state = fetch().await;
        metrics::counter!("auth_key_refreshes_total").increment(1);
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test]
    async fn callers_that_arrive_together_share_one_read() {
        let reads = Arc::new(AtomicUsize::new(0));
        let refresh = Arc::new(KeyRefresh::default());
        assert!(refresh.state_since(0).await.is_none(), "no read set");
        let counted = Arc::clone(&reads);
        refresh.set(Arc::new(move || {
            let counted = Arc::clone(&counted);
            Box::pin(async move {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some(pb::ClusterState::default())
            })
        }));
        // The first read is in flight; eight callers arrive during it and must not reuse it.
        let first = {
            let r = Arc::clone(&refresh);
            let t = r.ticket();
            tokio::spawn(async move { r.state_since(t).await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let waiting: Vec<_> = (0..8)
            .map(|_| {
                let r = Arc::clone(&refresh);
                let t = r.ticket();
                tokio::spawn(async move { r.state_since(t).await.is_some() })
            })
            .collect();
        assert!(first.await.unwrap());
        let mut fetched = 0;
        for w in waiting {
            fetched += usize::from(w.await.unwrap());
        }
        assert_eq!(
            fetched, 1,
            "one of the later callers reads, the rest share it"
        );
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }
}
