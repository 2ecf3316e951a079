//! `Router`: collections, ingest and hybrid search over the shard nodes, shared by the HTTP and gRPC fronts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use attest_core::limits;
use attest_embed::{CachedEmbedder, Embedder};
use attest_ingest::{chunk_document, NearDuplicateIndex, SourceDocument, TokenCounter};
use attest_proto::v1 as pb;
use attest_telemetry::metrics::{
    observe_stage, EMBEDDING_FALLBACK_TOTAL, STAGE_EMBED, STAGE_FANOUT, STAGE_FUSE, STAGE_TOTAL,
};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::collection::{record_from_meta, CollectionRecord, IndexSettings};
use crate::config::RouterConfig;
use crate::error::RouterError;
use crate::fanout::{fan_out_search, fuse};
use crate::replicas::{call_all, call_any, ShardCall};
use crate::topology::ClusterView;

/// A document to ingest, optionally with its own vector (then it is stored as one chunk, not re-embedded).
#[derive(Debug, Clone)]
pub struct IngestDocument {
    pub source: SourceDocument,
    pub vector: Option<Vec<f32>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IngestReport {
    /// Documents stored.
    pub accepted: u32,
    /// (position in the request, the stored document it nearly duplicates).
    pub duplicates: Vec<(usize, String)>,
    /// (position in the request, why it was not stored) for the other refusals: an id that occurs again
    /// later in the same request (the last occurrence wins, as it would in two requests).
    pub rejected: Vec<(usize, String)>,
    pub chunks: u64,
}

pub struct Router {
    pub(crate) config: RouterConfig,
    /// Collections and where their replicas live: meta's shard map, watched.
    pub(crate) view: Arc<ClusterView>,
    /// Write versions: every replica of a document gets the same one, and the newest wins.
    clock: WriteClock,
    /// Embeds ingested chunks (uncached: each chunk is new).
    embedder: Arc<dyn Embedder>,
    /// Embeds queries, with an LRU cache in front because users repeat queries.
    query_embedder: Arc<CachedEmbedder<Arc<dyn Embedder>>>,
    /// Near-duplicate detectors per collection, for documents ingested since this process started.
    dedup: Mutex<HashMap<String, NearDuplicateIndex>>,
}

/// Hands out write versions: microseconds since the epoch, strictly increasing within this router.
#[derive(Default)]
struct WriteClock(std::sync::atomic::AtomicU64);

impl WriteClock {
    fn next(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut last = self.0.load(std::sync::atomic::Ordering::Relaxed);
        loop {
            let v = now.max(last + 1);
            match self.0.compare_exchange_weak(
                last,
                v,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            ) {
                Ok(_) => return v,
                Err(seen) => last = seen,
            }
        }
    }
}

/// The embedder's tokenizer counts the chunker's budget, so chunks fit the model's window.
struct EmbedderTokens<'a>(&'a dyn Embedder);

impl TokenCounter for EmbedderTokens<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.count_tokens(text)
    }
}

/// Stable placement: the same document id always lands on the same shard.
pub fn shard_for(doc_id: &str, shards: u32) -> u32 {
    let digest = Sha256::digest(doc_id.as_bytes());
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (n % shards.max(1) as u64) as u32
}

fn check_vector(v: &[f32], dim: usize, field: &str) -> Result<(), RouterError> {
    match limits::vector_problem(v, dim) {
        Some(problem) => Err(RouterError::invalid(field, problem)),
        None => Ok(()),
    }
}

impl Router {
    /// A router over meta's shard map (`view` keeps it fresh).
    pub fn new(config: RouterConfig, view: Arc<ClusterView>, embedder: Arc<dyn Embedder>) -> Self {
        let query_cache_capacity = config.query_cache_capacity;
        Router {
            config,
            view,
            clock: WriteClock::default(),
            query_embedder: Arc::new(CachedEmbedder::with_capacity(
                Arc::clone(&embedder),
                query_cache_capacity,
            )),
            embedder,
            dedup: Mutex::new(HashMap::new()),
        }
    }

