//! `Router`: the state the HTTP and gRPC fronts share (config, meta's shard map, embedders, the write clock),
//! and what every concern uses (write quorum, calls to every replica, stable placement). The operations are
//! split by concern: [`crate::collections`] (create, drop, maintain, stats), [`crate::ingest`] (validate →
//! near-duplicates (asked of the shards) → chunk → embed → place → write; delete) and [`crate::search`] (validate → embed → fan out → fuse).

use std::sync::Arc;

use attest_core::version::WriteClock;
use attest_embed::Embedder;
use attest_telemetry::collection_metrics::CollectionMetrics;
use sha2::{Digest, Sha256};

use crate::collection::CollectionRecord;
use crate::config::RouterConfig;
use crate::embedders::Embedders;
use crate::error::RouterError;
use crate::replicas::{call_all, ShardCall};
use crate::topology::ClusterView;

pub struct Router {
    pub(crate) config: RouterConfig,
    /// Collections and where their replicas live: meta's shard map, watched.
    pub(crate) view: Arc<ClusterView>,
    /// Write versions: every replica of a document gets the same one, and the newest wins.
    pub(crate) clock: WriteClock,
    /// The configured embedder, and the local models collections were filled by ([`crate::embedders`]).
    pub(crate) embedders: Embedders,
    /// Requests and ingest by collection and tenant ([`crate::measured`]).
    pub(crate) metrics: CollectionMetrics,
    /// This router process, as snapshot jobs name the router running them.
    pub(crate) instance: String,
    /// The directories this router admits as snapshot destinations (none until configured).
    pub(crate) snapshot_destinations: attest_snapshot::DestinationPolicy,
}

/// Stable placement: the same document id always lands on the same shard.
pub fn shard_for(doc_id: &str, shards: u32) -> u32 {
    let digest = Sha256::digest(doc_id.as_bytes());
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (n % shards.max(1) as u64) as u32
}

impl Router {
    /// A router over meta's shard map (`view` keeps it fresh).
    pub fn new(config: RouterConfig, view: Arc<ClusterView>, embedder: Arc<dyn Embedder>) -> Self {
        let query_cache_capacity = config.query_cache_capacity;
        Router {
            metrics: CollectionMetrics::new(config.metrics_label_cap),
            instance: format!(
                "router-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
            config,
            view,
            clock: WriteClock::default(),
            embedders: Embedders::new(embedder, query_cache_capacity),
            snapshot_destinations: Default::default(),
        }
    }

    /// Runs the local models of collections filled by another model than the configured one with `local`'s
    /// runtime settings (`embedder.local`).
    pub fn with_local_embedder_settings(
        mut self,
        local: attest_embed::LocalEmbedderConfig,
    ) -> Self {
        self.embedders = self.embedders.with_local_settings(local);
        self
    }

    /// Admits directory snapshot destinations as `policy` says (`snapshots.allowed_roots`).
    pub fn with_snapshot_destinations(
        mut self,
        policy: attest_snapshot::DestinationPolicy,
    ) -> Self {
        self.snapshot_destinations = policy;
        self
    }

    /// The replicas that must acknowledge a write to a replica set of `n` (config `write_quorum`, else half
    /// the set rounded up: 1 of 1 or 2, 2 of 3, 3 of 5).
    pub(crate) fn write_quorum(&self, n: usize) -> usize {
        match self.config.write_quorum {
            0 => n.div_ceil(2).max(1),
            q => (q as usize).min(n.max(1)),
        }
    }

    pub fn config(&self) -> &RouterConfig {
        &self.config
    }

    /// Meta's shard map as this router watches it (readiness, the cluster view).
    pub fn view(&self) -> &Arc<ClusterView> {
        &self.view
    }

    /// The API keys this router accepts (meta's, refreshed with the shard map).
    pub fn keys(&self) -> &Arc<attest_auth::KeyRing> {
        self.view.keys()
    }

    /// The configured embedder (new collections are filled by it unless they name another model).
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedders.configured().passages
    }

    pub fn collection(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        self.view.get(name)
    }

    pub fn collections(&self) -> Vec<CollectionRecord> {
        self.view.list()
    }

    /// Sends `call(shard)` to every replica of every shard (an operation that must reach all of them, not a
    /// quorum), shard by shard; returns each shard's outcome.
    pub(crate) async fn on_every_replica(
        &self,
        rec: &CollectionRecord,
        call: impl Fn(u32) -> ShardCall,
    ) -> Vec<(u32, crate::replicas::WriteOutcome)> {
        let mut out = Vec::with_capacity(rec.shards as usize);
        for shard in 0..rec.shards {
            let replicas = self.view.write_replicas(rec, shard as usize);
            let outcome = call_all(
                &replicas,
                call(shard),
                replicas.len(),
                &self.config.replicas,
            )
            .await;
            out.push((shard, outcome));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_stable_and_spread() {
        assert_eq!(shard_for("doc-1", 4), shard_for("doc-1", 4));
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[shard_for(&format!("doc-{i}"), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }
}
