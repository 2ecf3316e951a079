//! Metric names (docs/SPEC.md "Observability": the names are part of the interface) and the process-wide
//! Prometheus recorder. Every role installs the same recorder; in `attest dev` all roles share it, so one
//! `/metrics` shows the whole process.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Counters.
pub const EMBEDDING_REQUEST_TOTAL: &str = "embedding_request_total";
pub const EMBEDDING_FAIL_TOTAL: &str = "embedding_fail_total";
pub const EMBEDDING_FALLBACK_TOTAL: &str = "embedding_fallback_total";
pub const CIRCUIT_BREAKER_TRIP_TOTAL: &str = "circuit_breaker_trip_total";
pub const RAG_ABSTENTION_TOTAL: &str = "rag_abstention_total";
pub const TERMINOLOGY_LOOKUP_TOTAL: &str = "terminology_lookup_total";
pub const TERMINOLOGY_HIT_TOTAL: &str = "terminology_hit_total";
pub const TERMINOLOGY_MISS_TOTAL: &str = "terminology_miss_total";
pub const TERMINOLOGY_TIMEOUT_TOTAL: &str = "terminology_timeout_total";
pub const TERMINOLOGY_CACHE_HIT_TOTAL: &str = "terminology_cache_hit_total";
pub const CITATION_DROPPED_TOTAL: &str = "citation_dropped_total";
pub const CLAIMS_CHECKED_TOTAL: &str = "claims_checked_total";
pub const CLAIMS_UNSUPPORTED_TOTAL: &str = "claims_unsupported_total";
/// Texts embedded by `attest serve --role embedder` (server side; the client side is `embedding_request_total`).
pub const EMBED_SERVER_TEXTS_TOTAL: &str = "embed_server_texts_total";

/// Gauges.
pub const CIRCUIT_BREAKER_STATE: &str = "circuit_breaker_state";
pub const SHARD_CHUNKS: &str = "shard_chunks";
pub const SHARD_SEGMENTS: &str = "shard_segments";
/// A replica's live recall@k estimate (a sample of its searches run again exactly), labels `collection`, `shard`;
/// and the samples it is the mean of.
pub const SEARCH_RECALL_ESTIMATE: &str = "attest_search_recall_estimate";
pub const SEARCH_RECALL_SAMPLES: &str = "attest_search_recall_samples";
/// Free bytes of a data directory's filesystem, label `dir` (`crate::disk`).
pub const DISK_FREE_BYTES: &str = "disk_free_bytes";
/// 1 while a data directory is below its free-space reserve (writes refused), 0 otherwise; label `dir`.
pub const DISK_FULL: &str = "disk_full";
/// Write batches refused because a data directory was below its reserve; label `dir`.
pub const DISK_WRITES_REFUSED_TOTAL: &str = "disk_writes_refused_total";

/// Histogram of latency per stage, label `stage` (one of the `STAGE_*` values).
pub const STAGE_LATENCY_SECONDS: &str = "stage_latency_seconds";
pub const STAGE_EMBED: &str = "embed";
pub const STAGE_FANOUT: &str = "fanout";
pub const STAGE_SHARD_SEARCH: &str = "shard_search";
pub const STAGE_FUSE: &str = "fuse";
/// The router's fetch of the returned hits' payloads from their shards.
pub const STAGE_FETCH: &str = "fetch";
pub const STAGE_TOTAL: &str = "total";

/// The `service` label of the embedding circuit breaker.
pub const SERVICE_EMBEDDINGS: &str = "embeddings";

/// Latency buckets (seconds): 0.5 ms … 10 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder once per process and returns its handle. If another global recorder was
/// installed first (a test harness), the handle still renders, but only what this recorder saw.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(STAGE_LATENCY_SECONDS.into()), LATENCY_BUCKETS)
            .expect("non-empty bucket list")
            // Every call from a router to a shard replica (attest_router::replicas).
            .set_buckets_for_metric(
                Matcher::Full("router_replica_call_seconds".into()),
                LATENCY_BUCKETS,
            )
            .expect("non-empty bucket list")
            .set_buckets_for_metric(
                Matcher::Full(crate::collection_metrics::COLLECTION_REQUEST_SECONDS.into()),
                LATENCY_BUCKETS,
            )
            .expect("non-empty bucket list")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_ok() {
            describe();
        }
        handle
    })
}

