//! Router configuration: limits and defaults from docs/SPEC.md, overridable from the YAML config.

use attest_core::{limits, ConfigProblems};
use attest_ingest::{ChunkingConfig, DocumentLimits, MinHashConfig};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RouterConfig {
    /// RRF constant k (SPEC: 60), overridable per request.
    pub rrf_k: f64,
    /// Each lane's weight in the fusion when a request gives none (`weights` of a search): `dense` and `bm25`;
    /// by default dense [`crate::rrf::DEFAULT_DENSE_WEIGHT`] and BM25 1.0. A lane missing here keeps its default.
    pub lane_weights: std::collections::BTreeMap<String, f64>,
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
    /// Most conditions in one search's metadata filter, and most values in one `in` list.
    pub max_filter_conditions: usize,
    pub max_filter_values: usize,
    /// Re-score dense candidates with the full vectors kept on disk.
    pub exact_rescore: bool,
    /// Default shards of a new collection (`attest dev` runs 2 shard nodes).
    pub default_shards: u32,
    /// Most shards a new collection may ask for (at most 4096, the cluster's limit). Every shard of a collection
    /// costs each node that holds one files and memory from the moment it is created: an operator of small nodes
    /// bounds what one request can take.
    pub max_shards: u32,
    pub chunking: ChunkingConfig,
    pub dedup: MinHashConfig,
    /// Check every ingested document for near-duplicates of the batch and of what the collection stores (default
    /// true). Off, documents are neither sketched nor checked and shards store no near-duplicate keys: ~0.8 KB
    /// less disk per document and replica (the `dedup.stored_bands` bucket entries and the signature of the shard's
    /// `dedup` family), and no fan-out to
    /// every shard per ingest batch — for corpora deduplicated upstream. Turned on again, documents written
    /// while it was off are never matched (they have no keys).
    pub check_near_duplicates: bool,
    pub limits: DocumentLimits,
    /// Query embeddings kept in the LRU cache in front of the embedder.
    pub query_cache_capacity: usize,
    /// Tenant used when a request names none (no API keys in single-process mode).
    pub default_tenant: String,
    /// Every call to a shard replica: deadline, retry on another replica, hedging, concurrency limit, load
    /// shedding.
    pub replicas: crate::replicas::ReplicaPolicy,
    /// Replicas that must acknowledge a write; 0: half the replica set rounded up (1 of 1 or 2, 2 of 3, 3 of 5).
    pub write_quorum: u32,
    /// Replicas per shard of a new collection in a cluster that does not say (SPEC default 2), at most one per
    /// live shard node: with fewer nodes the default shrinks to their number (an explicit replication does not).
    pub default_replication: u32,
    /// Follow meta's cluster state by a watch (a long poll by version: a change arrives as soon as meta applies
    /// it, an idle cluster costs nearly nothing). Off: re-read the whole state every `meta_poll_ms`.
    pub meta_watch: bool,
    /// How often a router re-reads the whole cluster state when it does not watch (the watch off, or a meta
    /// older than the watch), and how long it waits after a failed read.
    pub meta_poll_ms: u64,
    /// Each shard sends the payloads of its best ⌈factor × k / shards⌉ hits per lane with the search (its share of
    /// what the router returns, with room for RRF lifting a lower-ranked hit); the router fetches only the
    /// returned hits not among them, usually none, so a search is one round trip per shard. 0: every payload is
    /// fetched after fusion.
    pub payload_inline_factor: f64,
    /// Where `attest-lab eval --json` reports are kept for the console's Quality page (`DIR/{collection}.json` or
    /// `DIR/{collection}/*.json`, the newest wins); served by `GET /v1/collections/{name}/eval`. None: no reports.
    pub eval_reports_dir: Option<std::path::PathBuf>,
    /// Distinct collections, and distinct tenants, that get their own series in the per-collection metrics
    /// (`attest_collection_*`); the rest are counted under `other`, so callers cannot mint series without end.
    pub metrics_label_cap: usize,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            rrf_k: crate::rrf::DEFAULT_RRF_K,
            lane_weights: [("dense".to_string(), crate::rrf::DEFAULT_DENSE_WEIGHT)].into(),
            default_k: 10,
            max_k: 100,
            lane_depth: 50,
            max_query_bytes: 4096,
            max_batch_documents: 1000,
            max_filter_conditions: 32,
            max_filter_values: 1024,
            exact_rescore: true,
            default_shards: 2,
            max_shards: limits::MAX_SHARDS,
            chunking: ChunkingConfig::default(),
            dedup: MinHashConfig::default(),
            check_near_duplicates: true,
            limits: DocumentLimits::default(),
            query_cache_capacity: attest_embed::DEFAULT_CACHE_CAPACITY,
            default_tenant: "default".to_string(),
            replicas: crate::replicas::ReplicaPolicy::default(),
            write_quorum: 0,
            default_replication: limits::DEFAULT_REPLICATION,
            meta_watch: true,
            meta_poll_ms: 500,
            payload_inline_factor: 2.0,
            eval_reports_dir: None,
            metrics_label_cap: attest_telemetry::collection_metrics::DEFAULT_LABEL_CAP,
        }
    }
}

