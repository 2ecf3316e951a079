//! Fetch only what is returned: the fan-out carries ids, scores and lane ranks; after fusion the router asks each
//! shard for the title, text and metadata of the hits it keeps (qdrant's second fetch step, quickwit's fetch of
//! docs at the root). With `lane_depth` 50, two lanes and S shards, a search used to receive up to 100 × S chunk
//! payloads to return 10.
//!
//! The fetch goes first to the replica that answered the search (it holds exactly those chunks), then to the
//! others. A hit whose chunk is gone by then (its document deleted or re-written since) is dropped; a shard none
//! of whose replicas answers the fetch is reported missing like a shard that failed the search.

use std::collections::{BTreeMap, HashMap};

use attest_proto::v1 as pb;
use tracing::warn;

use crate::collection::CollectionRecord;
use crate::replicas::{call_any, ShardCall};
use crate::router::Router;

/// Fills every list of `lists` (fused hits without payloads, one list per search of a batch) from their
/// shards, with one fetch per shard for all of them; drops hits whose chunk is no longer live and adds the
/// shards that could not be reached to `missing_shards`.
pub async fn fill_payloads(
    router: &Router,
    rec: &CollectionRecord,
    tenant: &str,
    lists: &mut [Vec<pb::Hit>],
    answered_by: &HashMap<u32, u64>,
    missing_shards: &mut Vec<u32>,
    request_id: &str,
) {
    // Chunk id → doc id per shard: a chunk several searches of a batch returned is fetched once.
    let mut by_shard: BTreeMap<u32, BTreeMap<&str, &str>> = BTreeMap::new();
    for h in lists.iter().flatten() {
        by_shard
            .entry(h.shard)
            .or_default()
            .insert(&h.chunk_id, &h.doc_id);
    }
    let calls = by_shard.into_iter().map(|(shard, chunks)| {
        let chunks = chunks
            .into_iter()
            .map(|(chunk_id, doc_id)| pb::ChunkRef {
                doc_id: doc_id.to_string(),
                chunk_id: chunk_id.to_string(),
            })
            .collect();
        let replicas = router.view.replicas_for_follow_up(
            rec,
            shard as usize,
            answered_by.get(&shard).copied(),
        );
        let call = ShardCall::FetchChunks {
            request_id: request_id.to_string(),
            req: pb::FetchChunksRequest {
                collection: rec.name.clone(),
                shard,
                tenant: tenant.to_string(),
                chunks,
            },
        };
        let policy = &router.config.replicas;
        async move {
            let result = call_any(&replicas, call, policy)
                .await
                .and_then(|(resp, _)| pb::FetchChunksResponse::try_from(resp));
            (shard, result)
        }
    });
    let mut payloads: HashMap<(u32, String), pb::ChunkPayload> = HashMap::new();
    for (shard, result) in futures::future::join_all(calls).await {
        match result {
            Ok(resp) => payloads.extend(
                resp.chunks
                    .into_iter()
                    .map(|c| ((shard, c.chunk_id.clone()), c)),
            ),
            Err(status) => {
                warn!(shard, error = %status, event = "shard_fetch_failed", "shard's hits left out of results");
                missing_shards.push(shard);
            }
        }
    }
    missing_shards.sort_unstable();
    missing_shards.dedup();
    for hits in lists.iter_mut() {
        hits.retain_mut(|h| match payloads.get(&(h.shard, h.chunk_id.clone())) {
            Some(p) => {
                h.title.clone_from(&p.title);
                h.text.clone_from(&p.text);
                h.metadata_json.clone_from(&p.metadata_json);
                true
            }
            None => false,
        });
    }
}