    /// The replicas that must acknowledge a write to a replica set of `n` (config `write_quorum`, else half
    /// the set rounded up: 1 of 1 or 2, 2 of 3, 3 of 5).
    fn write_quorum(&self, n: usize) -> usize {
        match self.config.write_quorum {
            0 => n.div_ceil(2).max(1),
            q => (q as usize).min(n.max(1)),
        }
    }

    pub fn config(&self) -> &RouterConfig {
        &self.config
    }

    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    pub fn collection(&self, name: &str) -> Result<CollectionRecord, RouterError> {
        self.view.get(name)
    }

    pub fn collections(&self) -> Vec<CollectionRecord> {
        self.view.list()
    }

    pub async fn create_collection(
        &self,
        req: pb::CreateCollectionRequest,
        request_id: &str,
    ) -> Result<CollectionRecord, RouterError> {
        if let Some(problem) = limits::collection_name_problem(&req.name) {
            return Err(RouterError::invalid("name", problem));
        }
        if self.view.get(&req.name).is_ok() {
            return Err(RouterError::AlreadyExists(format!(
                "collection `{}` already exists",
                req.name
            )));
        }
        let shards = if req.shards == 0 {
            self.config.default_shards
        } else {
            req.shards
        };
        if let Some(problem) = limits::shards_problem(shards) {
            return Err(RouterError::invalid("shards", problem));
        }
        if req.replication != 0 {
            if let Some(problem) = limits::replication_problem(req.replication) {
                return Err(RouterError::invalid("replication", problem));
            }
        }
        let p = req.index.unwrap_or_default();
        let pick = |v: u32, dflt: u32| if v == 0 { dflt } else { v };
        let index = IndexSettings {
            nlist: pick(p.nlist, limits::DEFAULT_NLIST),
            m: pick(p.m, limits::DEFAULT_M),
            nbits: pick(p.nbits, limits::DEFAULT_NBITS),
            nprobe: pick(p.nprobe, limits::DEFAULT_NPROBE),
        };
        if index.nbits > limits::MAX_NBITS {
            return Err(RouterError::invalid(
                "index.nbits",
                format!("must be at most {}", limits::MAX_NBITS),
            ));
        }
        if index.nlist > limits::MAX_NLIST {
            return Err(RouterError::invalid(
                "index.nlist",
                format!("must be at most {}", limits::MAX_NLIST),
            ));
        }
        // The default nprobe is clamped to a small nlist by the engine; one the caller chose must fit.
        if p.nprobe != 0 && index.nprobe > index.nlist {
            return Err(RouterError::invalid(
                "index.nprobe",
                format!("must be at most index.nlist ({})", index.nlist),
            ));
        }
        let spec = pb::CollectionSpec {
            dimension: self.embedder.dimension() as u32,
            index: Some(pb::IndexParams {
                nlist: index.nlist,
                m: index.m,
                nbits: index.nbits,
                nprobe: index.nprobe,
            }),
            seal_threshold: self.config.seal_threshold,
            embedder: self.embedder.id().to_string(),
        };
        // Meta places the replicas (distinct nodes, spread over zones) and records the collection.
        let view = &self.view;
        let created = view
            .meta()
            .create_collection(pb::MetaCreateCollectionRequest {
                name: req.name.clone(),
                shards,
                replication: if req.replication == 0 {
                    self.config.default_replication
                } else {
                    req.replication
                },
                spec: Some(spec.clone()),
                chunking_json: serde_json::to_string(&self.config.chunking).unwrap_or_default(),
                thresholds_json: String::new(),
            })
            .await
            .map_err(RouterError::from_status)?;
        // A linearizable read moves the view to a version that includes the new collection, so a poll
        // answered by a lagging meta follower cannot take it away again before the first ingest.
        if let Err(e) = view.refresh(true).await {
            warn!(error = %e, event = "meta_refresh_failed", "using the created collection as returned");
            view.insert(&created);
        }
        let record = record_from_meta(&created);
        let ensured = self
            .on_every_replica(&record, |shard| ShardCall::EnsureShard {
                request_id: request_id.to_string(),
                req: pb::EnsureShardRequest {
                    collection: record.name.clone(),
                    shard,
                    spec: Some(spec.clone()),
                },
            })
            .await;
        for (shard, outcome) in ensured {
            if let Some(e) = outcome.error {
                // each shard node also creates the replicas the map places on it.
                warn!(collection = %record.name, shard, error = %e, event = "ensure_shard_deferred",
                    "replica not created yet; its node creates it when it next reads the shard map");
            }
        }
        info!(collection = %record.name, shards, replication = record.replication, event = "collection_created", "collection created");
        Ok(record)
    }

