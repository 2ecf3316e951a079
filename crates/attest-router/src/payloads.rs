//! Fetch only what is returned: the fan-out carries ids, scores and lane ranks; after fusion the router asks each
//! shard for the title, text and metadata of the hits it keeps (qdrant's second fetch step, quickwit's fetch of
//! docs at the root). With `lane_depth` 50, two lanes and S shards, a fan-out carrying payloads would receive up to
//! 100 × S chunk payloads to return 10.
//!
//! Most of what is returned comes with the search, though: each shard sends the payloads of its best few hits per
//! lane ([`payload_top`]), and only returned hits outside those are fetched — one round trip per shard for most
//! searches, and a fraction of the bytes of every payload in the fan-out.
//!
//! The fetch goes first to the replica that answered the search (it holds exactly those chunks), then to the
//! others. A hit whose chunk is gone by then (its document deleted or re-written since) is dropped; a shard none
//! of whose replicas answers the fetch is reported missing like a shard that failed the search.

use std::collections::{BTreeMap, HashMap};

use attest_proto::v1 as pb;
use tracing::warn;

use crate::collection::CollectionRecord;
use crate::fanout::FanOut;
use crate::replicas::{call_any, ShardCall};
use crate::shared::Shared;

/// How many hits of each lane a shard sends with their payloads, for a search returning `k` over `shards`
/// shards searched `depth` deep: `factor` times its even share of the `k` (0 when `factor` is 0).
pub fn payload_top(factor: f64, k: usize, shards: usize, depth: usize) -> u32 {
    if factor <= 0.0 || shards == 0 {
        return 0;
    }
    let share = (factor * k as f64 / shards as f64).ceil() as usize;
    share.min(depth) as u32
}

/// Every hit whose payload came with the fan-out, by (shard, chunk id): a batch's searches share them.
fn inlined_payloads(fans: &[FanOut]) -> HashMap<(u32, &str), &pb::LaneHit> {
    fans.iter()
        .flat_map(|f| f.dense.iter().chain(&f.bm25))
        .filter(|h| h.hit.has_payload)
        .map(|h| ((h.shard, h.hit.chunk_id.as_str()), &h.hit))
        .collect()
}

/// Fills every list of `lists` (the fused hits of `fans`, one list per search of a batch) from their shards,
/// with one fetch per shard for all of them, except the hits whose payload came with the fan-out; drops hits
/// whose chunk is no longer live and adds the shards that could not be reached to `missing_shards`.
pub async fn fill_payloads(
    router: &Shared,
    rec: &CollectionRecord,
    tenant: &str,
    lists: &mut [Vec<pb::Hit>],
    fans: &[FanOut],
    missing_shards: &mut Vec<u32>,
    request_id: &str,
) {
    let inlined = inlined_payloads(fans);
    let is_inlined = |h: &pb::Hit| inlined.contains_key(&(h.shard, h.chunk_id.as_str()));
    // Chunk id → doc id per shard: a chunk several searches of a batch returned is fetched once.
    let mut by_shard: BTreeMap<u32, BTreeMap<&str, &str>> = BTreeMap::new();
    for h in lists.iter().flatten().filter(|h| !is_inlined(h)) {
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
            fans.first()
                .and_then(|f| f.answered_by.get(&shard))
                .copied(),
        );
        let call = ShardCall::FetchChunks {
            request_id: request_id.to_string(),
            req: pb::FetchChunksRequest {
                collection: rec.stored_name.clone(),
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
    // Per shard, by chunk id: looked up by `&str`, no id copied per hit.
    let mut payloads: HashMap<u32, HashMap<String, pb::ChunkPayload>> = HashMap::new();
    for (shard, result) in futures::future::join_all(calls).await {
        match result {
            Ok(resp) => payloads
                .entry(shard)
                .or_default()
                .extend(resp.chunks.into_iter().map(|c| (c.chunk_id.clone(), c))),
            Err(status) => {
                warn!(shard, error = %status, event = "shard_fetch_failed", "shard's hits left out of results");
                missing_shards.push(shard);
            }
        }
    }
    missing_shards.sort_unstable();
    missing_shards.dedup();
    for hits in lists.iter_mut() {
        hits.retain_mut(|h| {
            let (title, text, metadata_json) =
                if let Some(p) = inlined.get(&(h.shard, h.chunk_id.as_str())) {
                    (&p.title, &p.text, &p.metadata_json)
                } else if let Some(p) = payloads
                    .get(&h.shard)
                    .and_then(|fetched| fetched.get(h.chunk_id.as_str()))
                {
                    (&p.title, &p.text, &p.metadata_json)
                } else {
                    return false;
                };
            h.title.clone_from(title);
            h.text.clone_from(text);
            h.metadata_json.clone_from(metadata_json);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::payload_top;

    #[test]
    fn each_shard_inlines_its_share_of_k_times_the_factor() {
        assert_eq!(payload_top(2.0, 10, 8, 50), 3);
        assert_eq!(payload_top(2.0, 10, 2, 50), 10);
        assert_eq!(
            payload_top(2.0, 100, 1, 50),
            50,
            "never past the lane depth"
        );
        assert_eq!(
            payload_top(0.0, 10, 2, 50),
            0,
            "factor 0: every payload fetched"
        );
        assert_eq!(payload_top(1.0, 1, 8, 50), 1, "a share is at least one hit");
    }
}
