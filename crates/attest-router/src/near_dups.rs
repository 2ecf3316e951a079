//! Near-duplicate checks of an ingest batch, answered by the data plane: the router sketches each document
//! (MinHash signature + LSH band keys, off the async workers), checks the batch against itself, then asks every
//! shard of the collection once (one batched `NearDuplicates` call per shard, any replica) whether a document of
//! the same tenant is already stored. The shard that stores a document keeps its sketch durably beside it
//! (`attest_index::near_dup`), so two routers agree, a restart forgets nothing and a deleted document is
//! forgotten with it; the router holds nothing between requests.

use std::collections::HashMap;
use std::sync::Arc;

use attest_ingest::{MinHashConfig, NearDuplicateIndex, Sketch};
use attest_proto::v1 as pb;
use tracing::warn;

use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::ingest::Ingest;
use crate::ingest::IngestDocument;
use crate::replicas::{call_any, ShardCall};

/// What the check found for each document of a batch.
pub(crate) struct BatchCheck {
    /// The sketch to store with each document (None for documents left out of the check).
    pub sketches: Vec<Option<Sketch>>,
    /// The stored (or earlier in the batch) document each one nearly duplicates.
    pub duplicate_of: Vec<Option<String>>,
}

/// A sketch as a shard stores it and looks it up: the whole signature, the first `stored_bands` band keys.
pub(crate) fn keys_to_proto(s: &Sketch, config: &MinHashConfig) -> pb::NearDupKeys {
    pb::NearDupKeys {
        signature: s.signature.clone(),
        bands: config.stored_bands(&s.bands).to_vec(),
    }
}

impl Ingest {
    /// Checks `docs` (except those `skip`ped) for near-duplicates of each other and of what the collection
    /// stores, per tenant; none at all when `router.check_near_duplicates` is off. A shard that cannot be asked is logged and passed over: a missed duplicate is
    /// better than a refused write.
    pub(crate) async fn check_near_duplicates(
        &self,
        rec: &CollectionRecord,
        docs: &[IngestDocument],
        skip: &[bool],
        request_id: &str,
    ) -> Result<BatchCheck, RouterError> {
        if !self.shared.config.check_near_duplicates {
            return Ok(BatchCheck {
                sketches: vec![None; docs.len()],
                duplicate_of: vec![None; docs.len()],
            });
        }
        let texts: Vec<Option<String>> = docs
            .iter()
            .zip(skip)
            .map(|(d, skip)| (!skip).then(|| d.source.text.clone()))
            .collect();
        let config = self.shared.config.dedup.clone();
        let sketches = attest_telemetry::cpu::run_cpu_intensive(move || {
            let sketcher = NearDuplicateIndex::new(config);
            texts
                .iter()
                .map(|t| t.as_deref().map(|t| sketcher.sketch(t)))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| RouterError::Internal(e.to_string()))?;

        // Within the batch: an index per tenant, as large as the request.
        let mut duplicate_of: Vec<Option<String>> = vec![None; docs.len()];
        let mut in_batch: HashMap<&str, NearDuplicateIndex> = HashMap::new();
        for (i, (d, sketch)) in docs.iter().zip(&sketches).enumerate() {
            let Some(sketch) = sketch else { continue };
            let index = in_batch
                .entry(tenant_of(d))
                .or_insert_with(|| NearDuplicateIndex::new(self.shared.config.dedup.clone()));
            duplicate_of[i] = index
                .check_and_insert_sketch(&d.source.id, sketch)
                .filter(|other| *other != d.source.id);
        }

        // Against the stored documents: every shard once, with every remaining document.
        let asked: Vec<usize> = (0..docs.len())
            .filter(|&i| sketches[i].is_some() && duplicate_of[i].is_none())
            .collect();
        if asked.is_empty() {
            return Ok(BatchCheck {
                sketches,
                duplicate_of,
            });
        }
        let queries: Vec<pb::NearDuplicateQuery> = asked
            .iter()
            .map(|&i| pb::NearDuplicateQuery {
                doc_id: docs[i].source.id.clone(),
                tenant: tenant_of(&docs[i]).to_string(),
                keys: sketches[i]
                    .as_ref()
                    .map(|s| keys_to_proto(s, &self.shared.config.dedup)),
            })
            .collect();
        let queries = Arc::new(queries);
        let calls = (0..rec.shards).map(|shard| {
            let replicas = self.shared.view.read_replicas(rec, shard as usize);
            let call = ShardCall::NearDuplicates {
                request_id: request_id.to_string(),
                req: pb::NearDuplicatesRequest {
                    collection: rec.stored_name.clone(),
                    shard,
                    queries: queries.as_ref().clone(),
                    threshold: self.shared.config.dedup.threshold,
                },
            };
            let policy = &self.shared.config.replicas;
            async move {
                let answer = call_any(&replicas, call, policy)
                    .await
                    .and_then(|(r, _)| pb::NearDuplicatesResponse::try_from(r));
                (shard, answer)
            }
        });
        let mut best: HashMap<usize, (f64, String)> = HashMap::new();
        for (shard, answer) in futures::future::join_all(calls).await {
            match answer {
                Ok(resp) => {
                    for m in resp.matches {
                        let Some(&i) = asked.get(m.query as usize) else {
                            continue;
                        };
                        let better = best.get(&i).is_none_or(|(s, id)| {
                            m.similarity > *s || (m.similarity == *s && m.doc_id < *id)
                        });
                        if better {
                            best.insert(i, (m.similarity, m.doc_id));
                        }
                    }
                }
                Err(e) => {
                    warn!(collection = %rec.name, shard, error = %e, event = "near_duplicate_check_failed",
                        "could not ask a shard for near-duplicates; its documents were not compared")
                }
            }
        }
        for (i, (_, doc_id)) in best {
            duplicate_of[i] = Some(doc_id);
        }
        Ok(BatchCheck {
            sketches,
            duplicate_of,
        })
    }
}

fn tenant_of(d: &IngestDocument) -> &str {
    d.source.tenant.as_deref().unwrap_or_default()
}
