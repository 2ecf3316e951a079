//! `attest.v1.ShardService` over a `ShardNode`. Every engine call runs on a blocking thread: FAISS, tantivy and
//! RocksDB fsyncs must never stall the async workers.

use std::sync::Arc;
use std::time::Instant;

use attest_core::limits::MAX_BATCH_SEARCHES;
use attest_index::{
    DocumentWrite, EngineConfig, EngineStats, SearchParams, ShardEngine, MAX_TOP_K,
};
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_server::ShardService;
use attest_telemetry::metrics::{observe_stage, STAGE_SHARD_SEARCH};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::convert::{
    filter_from_proto, lane_to_proto, near_dup_from_proto, params_from_proto, payload_top,
    write_from_proto,
};

use crate::node::ShardNode;
use crate::status::{invalid, to_status, unknown_shard};

mod replication;
use replication::MAX_DOC_VERSIONS_PAGE;

#[derive(Clone)]
pub struct ShardServiceImpl {
    node: Arc<ShardNode>,
}

impl ShardServiceImpl {
    pub fn new(node: Arc<ShardNode>) -> Self {
        ShardServiceImpl { node }
    }

    fn engine(&self, collection: &str, shard: u32) -> Result<Arc<ShardEngine>, Status> {
        self.node
            .get(collection, shard)
            .ok_or_else(|| unknown_shard(collection, shard))
    }
}

/// The span of one call: the router's request id from the gRPC metadata (or a fresh one), the router's trace
/// its parent.
fn request_span<T>(req: &Request<T>) -> tracing::Span {
    attest_telemetry::request_id::grpc_span(req.metadata()).1
}

/// Runs engine or filesystem work off the async workers (bounded by the CPU pool).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    attest_telemetry::cpu::run_cpu_intensive(f)
        .await
        .map_err(|e| Status::internal(format!("worker failed: {e}")))?
}

