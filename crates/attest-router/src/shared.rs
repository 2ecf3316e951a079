//! What every routing service shares ([`crate::router`]): the config, meta's shard map as this router watches
//! it, the write clock, the embedders and the per-collection metrics; and the few acts on the shard map that
//! more than one service needs — the write quorum, a call to every replica, stable placement, replicas ensured
//! after meta created a collection and dropped after it forgot one, and telling whether a re-embedding switched
//! a collection to its copy.

use std::sync::Arc;

use attest_core::version::WriteClock;
use attest_proto::v1 as pb;
use attest_telemetry::collection_metrics::CollectionMetrics;
use sha2::{Digest, Sha256};
use tracing::warn;

use crate::collection::{record_from_meta, CollectionRecord};
use crate::config::RouterConfig;
use crate::embedders::Embedders;
use crate::replicas::{call_all, ShardCall};
use crate::topology::ClusterView;

/// The state the routing services share (each holds it behind one `Arc`).
pub struct Shared {
    pub(crate) config: RouterConfig,
    /// Collections and where their replicas live: meta's shard map, watched.
    pub(crate) view: Arc<ClusterView>,
    /// Write versions: every replica of a document gets the same one, and the newest wins.
    pub(crate) clock: WriteClock,
    /// The configured embedder, and the local models collections were filled by ([`crate::embedders`]).
    pub(crate) embedders: Embedders,
    /// Requests and ingest by collection and tenant ([`crate::measured`]).
    pub(crate) metrics: CollectionMetrics,
    /// This router process, as jobs name the router running them.
    pub(crate) instance: String,
}

/// Stable placement: the same document id always lands on the same shard.
pub fn shard_for(doc_id: &str, shards: u32) -> u32 {
    let digest = Sha256::digest(doc_id.as_bytes());
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (n % shards.max(1) as u64) as u32
}

impl Shared {
    pub(crate) fn new(config: RouterConfig, view: Arc<ClusterView>, embedders: Embedders) -> Self {
        Shared {
            metrics: CollectionMetrics::new(config.metrics_label_cap),
            instance: format!(
                "router-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
            config,
            view,
            clock: WriteClock::default(),
            embedders,
        }
    }

    /// The replicas that must acknowledge a write to a replica set of `n` (config `write_quorum`, else half
    /// the set rounded up: 1 of 1 or 2, 2 of 3, 3 of 5).
    pub(crate) fn write_quorum(&self, n: usize) -> usize {
        match self.config.write_quorum {
            0 => n.div_ceil(2).max(1),
            q => (q as usize).min(n.max(1)),
        }
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

    /// After meta created a collection: the view moved to it, and every replica created on its node (from a
    /// staged snapshot restore where there is one). A replica whose node cannot be reached now is created by
    /// the node itself when it next reads the shard map.
    pub(crate) async fn ensure_replicas(
        &self,
        created: &pb::CollectionMeta,
        request_id: &str,
    ) -> CollectionRecord {
        // A linearizable read moves the view to a version that includes the new collection, so a poll
        // answered by a lagging meta follower cannot take it away again before the first ingest.
        if let Err(e) = self.view.refresh(true).await {
            warn!(error = %e, event = "meta_refresh_failed", "using the created collection as returned");
            self.view.insert(created);
        }
        let record = record_from_meta(created);
        let ensured = self
            .on_every_replica(&record, |shard| ShardCall::EnsureShard {
                request_id: request_id.to_string(),
                req: pb::EnsureShardRequest {
                    collection: record.stored_name.clone(),
                    shard,
                    spec: created.spec.clone(),
                    replication: created.replication,
                    shards: created.shards,
                },
            })
            .await;
        for (shard, outcome) in ensured {
            if let Some(e) = outcome.error {
                warn!(collection = %record.name, shard, error = %e, event = "ensure_shard_deferred",
                    "replica not created yet; its node creates it when it next reads the shard map");
            }
        }
        record
    }

    /// Asks every replica of a collection meta no longer holds to drop its data now (a node that cannot be
    /// reached drops it when it next reads the shard map).
    pub(crate) async fn drop_replicas(&self, rec: &CollectionRecord, request_id: &str) {
        let dropped = self
            .on_every_replica(rec, |shard| ShardCall::DropShard {
                request_id: request_id.to_string(),
                req: pb::DropShardRequest {
                    collection: rec.stored_name.clone(),
                    shard,
                },
            })
            .await;
        for (shard, outcome) in dropped {
            if let Some(e) = outcome.error {
                warn!(collection = %rec.stored_name, shard, error = %e, event = "drop_shard_failed",
                    "could not drop shard");
            }
        }
    }

    /// Whether `collection` resolves (after a fresh read of meta) to another stored collection than `before`:
    /// a re-embedding switched it to its copy.
    pub(crate) async fn switched_from(&self, collection: &str, before: &str) -> bool {
        if let Err(e) = self.view.refresh(false).await {
            warn!(error = %e, event = "meta_refresh_failed", "could not tell whether the collection switched");
        }
        self.view
            .get(collection)
            .is_ok_and(|rec| rec.stored_name != before)
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
