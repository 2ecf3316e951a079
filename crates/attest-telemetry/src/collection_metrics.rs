//! Per-collection and per-tenant metrics (request counts and latencies by outcome, abstentions, ingest bytes and
//! documents) with bounded label cardinality. Collection and tenant names come from callers, so every series
//! would otherwise be one a caller can mint: [`LabelCap`] admits the first N distinct values of a label and
//! reports the rest as [`OTHER`]. The router and the answer tier both record through [`CollectionMetrics`], so
//! the rule is the same on every front.

use std::collections::HashSet;
use std::time::Duration;

use parking_lot::RwLock;

/// Requests by collection, tenant, operation (`OP_*`) and outcome (`code`: `OK` or the error code).
pub const COLLECTION_REQUESTS_TOTAL: &str = "attest_collection_requests_total";
/// Latency of those requests, labels `collection`, `tenant`, `op`.
pub const COLLECTION_REQUEST_SECONDS: &str = "attest_collection_request_seconds";
/// Turns that ended without a grounded answer, labels `collection`, `tenant`, `reason` (as
/// `rag_abstention_total{reason}`).
pub const COLLECTION_ABSTENTIONS_TOTAL: &str = "attest_collection_abstentions_total";
/// UTF-8 bytes of the title and text of the documents stored, labels `collection`, `tenant`.
pub const COLLECTION_INGEST_BYTES_TOTAL: &str = "attest_collection_ingest_bytes_total";
/// Documents stored (near-duplicates and superseded ids not counted), labels `collection`, `tenant`.
pub const COLLECTION_INGEST_DOCUMENTS_TOTAL: &str = "attest_collection_ingest_documents_total";

/// Values of the `op` label.
pub const OP_SEARCH: &str = "search";
pub const OP_SEARCH_BATCH: &str = "search_batch";
pub const OP_INGEST: &str = "ingest";
pub const OP_DELETE: &str = "delete";
pub const OP_ASK: &str = "ask";

/// The `code` of a request that succeeded (errors carry their `ErrorCode`, e.g. `NOT_FOUND`).
pub const CODE_OK: &str = "OK";
/// The `code` that does not take a collection slot: a name that does not exist must not crowd out real ones.
const CODE_NOT_FOUND: &str = "NOT_FOUND";

/// The label value of every value past the cap.
pub const OTHER: &str = "other";
/// The `tenant` of an ingest request that wrote to several tenants.
pub const MIXED: &str = "mixed";
/// Distinct values admitted per label unless configured (`router.metrics_label_cap`, `answer.metrics_label_cap`).
pub const DEFAULT_LABEL_CAP: usize = 100;

/// At most `cap` distinct values of one label, first come first served; any later value reads [`OTHER`]. Values
/// are never evicted: a series that changed its label value mid-life would break every rate over it.
#[derive(Debug)]
pub struct LabelCap {
    cap: usize,
    admitted: RwLock<HashSet<String>>,
}

impl LabelCap {
    pub fn new(cap: usize) -> Self {
        LabelCap {
            cap,
            admitted: RwLock::new(HashSet::new()),
        }
    }

    /// The label value for `value`: itself when admitted (now or before), else [`OTHER`].
    pub fn label(&self, value: &str) -> String {
        // The read lock serves every admitted value; the write lock is taken only while slots are left.
        if self.admitted.read().contains(value) {
            return value.to_string();
        }
        let mut admitted = self.admitted.write();
        if admitted.contains(value) || admitted.len() < self.cap {
            admitted.insert(value.to_string());
            return value.to_string();
        }
        OTHER.to_string()
    }

    /// `value` if it was admitted before, else [`OTHER`]; never takes a slot.
    pub fn existing(&self, value: &str) -> String {
        if self.admitted.read().contains(value) {
            value.to_string()
        } else {
            OTHER.to_string()
        }
    }
}

/// What one front records per collection and tenant, each label under its own [`LabelCap`].
#[derive(Debug)]
pub struct CollectionMetrics {
    collections: LabelCap,
    tenants: LabelCap,
}

impl CollectionMetrics {
    /// Admits up to `cap` collections and `cap` tenants.
    pub fn new(cap: usize) -> Self {
        crate::metrics::install();
        CollectionMetrics {
            collections: LabelCap::new(cap),
            tenants: LabelCap::new(cap),
        }
    }

    fn labels(&self, collection: &str, tenant: &str) -> (String, String) {
        let tenant = if tenant == MIXED {
            MIXED.to_string()
        } else {
            self.tenants.label(tenant)
        };
        (self.collections.label(collection), tenant)
    }

    /// One request: its outcome (`CODE_OK` or the error code) and how long it took.
    pub fn request(
        &self,
        op: &'static str,
        collection: &str,
        tenant: &str,
        code: &'static str,
        elapsed: Duration,
    ) {
        let (collection, tenant) = if code == CODE_NOT_FOUND {
            (
                self.collections.existing(collection),
                self.tenants.existing(tenant),
            )
        } else {
            self.labels(collection, tenant)
        };
        metrics::counter!(COLLECTION_REQUESTS_TOTAL,
            "collection" => collection.clone(), "tenant" => tenant.clone(), "op" => op, "code" => code)
        .increment(1);
        metrics::histogram!(COLLECTION_REQUEST_SECONDS,
            "collection" => collection, "tenant" => tenant, "op" => op)
        .record(elapsed.as_secs_f64());
    }

