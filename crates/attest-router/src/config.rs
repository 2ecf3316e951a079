//! Router configuration: limits and defaults from SPEC.md, overridable from the YAML config.

use attest_ingest::{ChunkingConfig, DocumentLimits, MinHashConfig};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RouterConfig {
    /// RRF constant k (SPEC: 60), overridable per request.
    pub rrf_k: f64,
    /// Hits returned when a request does not say.
    pub default_k: usize,
    /// Largest `k` a caller may ask for.
    pub max_k: usize,
    /// Candidates taken from each lane (after merging shards) before fusion.
    pub lane_depth: usize,
    /// Longest query accepted, in bytes.
    pub max_query_bytes: usize,
    /// Most documents in one ingest request.
    pub max_batch_documents: usize,
    /// Re-score dense candidates with the full vectors kept on disk.
    pub exact_rescore: bool,
    /// Default shards of a new collection (`attest dev` runs 2 shard nodes).
    pub default_shards: u32,
    /// Growing-segment size at which shards seal (chunks).
    pub seal_threshold: u64,
    pub chunking: ChunkingConfig,
    pub dedup: MinHashConfig,
    pub limits: DocumentLimits,
    /// Query embeddings kept in the LRU cache in front of the embedder.
    pub query_cache_capacity: usize,
    /// Hit scores are multiplied by this when the dense lane is missing (SPEC: confidence reduced by 20%).
    pub fallback_confidence_factor: f64,
    /// Tenant used when a request names none (no API keys in single-process mode).
    pub default_tenant: String,
    /// Every call to a shard replica: deadline, retry on another replica, hedging, concurrency limit, load
    /// shedding.
    pub replicas: crate::replicas::ReplicaPolicy,
    /// Replicas that must acknowledge a write; 0: half the replica set rounded up (1 of 1 or 2, 2 of 3, 3 of 5).
    pub write_quorum: u32,
    /// Replicas per shard of a new collection in a cluster (SPEC default 2).
    pub default_replication: u32,
    /// How often a cluster router re-reads the shard map from meta.
    pub meta_poll_ms: u64,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            rrf_k: crate::rrf::DEFAULT_RRF_K,
            default_k: 10,
            max_k: 100,
            lane_depth: 50,
            max_query_bytes: 4096,
            max_batch_documents: 1000,
            exact_rescore: true,
            default_shards: 2,
            seal_threshold: 50_000,
            chunking: ChunkingConfig::default(),
            dedup: MinHashConfig::default(),
            limits: DocumentLimits::default(),
            query_cache_capacity: attest_embed::DEFAULT_CACHE_CAPACITY,
            fallback_confidence_factor: 0.8,
            default_tenant: "default".to_string(),
            replicas: crate::replicas::ReplicaPolicy::default(),
            write_quorum: 0,
            default_replication: 2,
            meta_poll_ms: 500,
        }
    }
}