impl RouterConfig {
    /// The tenant a request acts as: the one it names, or `default_tenant` when it names none (or an empty one).
    pub fn tenant_or_default<'a>(&'a self, tenant: Option<&'a str>) -> &'a str {
        tenant
            .filter(|t| !t.is_empty())
            .unwrap_or(&self.default_tenant)
    }

    /// Values that cannot be right, named as `router.KEY` (checked at start-up and by `attest config check`).
    pub fn problems(&self) -> ConfigProblems {
        let mut p = ConfigProblems::new("router");
        if !(self.rrf_k.is_finite() && self.rrf_k > 0.0) {
            p.add(
                "rrf_k",
                format!("must be a positive number (got {})", self.rrf_k),
            );
        }
        for (lane, weight) in &self.lane_weights {
            if !["dense", "bm25"].contains(&lane.as_str()) {
                p.add(
                    "lane_weights",
                    format!("names no lane `{lane}` (dense, bm25)"),
                );
            } else if !(weight.is_finite() && *weight >= 0.0) {
                p.add(
                    "lane_weights",
                    format!("{lane} must be a number of at least 0 (got {weight})"),
                );
            }
        }
        p.positive("default_k", self.default_k);
        p.positive("max_k", self.max_k);
        p.at_most("default_k", self.default_k, self.max_k, "router.max_k");
        p.at_most(
            "max_k",
            self.max_k,
            limits::MAX_TOP_K,
            "the most hits a lane returns",
        );
        p.positive("lane_depth", self.lane_depth);
        p.positive("max_query_bytes", self.max_query_bytes);
        p.positive("max_batch_documents", self.max_batch_documents);
        p.positive("max_filter_conditions", self.max_filter_conditions);
        p.positive("max_filter_values", self.max_filter_values);
        if let Some(problem) = limits::shards_problem(self.max_shards) {
            p.add("max_shards", problem);
        }
        if let Some(problem) = limits::shards_problem(self.default_shards) {
            p.add("default_shards", problem);
        }
        p.at_most(
            "default_shards",
            self.default_shards,
            self.max_shards,
            "router.max_shards",
        );
        if let Some(problem) = limits::replication_problem(self.default_replication) {
            p.add("default_replication", problem);
        }
        p.at_most(
            "write_quorum",
            self.write_quorum,
            limits::MAX_REPLICATION,
            "the largest replica set",
        );
        if let Some((key, problem)) = self.chunking.problem() {
            p.add(&format!("chunking.{key}"), problem);
        }
        if self.default_tenant.is_empty() {
            p.add("default_tenant", "must not be empty");
        }
        p.positive("replicas.deadline_ms", self.replicas.deadline_ms);
        p.positive(
            "replicas.write_deadline_ms",
            self.replicas.write_deadline_ms,
        );
        p.positive("meta_poll_ms", self.meta_poll_ms);
        p.positive("metrics_label_cap", self.metrics_label_cap);
        if !(self.payload_inline_factor.is_finite() && self.payload_inline_factor >= 0.0) {
            p.add(
                "payload_inline_factor",
                format!("must be a number ≥ 0 (got {})", self.payload_inline_factor),
            );
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metrics_label_cap_of_zero_is_refused() {
        assert!(RouterConfig::default().problems().is_empty());
        let config = RouterConfig {
            metrics_label_cap: 0,
            ..RouterConfig::default()
        };
        let problems = config.problems().into_vec();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("router.metrics_label_cap")),
            "{problems:?}"
        );
    }

    #[test]
    fn lane_weights_name_a_lane_and_are_not_negative() {
        let config: RouterConfig =
            serde_json::from_str(r#"{"lane_weights": {"dense": 0.5, "bm25": 1.0}}"#).unwrap();
        assert!(config.problems().is_empty());
        for bad in [r#"{"dense": -1.0}"#, r#"{"sparse": 1.0}"#] {
            let config: RouterConfig =
                serde_json::from_str(&format!(r#"{{"lane_weights": {bad}}}"#)).unwrap();
            let problems = config.problems().into_vec();
            assert!(
                problems.iter().any(|p| p.contains("router.lane_weights")),
                "{bad}: {problems:?}"
            );
        }
    }
}
