//! Fan-out of one search, or a batch of them, to every shard of a collection, the global merge of each lane, and fusion by RRF.

use std::collections::HashMap;

use attest_proto::v1 as pb;
use tracing::warn;

use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::replicas::{call_any, ShardCall};
use crate::rrf::{reciprocal_rank_fusion, RankedLane};
use crate::shared::Shared;

/// One lane hit with the shard it came from.
#[derive(Debug, Clone)]
pub struct ShardHit {
    pub shard: u32,
    pub hit: pb::LaneHit,
}

/// What the shards answered.
#[derive(Debug, Default)]
pub struct FanOut {
    pub dense: Vec<ShardHit>,
    pub bm25: Vec<ShardHit>,
    pub missing_shards: Vec<u32>,
    /// The replica node that answered each shard's search (where its hits' payloads are).
    pub answered_by: HashMap<u32, u64>,
}

/// Sends `searches` (with each shard's number) to every shard concurrently: one `Search` call per shard for one
/// search, one `SearchBatch` call per shard for several (a replica too old to know it gets them one by one).
/// Returns one [`FanOut`] per search, in order; all share `missing_shards` and `answered_by` (a shard's searches
/// went to one replica together). A shard that fails with an argument error fails the search (the same request
/// would fail everywhere); any other failure leaves the shard out and is reported in `missing_shards`.
#[tracing::instrument(name = "fan_out", skip_all, fields(collection = %rec.name, shards = rec.shards, searches = searches.len()))]
pub async fn fan_out(
    router: &Shared,
    rec: &CollectionRecord,
    searches: Vec<pb::ShardSearchRequest>,
    request_id: &str,
) -> Result<Vec<FanOut>, RouterError> {
    let searches = &searches;
    let calls = (0..rec.shards as usize).map(|shard| {
        let replicas = router.view.read_replicas(rec, shard);
        let policy = &router.config.replicas;
        let for_shard = move |r: &pb::ShardSearchRequest| pb::ShardSearchRequest {
            shard: shard as u32,
            ..r.clone()
        };
        async move {
            let one = |req| async {
                let call = ShardCall::Search {
                    request_id: request_id.to_string(),
                    req,
                };
                // Deadline, retry on another replica, hedging, concurrency limit, load shedding: replicas.rs.
                call_any(&replicas, call, policy)
                    .await
                    .and_then(|(resp, node)| Ok((pb::ShardSearchResponse::try_from(resp)?, node)))
            };
            if let [single] = searches.as_slice() {
                return (
                    shard as u32,
                    one(for_shard(single)).await.map(|(r, n)| (vec![r], n)),
                );
            }
            let call = ShardCall::SearchBatch {
                request_id: request_id.to_string(),
                req: pb::ShardSearchBatchRequest {
                    searches: searches.iter().map(for_shard).collect(),
                },
            };
            let result = match call_any(&replicas, call, policy).await {
                Ok((resp, node)) => pb::ShardSearchBatchResponse::try_from(resp)
                    .and_then(|b| answered_in_full(b, searches.len()).map(|r| (r, node))),
                Err(status) if status.code() == tonic::Code::Unimplemented => {
                    let each = searches.iter().map(|r| one(for_shard(r)));
                    futures::future::join_all(each)
                        .await
                        .into_iter()
                        .collect::<Result<Vec<_>, _>>()
                        .map(|answers| {
                            let node = answers.first().map_or(0, |(_, node)| *node);
                            (answers.into_iter().map(|(r, _)| r).collect(), node)
                        })
                }
                Err(status) => Err(status),
            };
            (shard as u32, result)
        }
    });
    let mut out: Vec<FanOut> = searches.iter().map(|_| FanOut::default()).collect();
    let (mut missing_shards, mut answered_by) = (Vec::new(), HashMap::new());
    for (shard, result) in futures::future::join_all(calls).await {
        match result {
            Ok((responses, node)) => {
                answered_by.insert(shard, node);
                for (fan, resp) in out.iter_mut().zip(responses) {
                    fan.dense
                        .extend(resp.dense.into_iter().map(|hit| ShardHit { shard, hit }));
                    fan.bm25
                        .extend(resp.bm25.into_iter().map(|hit| ShardHit { shard, hit }));
                }
            }
            Err(status) if status.code() == tonic::Code::InvalidArgument => {
                return Err(RouterError::from_status(status))
            }
            Err(status) => {
                warn!(shard, error = %status, event = "shard_search_failed", "shard left out of results");
                missing_shards.push(shard);
            }
        }
    }
    for fan in &mut out {
        fan.missing_shards.clone_from(&missing_shards);
        fan.answered_by.clone_from(&answered_by);
    }
    Ok(out)
}

/// A batch answer with one result per search, or an internal error (a replica must never drop one).
fn answered_in_full(
    batch: pb::ShardSearchBatchResponse,
    searches: usize,
) -> Result<Vec<pb::ShardSearchResponse>, tonic::Status> {
    if batch.results.len() == searches {
        Ok(batch.results)
    } else {
        Err(tonic::Status::internal(format!(
            "the replica answered {} of {searches} searches",
            batch.results.len()
        )))
    }
}

