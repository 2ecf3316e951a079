//! Shard gauges (`shard_chunks`, `shard_segments` per collection and shard), read from the engines when
//! `/metrics` is scraped rather than updated on every write.

use attest_telemetry::metrics::{SHARD_CHUNKS, SHARD_SEGMENTS};

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
        }
    }
}
