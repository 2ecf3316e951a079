//! Replica catch-up: a replica that missed writes (it was down, a write to it timed out, or it is a new copy
//! made by a rebalance) copies from a peer every document the peer holds at a newer version. Versions are the
//! router's write versions, identical on every replica, and the engine keeps the newest, so catch-up can run
//! at any time, beside live writes, in any order, as often as wanted: it only ever moves a replica forward.

use std::sync::Arc;

use attest_index::ShardEngine;
use attest_proto::credential::Stamped;
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use tonic::Status;
use tracing::info;

use crate::convert::write_from_proto;
use crate::status::to_status;

/// Documents asked for per listing page and per fetch.
const PAGE: u32 = 1000;
const FETCH_BATCH: usize = 64;

/// What one catch-up pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatchUpReport {
    /// Entries the peer listed (all documents for a full pass, changed ones for an incremental one).
    pub listed: u64,
    /// Live documents copied because the peer's version was newer.
    pub copied: u64,
    /// Deletes copied.
    pub tombstones: u64,
    /// The peer's log position when the listing started: the next pass need only list what changed after it.
    pub peer_last_seq: u64,
}

/// Copies from `peer` every document of (collection, shard) it holds at a newer version than `engine`.
/// `changed_after_seq` = the `peer_last_seq` of an earlier complete pass against the same peer (0: all).
///
/// A peer whose log is now *behind* that position has started a new log (it came back with an empty disk under
/// the same name): its positions no longer compare with the remembered one, and an incremental listing would
/// skip every write it took since. The pass then lists everything.
pub async fn catch_up_from(
    engine: Arc<ShardEngine>,
    peer: &ShardServiceClient<Stamped>,
    collection: &str,
    shard: u32,
    changed_after_seq: u64,
) -> Result<CatchUpReport, Status> {
    let mut peer = peer.clone();
    let mut report = CatchUpReport::default();
    let mut after = String::new();
    let mut first = true;
    let mut changed_after_seq = changed_after_seq;
    loop {
        let page = peer
            .doc_versions(pb::DocVersionsRequest {
                collection: collection.to_string(),
                shard,
                after_doc_id: after.clone(),
                limit: PAGE,
                changed_after_seq,
            })
            .await?
            .into_inner();
        if first {
            if page.last_seq < changed_after_seq {
                info!(
                    collection,
                    shard,
                    remembered = changed_after_seq,
                    peer_last_seq = page.last_seq,
                    event = "peer_log_restarted",
                    "the peer's log is behind where it was: listing everything"
                );
                changed_after_seq = 0;
                continue;
            }
            // Writes that land on the peer after this point have larger seqs: the next pass lists them.
            report.peer_last_seq = page.last_seq;
            first = false;
        }
        report.listed += page.entries.len() as u64;
        // Version look-ups take the engine's state lock, which a write holds across its index commit: off the
        // async workers.
        let newer: Vec<pb::DocRef> = {
            let engine = Arc::clone(&engine);
            let entries = page.entries;
            tokio::task::spawn_blocking(move || {
                entries
                    .into_iter()
                    .filter(|e| e.version > engine.version_of(&e.tenant, &e.doc_id))
                    .map(|e| pb::DocRef {
                        tenant: e.tenant,
                        doc_id: e.doc_id,
                    })
                    .collect()
            })
            .await
            .map_err(|e| Status::internal(format!("catch-up worker failed: {e}")))?
        };
        for docs in newer.chunks(FETCH_BATCH) {
            let fetched = peer
                .fetch_documents(pb::FetchDocumentsRequest {
                    collection: collection.to_string(),
                    shard,
                    docs: docs.to_vec(),
                })
                .await?
                .into_inner();
            let (copied, tombstones) = (fetched.documents.len(), fetched.tombstones.len());
            let engine = Arc::clone(&engine);
            tokio::task::spawn_blocking(move || -> Result<(), Status> {
                let writes: Vec<_> = fetched
                    .documents
                    .into_iter()
                    .map(write_from_proto)
                    .collect();
                engine.upsert(writes).map_err(to_status)?;
                for t in fetched.tombstones {
                    engine
                        .delete_versioned(&t.tenant, &t.doc_id, t.version)
                        .map_err(to_status)?;
                }
                Ok(())
            })
            .await
            .map_err(|e| Status::internal(format!("catch-up worker failed: {e}")))??;
            report.copied += copied as u64;
            report.tombstones += tombstones as u64;
        }
        if page.next_after.is_empty() {
            break;
        }
        after = page.next_after;
    }
    if report.copied + report.tombstones > 0 {
        info!(
            collection,
            shard,
            copied = report.copied,
            tombstones = report.tombstones,
            event = "replica_caught_up",
            "copied missed writes from a peer"
        );
    }
    Ok(report)
}
