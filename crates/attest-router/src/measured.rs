//! The router's operations as the fronts (HTTP and gRPC) call them: each runs its body (in [`crate::search`] and
//! [`crate::ingest`]) and records it per collection and tenant — requests by outcome and their latency, and for
//! ingest the documents and bytes stored (`attest_collection_*`, capped by `router.metrics_label_cap`). Recording
//! here rather than in each handler keeps both fronts counted alike.

use std::collections::BTreeMap;
use std::time::Instant;

use attest_proto::v1 as pb;
use attest_telemetry::collection_metrics::{
    CODE_OK, MIXED, OP_DELETE, OP_INGEST, OP_SEARCH, OP_SEARCH_BATCH,
};

use crate::error::RouterError;
use crate::ingest::{Ingest, IngestDocument, IngestReport};
use crate::search::Search;

/// The `code` label of an outcome.
fn code<T>(outcome: &Result<T, RouterError>) -> &'static str {
    match outcome {
        Ok(_) => CODE_OK,
        Err(e) => e.code().as_str(),
    }
}

impl Search {
    /// Runs a read of `collection`, and once more when it failed or came back without some shards while a
    /// re-embedding switched the collection to its copy: the first try reached the old collection's shards as
    /// their nodes dropped them, the second asks the collection the name resolves to now.
    async fn across_a_switch<T, Fut>(
        &self,
        collection: &str,
        complete: impl Fn(&T) -> bool,
        read: impl Fn() -> Fut,
    ) -> Result<T, RouterError>
    where
        Fut: std::future::Future<Output = Result<T, RouterError>>,
    {
        // Only a collection with a copy being built can switch: a failed read of any other is not worth a meta
        // refresh (unless the view already moved the name while the read ran).
        let before = self
            .shared
            .view
            .get_with_copy(collection)
            .map(|(rec, copy)| (rec.stored_name, copy.is_some()))
            .ok();
        let outcome = read().await;
        if outcome.as_ref().is_ok_and(&complete) {
            return outcome;
        }
        let moved = |before: &str| {
            self.shared
                .view
                .get(collection)
                .is_ok_and(|rec| rec.stored_name != before)
        };
        match before {
            Some((before, had_copy))
                if (had_copy || moved(&before))
                    && self.shared.switched_from(collection, &before).await =>
            {
                read().await
            }
            _ => outcome,
        }
    }

    /// Hybrid search: validate, embed the query (BM25 alone if that fails), fan out, merge each lane, fuse.
    pub async fn run(
        &self,
        req: pb::SearchRequest,
        request_id: String,
    ) -> Result<pb::SearchResponse, RouterError> {
        let (collection, tenant) = (req.collection.clone(), self.tenant_of(&req));
        let started = Instant::now();
        let outcome = self
            .across_a_switch(
                &collection,
                |r: &pb::SearchResponse| r.missing_shards.is_empty(),
                || self.search_unmeasured(req.clone(), request_id.clone()),
            )
            .await;
        self.shared.metrics.request(
            OP_SEARCH,
            &collection,
            &tenant,
            code(&outcome),
            started.elapsed(),
        );
        outcome
    }

    /// Several searches of one collection and tenant as one (the answer tier's retrieval hops): one embedding
    /// call, one round trip per shard, one payload fetch per shard.
    pub async fn batch(
        &self,
        reqs: Vec<pb::SearchRequest>,
        request_id: String,
    ) -> Result<pb::SearchBatchResponse, RouterError> {
        // Every search of a batch names the same collection and tenant (the body refuses one that does not).
        let labels = reqs
            .first()
            .map(|r| (r.collection.clone(), self.tenant_of(r)));
        let started = Instant::now();
        let collection = labels.as_ref().map(|(c, _)| c.clone()).unwrap_or_default();
        let complete =
            |r: &pb::SearchBatchResponse| r.results.iter().all(|r| r.missing_shards.is_empty());
        let outcome = self
            .across_a_switch(&collection, complete, || {
                self.search_batch_unmeasured(reqs.clone(), request_id.clone())
            })
            .await;
        if let Some((collection, tenant)) = labels {
            self.shared.metrics.request(
                OP_SEARCH_BATCH,
                &collection,
                &tenant,
                code(&outcome),
                started.elapsed(),
            );
        }
        outcome
    }
}

impl Ingest {
    /// Validates every document (one bad document fails the whole request and nothing is written), drops near
    /// duplicates, chunks, embeds and writes each document to its shard. Returns once every shard acknowledged
    /// durably.
    pub async fn run(
        &self,
        collection: &str,
        docs: Vec<IngestDocument>,
        request_id: &str,
    ) -> Result<IngestReport, RouterError> {
        // Each document's tenant and size, by its position: the report names refusals by position.
        let sizes: Vec<(String, u64)> = docs
            .iter()
            .map(|d| {
                let tenant = self
                    .shared
                    .config
                    .tenant_or_default(d.source.tenant.as_deref())
                    .to_string();
                (tenant, (d.source.title.len() + d.source.text.len()) as u64)
            })
            .collect();
        let tenant = match sizes.first() {
            None => self.shared.config.default_tenant.as_str(),
            Some((first, _)) if sizes.iter().all(|(t, _)| t == first) => first.as_str(),
            Some(_) => MIXED,
        };
        let started = Instant::now();
        let outcome = self.ingest_unmeasured(collection, docs, request_id).await;
        self.shared.metrics.request(
            OP_INGEST,
            collection,
            tenant,
            code(&outcome),
            started.elapsed(),
        );
        if let Ok(report) = &outcome {
            let mut refused = vec![false; sizes.len()];
            for i in report
                .duplicates
                .iter()
                .map(|(i, _)| *i)
                .chain(report.rejected.iter().map(|(i, _)| *i))
            {
                if let Some(r) = refused.get_mut(i) {
                    *r = true;
                }
            }
            let mut stored: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
            for ((tenant, bytes), _) in sizes.iter().zip(&refused).filter(|(_, r)| !**r) {
                let entry = stored.entry(tenant.as_str()).or_default();
                entry.0 += 1;
                entry.1 += bytes;
            }
            for (tenant, (documents, bytes)) in stored {
                self.shared
                    .metrics
                    .ingested(collection, tenant, documents, bytes);
            }
        }
        outcome
    }

    /// Deletes every chunk of a document from its tenant; `Ok(false)` when no replica held it.
    pub async fn delete(
        &self,
        collection: &str,
        tenant: Option<&str>,
        doc_id: &str,
        request_id: &str,
    ) -> Result<bool, RouterError> {
        let label = self.shared.config.tenant_or_default(tenant).to_string();
        let started = Instant::now();
        let outcome = self
            .delete_document_unmeasured(collection, tenant, doc_id, request_id)
            .await;
        self.shared.metrics.request(
            OP_DELETE,
            collection,
            &label,
            code(&outcome),
            started.elapsed(),
        );
        outcome
    }
}