/// The Prometheus text exposition of every metric recorded so far.
pub fn render() -> String {
    install().render()
}

/// Records how long one pipeline stage took.
pub fn observe_stage(stage: &'static str, elapsed: Duration) {
    metrics::histogram!(STAGE_LATENCY_SECONDS, "stage" => stage).record(elapsed.as_secs_f64());
}

/// Makes the embedding counters and the breaker gauge visible (at zero / closed) before the first request,
/// so dashboards and alerts see them from the start. Called by roles that embed queries.
pub fn register_embedding_metrics() {
    install();
    metrics::counter!(EMBEDDING_REQUEST_TOTAL).increment(0);
    metrics::counter!(EMBEDDING_FAIL_TOTAL).increment(0);
    metrics::counter!(EMBEDDING_FALLBACK_TOTAL).increment(0);
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        EMBEDDING_REQUEST_TOTAL,
        "Calls to an embedder (query and ingest)."
    );
    describe_counter!(
        EMBEDDING_FAIL_TOTAL,
        "Embedder calls that failed or timed out."
    );
    describe_counter!(
        EMBEDDING_FALLBACK_TOTAL,
        "Searches answered from BM25 alone because the query could not be embedded."
    );
    describe_counter!(
        CIRCUIT_BREAKER_TRIP_TOTAL,
        "Times a circuit breaker opened."
    );
    describe_gauge!(
        CIRCUIT_BREAKER_STATE,
        "Circuit breaker state: 0 closed, 1 half-open, 2 open."
    );
    describe_gauge!(SHARD_CHUNKS, "Live chunks per shard.");
    describe_gauge!(SHARD_SEGMENTS, "Sealed segments per shard.");
    describe_gauge!(
        SEARCH_RECALL_ESTIMATE,
        "Recall@k of a replica's dense searches, measured by running a sample of them again exactly."
    );
    describe_gauge!(
        SEARCH_RECALL_SAMPLES,
        "Samples the recall estimate is the mean of."
    );
    describe_gauge!(
        DISK_FREE_BYTES,
        "Free bytes of a data directory's filesystem."
    );
    describe_gauge!(
        DISK_FULL,
        "1 while a data directory is below its free-space reserve and writes are refused."
    );
    describe_counter!(
        DISK_WRITES_REFUSED_TOTAL,
        "Write batches refused because a data directory was below its free-space reserve."
    );
    describe_counter!(
        EMBED_SERVER_TEXTS_TOTAL,
        "Texts embedded by this embedding server."
    );
    crate::collection_metrics::describe();
    describe_histogram!(
        STAGE_LATENCY_SECONDS,
        Unit::Seconds,
        "Latency of one pipeline stage."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_text_parses_and_holds_recorded_values() {
        register_embedding_metrics();
        metrics::counter!(EMBEDDING_FALLBACK_TOTAL).increment(3);
        metrics::gauge!(CIRCUIT_BREAKER_STATE, "service" => SERVICE_EMBEDDINGS).set(2.0);
        observe_stage(STAGE_FUSE, Duration::from_micros(700));
        let text = render();
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
        let value = |name: &str| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == name)
                .map(|s| s.value.clone())
        };
        assert!(matches!(
            value(EMBEDDING_FALLBACK_TOTAL),
            Some(prometheus_parse::Value::Counter(c)) if c >= 3.0
        ));
        assert!(matches!(
            value(CIRCUIT_BREAKER_STATE),
            Some(prometheus_parse::Value::Gauge(g)) if g == 2.0
        ));
        assert!(value(EMBEDDING_REQUEST_TOTAL).is_some());
        assert!(scrape
            .samples
            .iter()
            .any(|s| s.metric == STAGE_LATENCY_SECONDS && s.labels.get("stage") == Some("fuse")));
    }
}
