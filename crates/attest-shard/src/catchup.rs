//! Replica catch-up: a replica that missed writes (it was down, a write to it timed out, or it is a new copy
//! made by a rebalance) copies from a peer every document the peer holds at a newer version. Versions are the
//! router's write versions, identical on every replica, and the engine keeps the newest, so catch-up can run
//! at any time, beside live writes, in any order, as often as wanted: it only ever moves a replica forward.

use std::sync::Arc;

use attest_index::ShardEngine;
use attest_proto::credential::Stamped;
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use serde::{Deserialize, Serialize};
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
    /// Listing pages asked for: a full pass reads every document of the peer, an incremental one the changes.
    pub pages: u64,
    /// Live documents copied because the peer's version was newer.
    pub copied: u64,
    /// Deletes copied.
    pub tombstones: u64,
    /// The peer's log position when the listing started: the next pass need only list what changed after it.
    pub peer_last_seq: u64,
}

/// Where catch-up from one peer stands, kept from pass to pass. A pass cut short (its timeout) leaves behind the
/// pages it applied, and the next pass goes on after them: restarted from the first page each time, a full listing
/// longer than a pass may take never finished (1.67M documents a replica at 10M vectors: every pass after a
/// restart timed out at 30 s and began again).
///
/// The cluster agent keeps it in the replica's log ([`PeerCursor::to_note`]), so that a restarted node goes on
/// from it too: forgotten, every restart listed every peer's documents in full (2.5 min of CPU at 10M vectors).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerCursor {
    /// The peer's log position when the last complete listing began (0: none complete): the next listing need
    /// only hold what changed after it.
    pub complete_through: u64,
    /// A listing not finished yet.
    pub under_way: Option<Listing>,
    /// The peer's log those positions are in (0: not known yet, or a peer from before log ids).
    #[serde(default)]
    pub peer_log_id: u64,
}

/// A listing of a peer's documents under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    /// What it lists: documents changed after this position (0: all).
    pub changed_after_seq: u64,
    /// The peer's log position when its first page was read; the listing's `complete_through` once it ends.
    pub peer_last_seq: u64,
    /// The page cursor after the last page applied.
    pub after: String,
}

impl Listing {
    /// A new listing of the documents changed after position `seq` (0: all), from its first page.
    fn after(seq: u64) -> Self {
        Listing {
            changed_after_seq: seq,
            peer_last_seq: 0,
            after: String::new(),
        }
    }
}

impl PeerCursor {
    /// A cursor after a complete listing that began at position `seq` of the peer's log `peer_log_id`.
    pub fn complete_through(seq: u64, peer_log_id: u64) -> Self {
        PeerCursor {
            complete_through: seq,
            under_way: None,
            peer_log_id,
        }
    }

    /// The cursor as the note the replica's log keeps on the peer ([`ShardEngine::keep_peer_note`]).
    pub fn to_note(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a cursor serializes")
    }

    /// The cursor a note holds; a note this build cannot read is no cursor (the next pass lists everything).
    pub fn from_note(note: &[u8]) -> Option<Self> {
        serde_json::from_slice(note).ok()
    }
}

/// Copies from `peer` every document of (collection, shard) it holds at a newer version than `engine`: all of
/// them when `cursor` has no complete listing, else those it changed since; a listing under way goes on after its
/// last page. `cursor` moves as pages are applied, so a pass dropped at any await leaves it where it got to.
///
/// A peer that answers from another log than the cursor's (it came back with an empty disk under the same name,
/// or from a snapshot), or whose log is now *behind* the position a listing started from (a peer from before log
/// ids), has started a new log: its positions no longer compare with the remembered one, and an incremental
/// listing would skip the writes it took at positions already passed. The pass then lists everything.
pub async fn catch_up_from(
    engine: Arc<ShardEngine>,
    peer: &ShardServiceClient<Stamped>,
    collection: &str,
    shard: u32,
    cursor: &mut PeerCursor,
) -> Result<CatchUpReport, Status> {
    let mut peer = peer.clone();
    let mut report = CatchUpReport::default();
    let mut listing = cursor
        .under_way
        .clone()
        .unwrap_or_else(|| Listing::after(cursor.complete_through));
    let mut first = true;
    loop {
        let page = peer
            .doc_versions(pb::DocVersionsRequest {
                collection: collection.to_string(),
                shard,
                after_doc_id: listing.after.clone(),
                limit: PAGE,
                changed_after_seq: listing.changed_after_seq,
            })
            .await?
            .into_inner();
        if first {
            // A new listing is checked against the position it lists after, one under way against where it began.
            let began = match cursor.under_way {
                Some(_) => listing.peer_last_seq,
                None => listing.changed_after_seq,
            };
            let other_log = cursor.peer_log_id != 0 && page.log_id != cursor.peer_log_id;
            if other_log || page.last_seq < began {
                info!(
                    collection,
                    shard,
                    remembered = began,
                    peer_last_seq = page.last_seq,
                    remembered_log = cursor.peer_log_id,
                    peer_log = page.log_id,
                    event = "peer_log_restarted",
                    "the peer writes a new log: listing everything"
                );
                *cursor = PeerCursor::default();
                listing = Listing::after(0);
                continue;
            }
            cursor.peer_log_id = page.log_id;
            if cursor.under_way.is_none() {
                // Writes that land on the peer after this point have larger seqs: the next listing holds them.
                listing.peer_last_seq = page.last_seq;
                cursor.under_way = Some(listing.clone());
            }
            report.peer_last_seq = listing.peer_last_seq;
            first = false;
        }
        report.listed += page.entries.len() as u64;
        report.pages += 1;
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
            *cursor = PeerCursor::complete_through(listing.peer_last_seq, cursor.peer_log_id);
            break;
        }
        listing.after = page.next_after;
        cursor.under_way = Some(listing.clone());
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