/// One search of a replica's engine, on the calling (blocking) thread, timed as the `shard_search` stage.
fn search_one(
    engine: &ShardEngine,
    r: &pb::ShardSearchRequest,
    filter: &attest_index::Filter,
) -> Result<pb::ShardSearchResponse, Status> {
    let started = Instant::now();
    let params = SearchParams {
        tenant: &r.tenant,
        query_vector: (!r.query_vector.is_empty()).then_some(r.query_vector.as_slice()),
        query_text: (!r.query_text.is_empty()).then_some(r.query_text.as_str()),
        k: r.k as usize,
        // An explicit 0 reads as unset, as it did before the field had presence.
        nprobe: r.nprobe.filter(|&n| n > 0),
        filter,
        exact_rescore: r.exact_rescore,
        payload_top: payload_top(r),
    };
    let lanes = engine.search(&params).map_err(to_status)?;
    observe_stage(STAGE_SHARD_SEARCH, started.elapsed());
    tracing::info!(collection = %r.collection, shard = r.shard, dense = lanes.dense.len(), bm25 = lanes.bm25.len(),
        took_ms = started.elapsed().as_secs_f64() * 1e3, event = "shard_searched", "shard search done");
    Ok(pb::ShardSearchResponse {
        dense: lane_to_proto(lanes.dense, params.payload_top),
        bm25: lane_to_proto(lanes.bm25, params.payload_top),
        took_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// The engine's counters (`disk_bytes` 0: the Stats RPC adds it, a maintain answer does without the walk).
fn stats_to_proto(s: EngineStats) -> pb::ShardStatsResponse {
    pb::ShardStatsResponse {
        disk_bytes: 0,
        live_documents: s.live_documents,
        growing_rows: s.growing_rows,
        sealed_rows: s.sealed_rows,
        sealed_segments: s.sealed_segments,
        last_seq: s.last_seq,
        rebuilt_segments: s.rebuilt_segments,
        tenants: Vec::new(),
        tenants_listed: false,
        recall: s.recall.map(|r| pb::RecallEstimate {
            recall: r.recall,
            low: r.low,
            high: r.high,
            samples: r.samples,
            measured: r.measured,
            dropped: r.dropped,
            shards: r.shards,
        }),
        recall_retrains: s.recall_retrains,
        tuned: s.tuned.map(|t| pb::SearchTuning {
            nprobe: t.setting.nprobe,
            exact_refine: t.setting.exact_refine as u32,
            recall: t.recall,
            target: t.target,
            reached: t.reached,
            queries: t.queries as u32,
            tuned_at_ms: t.tuned_at_ms,
            sealed_rows: t.sealed_rows,
        }),
    }
}

/// A collection spec (as the router or meta sends it) and its replication (0: not known) → this node's engine
/// config for a new replica; defaults fill what the spec leaves unset.
pub fn engine_config_from_spec(
    spec: Option<&pb::CollectionSpec>,
    replication: u32,
    defaults: &EngineConfig,
) -> Result<EngineConfig, Status> {
    let spec = spec.ok_or_else(|| invalid("spec", "missing"))?;
    let max = attest_core::limits::MAX_DIMENSION;
    if spec.dimension == 0 || spec.dimension > max {
        return Err(invalid("spec.dimension", format!("must be 1..={max}")));
    }
    let recall_target = spec.index.as_ref().and_then(|i| i.recall_target);
    if let Some(problem) = recall_target.and_then(attest_core::limits::recall_target_problem) {
        return Err(invalid("spec.index.recall_target", problem));
    }
    Ok(EngineConfig {
        dimension: spec.dimension as usize,
        ivfpq: params_from_proto(spec.index.as_ref()),
        // Unset (a collection with a fixed nprobe, or recorded before targets): 0, no tuning.
        recall_target: recall_target.unwrap_or(0.0),
        seal_threshold: if spec.seal_threshold == 0 {
            defaults.seal_threshold
        } else {
            spec.seal_threshold as usize
        },
        keep_sealed_vectors_in_log: defaults
            .keep_sealed_vectors_in_log
            .for_replication(replication),
        ..defaults.clone()
    })
}

/// The handlers proper; the trait methods below run them inside the caller's request span.
impl ShardServiceImpl {
    async fn handle_ensure_shard(
        &self,
        req: Request<pb::EnsureShardRequest>,
    ) -> Result<Response<pb::EnsureShardResponse>, Status> {
        let r = req.into_inner();
        let config = engine_config_from_spec(r.spec.as_ref(), r.replication, self.node.defaults())?;
        if self.node.get(&r.collection, r.shard).is_none() {
            // A new replica writes its log and files: not below the reserve.
            self.node.check_disk().map_err(to_status)?;
        }
        let node = Arc::clone(&self.node);
        let (collection, shard, shards) = (r.collection.clone(), r.shard, r.shards);
        let created = blocking(move || {
            node.ensure(&r.collection, r.shard, config)
                .map_err(to_status)
        })
        .await?;
        if let Some(engine) = self.node.get(&collection, shard) {
            engine.set_collection_shards(shards);
        }
        Ok(Response::new(pb::EnsureShardResponse { created }))
    }

    async fn handle_drop_shard(
        &self,
        req: Request<pb::DropShardRequest>,
    ) -> Result<Response<pb::DropShardResponse>, Status> {
        let r = req.into_inner();
        let node = Arc::clone(&self.node);
        let dropped =
            blocking(move || node.drop_shard(&r.collection, r.shard).map_err(to_status)).await?;
        Ok(Response::new(pb::DropShardResponse { dropped }))
    }

    async fn handle_upsert(
        &self,
        req: Request<pb::UpsertRequest>,
    ) -> Result<Response<pb::UpsertResponse>, Status> {
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        self.node.check_disk().map_err(to_status)?;
        let mut chunks_written = 0u64;
        let (collection, shard) = (r.collection, r.shard);
        let docs: Vec<DocumentWrite> = r
            .documents
            .into_iter()
            .map(|d| {
                chunks_written += d.chunks.len() as u64;
                write_from_proto(d)
            })
            .collect();
        let documents = docs.len();
        // A full unsealed backlog is waited out before the write takes a CPU permit: waiting uses no CPU, and
        // a process has as many permits as cores — two writes waiting 5 s each on them stalled every replica's
        // writes and searches on the node (10M through the router, docs/BENCHMARKS.md). Bounded by
        // `engine.unsealed_wait_ms`, and by the router's per-node concurrency limit.
        let waiting = Arc::clone(&engine);
        tokio::task::spawn_blocking(move || waiting.wait_for_sealing())
            .await
            .map_err(|e| Status::internal(format!("worker failed: {e}")))?
            .map_err(to_status)?;
        let last_seq = blocking(move || engine.upsert(docs).map_err(to_status)).await?;
        tracing::info!(collection = %collection, shard, documents, chunks = chunks_written, last_seq,
            event = "upserted", "documents written durably");
        Ok(Response::new(pb::UpsertResponse {
            chunks_written,
            last_seq,
        }))
    }

    async fn handle_delete(
        &self,
        req: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        self.node.check_disk().map_err(to_status)?;
        let deleted = blocking(move || {
            engine
                .delete_versioned(&r.tenant, &r.doc_id, r.version)
                .map_err(to_status)
        })
        .await?;
        Ok(Response::new(pb::DeleteResponse { deleted }))
    }

    async fn handle_near_duplicates(
        &self,
        req: Request<pb::NearDuplicatesRequest>,
    ) -> Result<Response<pb::NearDuplicatesResponse>, Status> {
        let r = req.into_inner();
        if !attest_core::config_check::in_unit_interval(r.threshold) {
            return Err(invalid(
                "threshold",
                format!("must be in 0..1 (got {})", r.threshold),
            ));
        }
        if r.queries.len() > MAX_DOC_VERSIONS_PAGE {
            return Err(invalid(
                "queries",
                format!("at most {MAX_DOC_VERSIONS_PAGE}"),
            ));
        }
        let engine = self.engine(&r.collection, r.shard)?;
        let matches = blocking(move || {
            let mut out = Vec::new();
            // Queries are answered per tenant, one engine call each.
            let mut by_tenant: std::collections::BTreeMap<
                String,
                Vec<(u32, String, attest_index::NearDupKeys)>,
            > = Default::default();
            for (i, q) in r.queries.into_iter().enumerate() {
                let keys = q
                    .keys
                    .map(near_dup_from_proto)
                    .unwrap_or(attest_index::NearDupKeys {
                        signature: Vec::new(),
                        bands: Vec::new(),
                    });
                by_tenant
                    .entry(q.tenant)
                    .or_default()
                    .push((i as u32, q.doc_id, keys));
            }
            for (tenant, queries) in by_tenant {
                let (index, queries): (Vec<u32>, Vec<(String, attest_index::NearDupKeys)>) =
                    queries.into_iter().map(|(i, d, k)| (i, (d, k))).unzip();
                let found = engine
                    .near_duplicates(&tenant, &queries, r.threshold)
                    .map_err(to_status)?;
                for (query, m) in index.into_iter().zip(found) {
                    if let Some(m) = m {
                        out.push(pb::NearDuplicateMatch {
                            query,
                            doc_id: m.doc_id,
                            similarity: m.similarity,
                        });
                    }
                }
            }
            out.sort_by_key(|m| m.query);
            Ok(out)
        })
        .await?;
        Ok(Response::new(pb::NearDuplicatesResponse { matches }))
    }

    async fn handle_fetch_chunks(
        &self,
        req: Request<pb::FetchChunksRequest>,
    ) -> Result<Response<pb::FetchChunksResponse>, Status> {
        let r = req.into_inner();
        if r.chunks.len() > MAX_TOP_K {
            return Err(invalid("chunks", format!("at most {MAX_TOP_K}")));
        }
        let engine = self.engine(&r.collection, r.shard)?;
        let refs: Vec<(String, String)> = r
            .chunks
            .into_iter()
            .map(|c| (c.doc_id, c.chunk_id))
            .collect();
        let tenant = r.tenant;
        let hits = blocking(move || engine.fetch_chunks(&tenant, &refs).map_err(to_status)).await?;
        Ok(Response::new(pb::FetchChunksResponse {
            chunks: hits
                .into_iter()
                .map(|h| pb::ChunkPayload {
                    chunk_id: h.chunk_id,
                    doc_id: h.doc_id,
                    title: h.title,
                    text: h.text,
                    metadata_json: h.metadata_json,
                })
                .collect(),
        }))
    }

    async fn handle_search(
        &self,
        req: Request<pb::ShardSearchRequest>,
    ) -> Result<Response<pb::ShardSearchResponse>, Status> {
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        let filter = filter_from_proto(r.filter.as_ref())?;
        // The request's span goes with the search onto the blocking thread: its log line carries the request id.
        let span = tracing::Span::current();
        let response = blocking(move || span.in_scope(|| search_one(&engine, &r, &filter))).await?;
        Ok(Response::new(response))
    }

    /// Several searches of one replica in one blocking task, answered in request order; an invalid search
    /// (or one naming another shard) fails the batch before anything is searched.
    async fn handle_search_batch(
        &self,
        req: Request<pb::ShardSearchBatchRequest>,
    ) -> Result<Response<pb::ShardSearchBatchResponse>, Status> {
        let started = Instant::now();
        let searches = req.into_inner().searches;
        let Some(first) = searches.first() else {
            return Err(invalid("searches", "empty batch"));
        };
        if searches.len() > MAX_BATCH_SEARCHES {
            return Err(invalid(
                "searches",
                format!(
                    "{} in one batch; at most {MAX_BATCH_SEARCHES}",
                    searches.len()
                ),
            ));
        }
        if let Some(i) = searches
            .iter()
            .position(|r| r.collection != first.collection || r.shard != first.shard)
        {
            return Err(invalid(
                format!("searches[{i}]"),
                "every search of a batch must name the same collection and shard",
            ));
        }
        let engine = self.engine(&first.collection, first.shard)?;
        let filters = searches
            .iter()
            .map(|r| filter_from_proto(r.filter.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let span = tracing::Span::current();
        let results = blocking(move || {
            span.in_scope(|| {
                searches
                    .iter()
                    .zip(&filters)
                    .map(|(r, filter)| search_one(&engine, r, filter))
                    .collect::<Result<Vec<_>, _>>()
            })
        })
        .await?;
        Ok(Response::new(pb::ShardSearchBatchResponse {
            results,
            took_ms: started.elapsed().as_secs_f64() * 1e3,
        }))
    }

    async fn handle_stats(
        &self,
        req: Request<pb::ShardStatsRequest>,
    ) -> Result<Response<pb::ShardStatsResponse>, Status> {
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        let (stats, disk_bytes, tenants) = blocking(move || {
            let disk_bytes = engine.disk_bytes().map_err(to_status)?;
            Ok((engine.stats(), disk_bytes, engine.tenants()))
        })
        .await?;
        Ok(Response::new(pb::ShardStatsResponse {
            disk_bytes,
            tenants,
            tenants_listed: true,
            ..stats_to_proto(stats)
        }))
    }

    async fn handle_maintain(
        &self,
        req: Request<pb::MaintainRequest>,
    ) -> Result<Response<pb::MaintainResponse>, Status> {
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        let stats = blocking(move || {
            if r.seal {
                engine.seal().map_err(to_status)?;
            }
            if r.compact {
                engine.compact().map_err(to_status)?;
            }
            Ok(engine.stats())
        })
        .await?;
        Ok(Response::new(pb::MaintainResponse {
            stats: Some(stats_to_proto(stats)),
        }))
    }
}

#[tonic::async_trait]
impl ShardService for ShardServiceImpl {
    async fn ensure_shard(
        &self,
        req: Request<pb::EnsureShardRequest>,
    ) -> Result<Response<pb::EnsureShardResponse>, Status> {
        let span = request_span(&req);
        self.handle_ensure_shard(req).instrument(span).await
    }

    async fn drop_shard(
        &self,
        req: Request<pb::DropShardRequest>,
    ) -> Result<Response<pb::DropShardResponse>, Status> {
        let span = request_span(&req);
        self.handle_drop_shard(req).instrument(span).await
    }

    async fn upsert(
        &self,
        req: Request<pb::UpsertRequest>,
    ) -> Result<Response<pb::UpsertResponse>, Status> {
        let span = request_span(&req);
        self.handle_upsert(req).instrument(span).await
    }

    async fn delete(
        &self,
        req: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let span = request_span(&req);
        self.handle_delete(req).instrument(span).await
    }

    async fn search(
        &self,
        req: Request<pb::ShardSearchRequest>,
    ) -> Result<Response<pb::ShardSearchResponse>, Status> {
        let span = request_span(&req);
        self.handle_search(req).instrument(span).await
    }

    async fn search_batch(
        &self,
        req: Request<pb::ShardSearchBatchRequest>,
    ) -> Result<Response<pb::ShardSearchBatchResponse>, Status> {
        let span = request_span(&req);
        self.handle_search_batch(req).instrument(span).await
    }

    async fn fetch_chunks(
        &self,
        req: Request<pb::FetchChunksRequest>,
    ) -> Result<Response<pb::FetchChunksResponse>, Status> {
        let span = request_span(&req);
        self.handle_fetch_chunks(req).instrument(span).await
    }

    async fn stats(
        &self,
        req: Request<pb::ShardStatsRequest>,
    ) -> Result<Response<pb::ShardStatsResponse>, Status> {
        let span = request_span(&req);
        self.handle_stats(req).instrument(span).await
    }

    async fn maintain(
        &self,
        req: Request<pb::MaintainRequest>,
    ) -> Result<Response<pb::MaintainResponse>, Status> {
        let span = request_span(&req);
        self.handle_maintain(req).instrument(span).await
    }

    async fn doc_versions(
        &self,
        req: Request<pb::DocVersionsRequest>,
    ) -> Result<Response<pb::DocVersionsResponse>, Status> {
        let span = request_span(&req);
        self.handle_doc_versions(req).instrument(span).await
    }

    async fn near_duplicates(
        &self,
        req: Request<pb::NearDuplicatesRequest>,
    ) -> Result<Response<pb::NearDuplicatesResponse>, Status> {
        let span = request_span(&req);
        self.handle_near_duplicates(req).instrument(span).await
    }

    async fn fetch_documents(
        &self,
        req: Request<pb::FetchDocumentsRequest>,
    ) -> Result<Response<pb::FetchDocumentsResponse>, Status> {
        let span = request_span(&req);
        self.handle_fetch_documents(req).instrument(span).await
    }

    async fn snapshot_shard(
        &self,
        req: Request<pb::SnapshotShardRequest>,
    ) -> Result<Response<pb::SnapshotShardResponse>, Status> {
        let span = request_span(&req);
        let r = req.into_inner();
        let engine = self.engine(&r.collection, r.shard)?;
        crate::snapshot::snapshot_shard(Arc::clone(&self.node), engine, r)
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn stage_restore(
        &self,
        req: Request<pb::StageRestoreRequest>,
    ) -> Result<Response<pb::StageRestoreResponse>, Status> {
        let span = request_span(&req);
        crate::snapshot::stage_restore(Arc::clone(&self.node), req.into_inner())
            .instrument(span)
            .await
            .map(Response::new)
    }

    async fn transfer_progress(
        &self,
        req: Request<pb::TransferProgressRequest>,
    ) -> Result<Response<pb::TransferProgressResponse>, Status> {
        Ok(Response::new(crate::snapshot::transfer_progress(
            &self.node,
            req.get_ref(),
        )))
    }

    async fn discard_restore(
        &self,
        req: Request<pb::DiscardRestoreRequest>,
    ) -> Result<Response<pb::DiscardRestoreResponse>, Status> {
        let r = req.into_inner();
        let node = Arc::clone(&self.node);
        let discarded = blocking(move || {
            node.discard_staged(&r.collection, r.shard)
                .map_err(to_status)
        })
        .await?;
        Ok(Response::new(pb::DiscardRestoreResponse { discarded }))
    }
}
