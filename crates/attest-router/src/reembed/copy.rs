//! One pass of a re-embedding over one shard: what the copy lacks of the collection's shard, written to it with
//! new vectors.
//!
//! The pass lists the copy's document versions first (every page; a few dozen bytes per document), then the
//! collection's page by page. A live document the copy lacks, or holds at an older version, is fetched (its
//! chunks, their texts and its version), embedded by the copy's model and written to the copy at its version; a
//! document the collection deleted after the copy's version is deleted in the copy at the tombstone's version.
//! The first pass copies everything (less what mirrored writes already put there); a later pass repairs only
//! what mirroring missed. Writes racing the pass are safe both ways: the shards keep the newer version.

use std::collections::HashMap;

use attest_proto::v1 as pb;

use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::reembed::Reembed;
use crate::reembed::ReembedTracker;
use crate::replicas::{call_any, ShardCall};

/// Documents fetched, embedded and written per step (bounds the memory and the embedding batch of one step,
/// and how long a cancel waits).
const DOCUMENTS_PER_STEP: usize = 64;
/// Versions listed per page.
const VERSIONS_PAGE: u32 = 5_000;

/// (tenant, document id) → (version, deleted).
type Versions = HashMap<(String, String), (u64, bool)>;

impl Reembed {
    /// One pass over `shard`: returns how many documents it wrote or deleted in the copy.
    pub(crate) async fn copy_shard(
        &self,
        old: &CollectionRecord,
        copy: &CollectionRecord,
        shard: u32,
        pass: u32,
        tracker: &ReembedTracker,
        request_id: &str,
    ) -> Result<u64, RouterError> {
        let mut held = Versions::new();
        let mut after = String::new();
        loop {
            let page = self.versions_page(copy, shard, &after, request_id).await?;
            for e in page.entries {
                held.insert((e.tenant, e.doc_id), (e.version, e.deleted));
            }
            if page.next_after.is_empty() {
                break;
            }
            after = page.next_after;
        }

        let (mut live, mut written) = (0u64, 0u64);
        let mut after = String::new();
        loop {
            if tracker.is_cancelled() {
                return Err(super::cancelled());
            }
            let page = self.versions_page(old, shard, &after, request_id).await?;
            let mut missing = Vec::new();
            for e in page.entries {
                let in_copy = held.get(&(e.tenant.clone(), e.doc_id.clone())).copied();
                let newer = in_copy.is_none_or(|(version, _)| version < e.version);
                if e.deleted {
                    if newer && in_copy.is_some_and(|(_, deleted)| !deleted) {
                        self.ingest
                            .delete_at(copy, &e.tenant, &e.doc_id, e.version, request_id)
                            .await?;
                        written += 1;
                    }
                    continue;
                }
                live += 1;
                if newer {
                    missing.push(pb::DocRef {
                        tenant: e.tenant,
                        doc_id: e.doc_id,
                    });
                }
            }
            for step in missing.chunks(DOCUMENTS_PER_STEP) {
                if tracker.is_cancelled() {
                    return Err(super::cancelled());
                }
                let n = self
                    .copy_documents(old, copy, shard, step.to_vec(), request_id)
                    .await?;
                written += n;
                tracker.update(|j| {
                    if let Some(s) = j.shards.get_mut(shard as usize) {
                        s.copied += n;
                        if pass > 1 {
                            s.repaired += n;
                        }
                    }
                });
            }
            // The count so far, so that a long first pass shows its total growing, not 0 (a later pass keeps
            // the last pass's count until it has listed more).
            tracker.update(|j| {
                if let Some(s) = j.shards.get_mut(shard as usize) {
                    s.documents = s.documents.max(live);
                }
            });
            if page.next_after.is_empty() {
                break;
            }
            after = page.next_after;
        }
        tracker.update(|j| {
            if let Some(s) = j.shards.get_mut(shard as usize) {
                s.documents = live;
            }
        });
        Ok(written)
    }

    /// One page of a shard's document versions, from any replica that answers.
    async fn versions_page(
        &self,
        rec: &CollectionRecord,
        shard: u32,
        after: &str,
        request_id: &str,
    ) -> Result<pb::DocVersionsResponse, RouterError> {
        let replicas = self.shared.view.read_replicas(rec, shard as usize);
        let call = ShardCall::DocVersions {
            request_id: request_id.to_string(),
            req: pb::DocVersionsRequest {
                collection: rec.stored_name.clone(),
                shard,
                after_doc_id: after.to_string(),
                limit: VERSIONS_PAGE,
                changed_after_seq: 0,
            },
        };
        let (resp, _) = call_any(&replicas, call, &self.shared.config.replicas)
            .await
            .map_err(RouterError::from_status)?;
        resp.try_into().map_err(RouterError::from_status)
    }

    /// Fetches documents from the collection, embeds their chunks with the copy's model and writes them to the
    /// copy at their versions; returns how many it wrote (a document deleted since it was listed is skipped).
    async fn copy_documents(
        &self,
        old: &CollectionRecord,
        copy: &CollectionRecord,
        shard: u32,
        docs: Vec<pb::DocRef>,
        request_id: &str,
    ) -> Result<u64, RouterError> {
        let replicas = self.shared.view.read_replicas(old, shard as usize);
        let call = ShardCall::FetchDocuments {
            request_id: request_id.to_string(),
            req: pb::FetchDocumentsRequest {
                collection: old.stored_name.clone(),
                shard,
                docs,
            },
        };
        let (resp, _) = call_any(&replicas, call, &self.shared.config.replicas)
            .await
            .map_err(RouterError::from_status)?;
        let fetched: pb::FetchDocumentsResponse =
            resp.try_into().map_err(RouterError::from_status)?;
        if fetched.documents.is_empty() {
            return Ok(0);
        }
        let n = fetched.documents.len() as u64;
        let documents = self
            .ingest
            .reembedded(copy, fetched.documents, request_id)
            .await?;
        self.ingest
            .write_documents(copy, documents, request_id)
            .await?;
        Ok(n)
    }
}
