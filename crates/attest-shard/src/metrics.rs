//! Shard gauges (`shard_chunks`, `shard_segments`, `attest_search_recall_estimate` per collection and shard), read
//! from the engines when `/metrics` is scraped rather than updated on every write or search.

use attest_telemetry::metrics::{
    SEARCH_RECALL_ESTIMATE, SEARCH_RECALL_SAMPLES, SHARD_CHUNKS, SHARD_SEGMENTS,
};

use crate::node::ShardNode;

impl ShardNode {
    /// Sets the shard gauges of every replica this node hosts.
    pub fn publish_metrics(&self) {
        for ((collection, shard), engine) in self.replicas() {
            let stats = engine.stats();
            let labels = [
                ("collection", collection.clone()),
                ("shard", shard.to_string()),
            ];
            metrics::gauge!(SHARD_CHUNKS, &labels)
                .set((stats.growing_rows + stats.sealed_rows) as f64);
            metrics::gauge!(SHARD_SEGMENTS, &labels).set(f64::from(stats.sealed_segments));
            if let Some(recall) = stats.recall {
                metrics::gauge!(SEARCH_RECALL_ESTIMATE, &labels).set(recall.recall);
                metrics::gauge!(SEARCH_RECALL_SAMPLES, &labels).set(recall.samples as f64);
            }
        }
    }
}