/// Best `depth` of one lane across shards, best first (ties by chunk id, so the order is deterministic). Works
/// on references: with 8 shards × 1,000 candidates, cloning every hit (ids, titles, texts) cost more than the
/// fusion itself; only the `k` hits returned are cloned, in [`fuse`].
fn merge_lane(hits: &[ShardHit], depth: usize) -> Vec<&ShardHit> {
    let better = |a: &&ShardHit, b: &&ShardHit| {
        b.hit
            .score
            .total_cmp(&a.hit.score)
            .then_with(|| a.hit.chunk_id.cmp(&b.hit.chunk_id))
    };
    let mut refs: Vec<&ShardHit> = hits.iter().collect();
    // The same chunk can come back twice only from two replicas of one shard (never asked together), so a
    // little slack above `depth` before the full sort is enough to survive de-duplication.
    let keep = depth.saturating_mul(2).max(depth + 16);
    if refs.len() > keep {
        refs.select_nth_unstable_by(keep - 1, better);
        refs.truncate(keep);
    }
    refs.sort_unstable_by(better);
    refs.dedup_by(|a, b| a.hit.chunk_id == b.hit.chunk_id);
    refs.truncate(depth);
    refs
}

/// Chunk id → (1-based rank, score, index) in a merged lane.
fn rank_of<'a>(lane: &[&'a ShardHit]) -> HashMap<&'a str, (u32, f32, usize)> {
    lane.iter()
        .enumerate()
        .map(|(i, h)| (h.hit.chunk_id.as_str(), ((i + 1) as u32, h.hit.score, i)))
        .collect()
}

/// Merges each lane globally, fuses them with weighted RRF and returns the top `k` with per-lane provenance.
pub fn fuse(
    fan: &FanOut,
    depth: usize,
    k: usize,
    rrf_k: f64,
    dense_weight: f64,
    bm25_weight: f64,
) -> Vec<pb::Hit> {
    let dense = merge_lane(&fan.dense, depth);
    let bm25 = merge_lane(&fan.bm25, depth);
    let mut lanes = Vec::new();
    if !dense.is_empty() {
        lanes.push(RankedLane {
            weight: dense_weight,
            items: dense.iter().map(|h| h.hit.chunk_id.as_str()).collect(),
        });
    }
    if !bm25.is_empty() {
        lanes.push(RankedLane {
            weight: bm25_weight,
            items: bm25.iter().map(|h| h.hit.chunk_id.as_str()).collect(),
        });
    }
    let fused = reciprocal_rank_fusion(&lanes, rrf_k);
    let dense_rank = rank_of(&dense);
    let bm25_rank = rank_of(&bm25);
    fused
        .into_iter()
        .filter(|(_, score)| *score > 0.0)
        .take(k)
        .map(|(chunk_id, score)| {
            let d = dense_rank.get(chunk_id);
            let b = bm25_rank.get(chunk_id);
            // The copy that came with its payload, if either did (each lane inlines its own best hits).
            let source = match (d, b) {
                (Some(&(_, _, i)), Some(&(_, _, j))) if !dense[i].hit.has_payload => bm25[j],
                (Some(&(_, _, i)), _) => dense[i],
                (None, Some(&(_, _, j))) => bm25[j],
                (None, None) => unreachable!("fused items come from a lane"),
            };
            pb::Hit {
                chunk_id: chunk_id.to_string(),
                doc_id: source.hit.doc_id.clone(),
                title: source.hit.title.clone(),
                text: source.hit.text.clone(),
                score,
                dense: d.map(|(rank, s, _)| pb::LaneRank {
                    rank: *rank,
                    score: *s,
                }),
                bm25: b.map(|(rank, s, _)| pb::LaneRank {
                    rank: *rank,
                    score: *s,
                }),
                shard: source.shard,
                metadata_json: source.hit.metadata_json.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(shard: u32, id: &str, score: f32) -> ShardHit {
        ShardHit {
            shard,
            hit: pb::LaneHit {
                chunk_id: id.into(),
                doc_id: id.into(),
                score,
                ..Default::default()
            },
        }
    }

    #[test]
    fn lanes_are_merged_across_shards_before_fusion() {
        let fan = FanOut {
            dense: vec![sh(0, "a", 0.5), sh(1, "b", 0.9), sh(0, "c", 0.1)],
            bm25: vec![sh(1, "b", 3.0), sh(0, "a", 7.0)],
            missing_shards: vec![],
            answered_by: HashMap::new(),
        };
        let hits = fuse(&fan, 10, 10, 60.0, 1.0, 1.0);
        let b = hits.iter().find(|h| h.chunk_id == "b").unwrap();
        assert_eq!(b.dense.as_ref().unwrap().rank, 1);
        assert_eq!(b.bm25.as_ref().unwrap().rank, 2);
        assert_eq!(b.shard, 1);
        assert_eq!(hits.last().unwrap().chunk_id, "c");
        assert!(hits.last().unwrap().bm25.is_none());
    }

    #[test]
    fn zero_weight_removes_a_lane_only_hits() {
        let fan = FanOut {
            dense: vec![sh(0, "a", 0.5)],
            bm25: vec![sh(0, "z", 1.0)],
            missing_shards: vec![],
            answered_by: HashMap::new(),
        };
        let hits = fuse(&fan, 10, 10, 60.0, 1.0, 0.0);
        assert_eq!(
            hits.iter().map(|h| h.chunk_id.as_str()).collect::<Vec<_>>(),
            vec!["a"]
        );
    }

    #[test]
    fn a_hit_takes_the_payload_of_whichever_lane_sent_it() {
        let with_payload = |mut h: ShardHit| {
            h.hit.has_payload = true;
            h.hit.text = format!("text of {}", h.hit.chunk_id);
            h
        };
        let fan = FanOut {
            dense: vec![sh(0, "a", 0.9), sh(0, "b", 0.5)],
            bm25: vec![with_payload(sh(0, "b", 7.0)), with_payload(sh(0, "a", 3.0))],
            missing_shards: vec![],
            answered_by: HashMap::new(),
        };
        for hit in fuse(&fan, 10, 10, 60.0, 1.0, 1.0) {
            assert_eq!(hit.text, format!("text of {}", hit.chunk_id));
        }
    }
}