    pub async fn drop_collection(&self, name: &str, request_id: &str) -> Result<(), RouterError> {
        let rec = self.view.get(name)?;
        if !self
            .view
            .meta()
            .drop_collection(name)
            .await
            .map_err(RouterError::from_status)?
        {
            return Err(RouterError::NotFound(format!(
                "collection `{name}` does not exist"
            )));
        }
        self.view.remove(name);
        let dropped = self
            .on_every_replica(&rec, |shard| ShardCall::DropShard {
                request_id: request_id.to_string(),
                req: pb::DropShardRequest {
                    collection: name.to_string(),
                    shard,
                },
            })
            .await;
        for (shard, outcome) in dropped {
            if let Some(e) = outcome.error {
                warn!(collection = %name, shard, error = %e, event = "drop_shard_failed", "could not drop shard");
            }
        }
        self.dedup.lock().remove(name);
        Ok(())
    }

    /// Validates every document (one bad document fails the whole request and nothing is written), drops near
    /// duplicates, chunks, embeds and writes each document to its shard. Returns once every shard acknowledged
    /// durably.
    pub async fn ingest(
        &self,
        collection: &str,
        docs: Vec<IngestDocument>,
        request_id: &str,
    ) -> Result<IngestReport, RouterError> {
        let rec = self.view.get(collection)?;
        if docs.len() > self.config.max_batch_documents {
            return Err(RouterError::PayloadTooLarge(format!(
                "at most {} documents per request",
                self.config.max_batch_documents
            )));
        }
        let dim = rec.dimension as usize;
        let mut docs = docs;
        for (i, d) in docs.iter_mut().enumerate() {
            d.source
                .validate(&self.config.limits)
                .map_err(|e| match e {
                    attest_ingest::IngestError::InvalidField { field, reason } => {
                        RouterError::invalid(format!("documents[{i}].{field}"), reason)
                    }
                    other => RouterError::invalid(format!("documents[{i}]"), other.to_string()),
                })?;
            if d.source.text.trim().is_empty() {
                return Err(RouterError::invalid(
                    format!("documents[{i}].text"),
                    "empty",
                ));
            }
            if let Some(v) = &d.vector {
                check_vector(v, dim, &format!("documents[{i}].vector"))?;
            }
            if d.source.tenant.as_deref().is_none_or(str::is_empty) {
                d.source.tenant = Some(self.config.default_tenant.clone());
            }
        }

        let mut report = IngestReport::default();
        let mut last_position: HashMap<&str, usize> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            last_position.insert(d.source.id.as_str(), i);
        }
        let superseded: Vec<bool> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| last_position[d.source.id.as_str()] != i)
            .collect();
        drop(last_position);
        let mut kept = Vec::with_capacity(docs.len());
        {
            let mut dedup = self.dedup.lock();
            let index = dedup
                .entry(collection.to_string())
                .or_insert_with(|| NearDuplicateIndex::new(self.config.dedup.clone()));
            for (i, d) in docs.into_iter().enumerate() {
                if superseded[i] {
                    report
                        .rejected
                        .push((i, "duplicate id in batch".to_string()));
                    continue;
                }
                match index.check_and_insert(&d.source.id, &d.source.text) {
                    Some(other) if other != d.source.id => report.duplicates.push((i, other)),
                    _ => kept.push(d),
                }
            }
        }

        // Chunk, then embed every chunk that did not come with its vector, in one blocking batch.
        let embedder = Arc::clone(&self.embedder);
        let chunking = self.config.chunking.clone();
        let rid = request_id.to_string();
        let prepared =
            tokio::task::spawn_blocking(move || -> Result<Vec<pb::DocumentChunks>, RouterError> {
                attest_telemetry::request_id::with_current(&rid, || {
                    let counter = EmbedderTokens(embedder.as_ref());
                    let mut per_doc: Vec<(IngestDocument, Vec<(String, String)>)> =
                        Vec::with_capacity(kept.len());
                    let mut to_embed: Vec<String> = Vec::new();
                    for d in kept {
                        let chunks: Vec<(String, String)> = if d.vector.is_some() {
                            let text = if d.source.title.is_empty() {
                                d.source.text.clone()
                            } else {
                                format!("{}\n{}", d.source.title, d.source.text)
                            };
                            vec![(format!("{}#0", d.source.id), text)]
                        } else {
                            chunk_document(&d.source, &chunking, &counter)
                                .into_iter()
                                .map(|c| (format!("{}#{}", d.source.id, c.ordinal), c.text))
                                .collect()
                        };
                        if d.vector.is_none() {
                            to_embed.extend(chunks.iter().map(|(_, t)| t.clone()));
                        }
                        per_doc.push((d, chunks));
                    }
                    let refs: Vec<&str> = to_embed.iter().map(String::as_str).collect();
                    let mut vectors = embedder
                        .embed(&refs)
                        .map_err(|e| RouterError::Unavailable(format!("embedding failed: {e}")))?
                        .into_iter();
                    let mut out = Vec::with_capacity(per_doc.len());
                    for (d, chunks) in per_doc {
                        let metadata_json =
                            serde_json::Value::Object(d.source.metadata.clone()).to_string();
                        let records = chunks
                            .into_iter()
                            .map(|(chunk_id, text)| pb::ChunkRecord {
                                chunk_id,
                                title: d.source.title.clone(),
                                text,
                                metadata_json: metadata_json.clone(),
                                vector: match &d.vector {
                                    Some(v) => v.clone(),
                                    None => vectors.next().unwrap_or_default(),
                                },
                            })
                            .collect();
                        out.push(pb::DocumentChunks {
                            doc_id: d.source.id.clone(),
                            tenant: d.source.tenant.clone().unwrap_or_default(),
                            chunks: records,
                            version: 0,
                        });
                    }
                    Ok(out)
                })
            })
            .await
            .map_err(|e| RouterError::Internal(e.to_string()))??;

        report.accepted = prepared.len() as u32;
        report.chunks = prepared.iter().map(|d| d.chunks.len() as u64).sum();
        let mut by_shard: HashMap<u32, Vec<pb::DocumentChunks>> = HashMap::new();
        for mut d in prepared {
            d.version = self.clock.next();
            by_shard
                .entry(shard_for(&d.doc_id, rec.shards))
                .or_default()
                .push(d);
        }
        // Every replica of a shard gets the same documents at the same versions; the write counts once a
        // quorum of the replica set holds it durably (the others still get it, or catch up from a peer).
        let writes = by_shard.into_iter().map(|(shard, documents)| {
            let replicas = self.view.write_replicas(&rec, shard as usize);
            let quorum = self.write_quorum(replicas.len());
            let call = ShardCall::Upsert {
                request_id: request_id.to_string(),
                req: pb::UpsertRequest {
                    collection: collection.to_string(),
                    shard,
                    documents,
                },
            };
            let policy = &self.config.replicas;
            async move { call_all(&replicas, call, quorum, policy).await }
        });
        for outcome in futures::future::join_all(writes).await {
            outcome.into_result().map_err(RouterError::from_status)?;
        }
        Ok(report)
    }

    pub async fn delete_document(
        &self,
        collection: &str,
        tenant: Option<&str>,
        doc_id: &str,
        request_id: &str,
    ) -> Result<bool, RouterError> {
        let rec = self.view.get(collection)?;
        let shard = shard_for(doc_id, rec.shards);
        let tenant = tenant
            .filter(|t| !t.is_empty())
            .unwrap_or(&self.config.default_tenant)
            .to_string();
        let replicas = self.view.write_replicas(&rec, shard as usize);
        let quorum = self.write_quorum(replicas.len());
        let call = ShardCall::Delete {
            request_id: request_id.to_string(),
            req: pb::DeleteRequest {
                collection: collection.to_string(),
                shard,
                tenant,
                doc_id: doc_id.to_string(),
                version: self.clock.next(),
            },
        };
        let outcome = call_all(&replicas, call, quorum, &self.config.replicas).await;
        let resp: pb::DeleteResponse = outcome
            .into_result()
            .and_then(TryInto::try_into)
            .map_err(RouterError::from_status)?;
        Ok(resp.deleted)
    }

    /// Hybrid search: validate, embed the query (BM25 alone if that fails), fan out, merge each lane, fuse.
    pub async fn search(
        &self,
        req: pb::SearchRequest,
        request_id: String,
    ) -> Result<pb::SearchResponse, RouterError> {
        let started = Instant::now();
        let rec = self.view.get(&req.collection)?;
        let query = req.query.trim().to_string();
        if query.chars().all(|c| c.is_whitespace() || c.is_control()) {
            return Err(RouterError::invalid(
                "query",
                "empty (nothing but whitespace or control characters)",
            ));
        }
        if query.len() > self.config.max_query_bytes {
            return Err(RouterError::invalid(
                "query",
                format!("longer than {} bytes", self.config.max_query_bytes),
            ));
        }
        let k = req.k.unwrap_or(self.config.default_k as u32) as usize;
        if k == 0 || k > self.config.max_k {
            return Err(RouterError::invalid(
                "k",
                format!("must be between 1 and {}", self.config.max_k),
            ));
        }
        let rrf_k = req.rrf_k.unwrap_or(self.config.rrf_k);
        if !(rrf_k.is_finite() && rrf_k > 0.0) {
            return Err(RouterError::invalid("rrf_k", "must be a positive number"));
        }
        let (mut want_dense, mut want_bm25) = (req.lanes.is_empty(), req.lanes.is_empty());
        for lane in &req.lanes {
            match lane.as_str() {
                "dense" => want_dense = true,
                "bm25" => want_bm25 = true,
                other => {
                    return Err(RouterError::invalid(
                        "lanes",
                        format!("unknown lane `{other}` (dense, bm25)"),
                    ))
                }
            }
        }
        for (lane, w) in &req.weights {
            if lane != "dense" && lane != "bm25" {
                return Err(RouterError::invalid(
                    "weights",
                    format!("unknown lane `{lane}`"),
                ));
            }
            if !(w.is_finite() && *w >= 0.0) {
                return Err(RouterError::invalid(
                    "weights",
                    format!("weight of `{lane}` must be a finite number ≥ 0"),
                ));
            }
        }
        if !req.weights.is_empty() && req.weights.values().all(|w| *w == 0.0) {
            return Err(RouterError::invalid(
                "weights",
                "all zero: every hit would score 0 (leave weights out for equal lanes)",
            ));
        }
        let mut fallback_mode = false;
        let query_vector = if want_dense {
            let embed_started = Instant::now();
            let embedder = Arc::clone(&self.query_embedder);
            let q = query.clone();
            let rid = request_id.clone();
            let embedded = tokio::task::spawn_blocking(move || {
                attest_telemetry::request_id::with_current(&rid, || embedder.embed(&[q.as_str()]))
            })
            .await;
            observe_stage(STAGE_EMBED, embed_started.elapsed());
            match embedded {
                Ok(Ok(mut v)) if v.len() == 1 => Some(v.remove(0)),
                failed => {
                    let reason = match failed {
                        Ok(Err(e)) => e.to_string(),
                        Err(e) => format!("embedding task failed: {e}"),
                        Ok(Ok(v)) => format!("embedder returned {} vectors for 1 query", v.len()),
                    };
                    // SPEC: never an error; answer from BM25 alone and say so.
                    metrics::counter!(EMBEDDING_FALLBACK_TOTAL).increment(1);
                    warn!(request_id = %request_id, reason = %reason, event = "embedding_fallback", "query not embedded; answering from BM25 alone");
                    fallback_mode = true;
                    None
                }
            }
        } else {
            None
        };
        if fallback_mode && !want_bm25 {
            want_bm25 = true;
        }
        let tenant = if req.tenant.is_empty() {
            self.config.default_tenant.clone()
        } else {
            req.tenant.clone()
        };
        let depth = self.config.lane_depth.max(k).min(limits::MAX_TOP_K);
        let shard_req = pb::ShardSearchRequest {
            collection: rec.name.clone(),
            shard: 0,
            tenant,
            query_vector: query_vector.unwrap_or_default(),
            query_text: if want_bm25 {
                query.clone()
            } else {
                String::new()
            },
            k: depth as u32,
            nprobe: if req.nprobe == 0 {
                rec.index.nprobe
            } else {
                req.nprobe
            },
            filter: req.filter.clone(),
            include_payload: true,
            exact_rescore: self.config.exact_rescore,
        };
        let fanout_started = Instant::now();
        let fan = fan_out_search(self, &rec, shard_req, &request_id).await?;
        observe_stage(STAGE_FANOUT, fanout_started.elapsed());
        let weights = |lane: &str| req.weights.get(lane).copied().unwrap_or(1.0);
        let fuse_started = Instant::now();
        let mut hits = fuse(&fan, depth, k, rrf_k, weights("dense"), weights("bm25"));
        observe_stage(STAGE_FUSE, fuse_started.elapsed());
        if fallback_mode {
            // The seed's rule: confidence reduced by 20% when the dense lane is missing.
            for hit in &mut hits {
                hit.score *= self.config.fallback_confidence_factor;
            }
        }
        observe_stage(STAGE_TOTAL, started.elapsed());
        Ok(pb::SearchResponse {
            hits,
            degraded: !fan.missing_shards.is_empty(),
            missing_shards: fan.missing_shards,
            fallback_mode,
            request_id,
            took_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Seals and/or compacts every replica of every shard of a collection now (operators; tests).
    pub async fn maintain(
        &self,
        collection: &str,
        seal: bool,
        compact: bool,
        request_id: &str,
    ) -> Result<(), RouterError> {
        let rec = self.view.get(collection)?;
        let done = self
            .on_every_replica(&rec, |shard| ShardCall::Maintain {
                request_id: request_id.to_string(),
                req: pb::MaintainRequest {
                    collection: collection.to_string(),
                    shard,
                    seal,
                    compact,
                },
            })
            .await;
        for (_, outcome) in done {
            outcome.into_result().map_err(RouterError::from_status)?;
        }
        Ok(())
    }

    /// Sends `call(shard)` to every replica of every shard (an operation that must reach all of them, not a
    /// quorum), shard by shard; returns each shard's outcome.
    async fn on_every_replica(
        &self,
        rec: &CollectionRecord,
        call: impl Fn(u32) -> ShardCall,
    ) -> Vec<(u32, crate::replicas::WriteOutcome)> {
        let mut out = Vec::with_capacity(rec.shards as usize);
        for shard in 0..rec.shards {
            let replicas = self.view.write_replicas(rec, shard as usize);
            let outcome = call_all(
                &replicas,
                call(shard),
                replicas.len(),
                &self.config.replicas,
            )
            .await;
            out.push((shard, outcome));
        }
        out
    }

    /// Per-shard statistics of a collection (from one replica of each shard).
    pub async fn stats(
        &self,
        collection: &str,
        request_id: &str,
    ) -> Result<Vec<pb::ShardStatsResponse>, RouterError> {
        let rec = self.view.get(collection)?;
        let mut out = Vec::new();
        for shard in 0..rec.shards as usize {
            let replicas = self.view.read_replicas(&rec, shard);
            let call = ShardCall::Stats {
                request_id: request_id.to_string(),
                req: pb::ShardStatsRequest {
                    collection: collection.to_string(),
                    shard: shard as u32,
                },
            };
            let (resp, _) = call_any(&replicas, call, &self.config.replicas)
                .await
                .map_err(RouterError::from_status)?;
            out.push(resp.try_into().map_err(RouterError::from_status)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_stable_and_spread() {
        assert_eq!(shard_for("doc-1", 4), shard_for("doc-1", 4));
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[shard_for(&format!("doc-{i}"), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }
}