    /// One turn that ended without a grounded answer.
    pub fn abstention(&self, collection: &str, tenant: &str, reason: &'static str) {
        let (collection, tenant) = self.labels(collection, tenant);
        metrics::counter!(COLLECTION_ABSTENTIONS_TOTAL,
            "collection" => collection, "tenant" => tenant, "reason" => reason)
        .increment(1);
    }

    /// Documents stored for one tenant of a collection, and their bytes.
    pub fn ingested(&self, collection: &str, tenant: &str, documents: u64, bytes: u64) {
        let (collection, tenant) = self.labels(collection, tenant);
        metrics::counter!(COLLECTION_INGEST_DOCUMENTS_TOTAL,
            "collection" => collection.clone(), "tenant" => tenant.clone())
        .increment(documents);
        metrics::counter!(COLLECTION_INGEST_BYTES_TOTAL,
            "collection" => collection, "tenant" => tenant)
        .increment(bytes);
    }
}

/// The help text of each metric (called once, when the recorder is installed).
pub(crate) fn describe() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_counter!(
        COLLECTION_REQUESTS_TOTAL,
        "Requests by collection, tenant, operation and outcome code (OK or the error code)."
    );
    describe_histogram!(
        COLLECTION_REQUEST_SECONDS,
        Unit::Seconds,
        "Latency of requests by collection, tenant and operation."
    );
    describe_counter!(
        COLLECTION_ABSTENTIONS_TOTAL,
        "Answers abstained by collection, tenant and reason."
    );
    describe_counter!(
        COLLECTION_INGEST_BYTES_TOTAL,
        "Bytes of title and text of the documents stored, by collection and tenant."
    );
    describe_counter!(
        COLLECTION_INGEST_DOCUMENTS_TOTAL,
        "Documents stored, by collection and tenant."
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_first_n_values_are_admitted_and_the_rest_are_other() {
        let cap = LabelCap::new(3);
        assert_eq!(cap.label("a"), "a");
        assert_eq!(cap.label("b"), "b");
        assert_eq!(cap.label("a"), "a", "a value seen again takes no new slot");
        assert_eq!(cap.label("c"), "c");
        assert_eq!(cap.label("d"), OTHER);
        assert_eq!(cap.label("e"), OTHER);
        assert_eq!(cap.label("b"), "b", "admitted values stay admitted");
        assert_eq!(cap.existing("c"), "c");
        assert_eq!(cap.existing("d"), OTHER);
    }

    #[test]
    fn existing_takes_no_slot() {
        let cap = LabelCap::new(1);
        assert_eq!(cap.existing("missing"), OTHER);
        assert_eq!(cap.label("real"), "real");
        assert_eq!(cap.label("missing"), OTHER);
    }

    #[test]
    fn a_cap_of_zero_reports_everything_as_other() {
        let cap = LabelCap::new(0);
        assert_eq!(cap.label("a"), OTHER);
    }

    #[test]
    fn concurrent_callers_admit_exactly_cap_values() {
        let cap = Arc::new(LabelCap::new(10));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let cap = Arc::clone(&cap);
                std::thread::spawn(move || {
                    (0..50)
                        .map(|i| cap.label(&format!("v{}", (i * 7 + t) % 40)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for t in threads {
            seen.extend(t.join().expect("thread"));
        }
        assert!(seen.remove(OTHER));
        assert_eq!(seen.len(), 10, "{seen:?}");
        // Every value that was ever returned is still admitted: no value flips between itself and `other`.
        for v in &seen {
            assert_eq!(&cap.label(v), v);
        }
    }

    #[test]
    fn collections_are_recorded_apart_and_not_found_takes_no_slot() {
        let m = CollectionMetrics::new(2);
        let ms = Duration::from_millis(1);
        m.request(OP_SEARCH, "unit-missing", "t", CODE_NOT_FOUND, ms);
        m.request(OP_SEARCH, "unit-a", "t", CODE_OK, ms);
        m.request(OP_SEARCH, "unit-a", "t", CODE_OK, ms);
        m.request(OP_SEARCH, "unit-b", "t", CODE_OK, ms);
        m.request(OP_SEARCH, "unit-c", "t", CODE_OK, ms);
        m.ingested("unit-a", "t", 2, 10);
        m.abstention("unit-b", "t", "no_evidence");
        let text = crate::metrics::render();
        let scrape =
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("text");
        let count = |name: &str, collection: &str| -> f64 {
            scrape
                .samples
                .iter()
                .filter(|s| s.metric == name && s.labels.get("collection") == Some(collection))
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v) => v,
                    _ => 0.0,
                })
                .sum()
        };
        assert_eq!(count(COLLECTION_REQUESTS_TOTAL, "unit-a"), 2.0);
        assert_eq!(count(COLLECTION_REQUESTS_TOTAL, "unit-b"), 1.0);
        assert_eq!(count(COLLECTION_REQUESTS_TOTAL, "unit-c"), 0.0);
        assert_eq!(count(COLLECTION_REQUESTS_TOTAL, "unit-missing"), 0.0);
        assert!(count(COLLECTION_REQUESTS_TOTAL, OTHER) >= 2.0);
        assert_eq!(count(COLLECTION_INGEST_DOCUMENTS_TOTAL, "unit-a"), 2.0);
        assert_eq!(count(COLLECTION_INGEST_BYTES_TOTAL, "unit-a"), 10.0);
        assert_eq!(count(COLLECTION_ABSTENTIONS_TOTAL, "unit-b"), 1.0);
        assert!(scrape
            .samples
            .iter()
            .any(|s| s.metric.starts_with(COLLECTION_REQUEST_SECONDS)
                && s.labels.get("collection") == Some("unit-a")));
    }
}
