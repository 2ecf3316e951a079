//! Hybrid search on the router: validate, embed the query (BM25 alone when that fails, and say so), fan out
//! to one replica of every shard for ids and scores, merge each lane, fuse with weighted RRF, and fetch the
//! payloads of the hits returned ([`crate::payloads`]).

use std::sync::Arc;
use std::time::Instant;

use attest_core::limits;
use attest_embed::Embedder;
use attest_proto::v1 as pb;
use attest_telemetry::metrics::{
    observe_stage, EMBEDDING_FALLBACK_TOTAL, STAGE_EMBED, STAGE_FANOUT, STAGE_FETCH, STAGE_FUSE,
    STAGE_TOTAL,
};
use tracing::warn;

use crate::error::RouterError;
use crate::fanout::{fan_out_search, fuse};
use crate::payloads::fill_payloads;
use crate::router::Router;

impl Router {
    /// Refuses a filter with more conditions, or an `in` list with more values, than the configured limits (each
    /// condition is checked against every candidate on the shard).
    fn check_filter_size(&self, filter: &pb::Filter) -> Result<(), RouterError> {
        let (most, most_values) = (
            self.config.max_filter_conditions,
            self.config.max_filter_values,
        );
        if filter.conditions.len() > most {
            return Err(RouterError::invalid(
                "filter",
                format!("{} conditions; at most {most}", filter.conditions.len()),
            ));
        }
        for c in &filter.conditions {
            if let Some(pb::condition::Kind::InJson(list)) = &c.kind {
                if list.values.len() > most_values {
                    return Err(RouterError::invalid(
                        format!("filter.{}", c.field),
                        format!(
                            "{} values in `in`; at most {most_values}",
                            list.values.len()
                        ),
                    ));
                }
            }
        }
        Ok(())
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
        if let Some(filter) = &req.filter {
            self.check_filter_size(filter)?;
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
            let embedded = attest_telemetry::cpu::run_cpu_intensive(move || {
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
            tenant: tenant.clone(),
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
            include_payload: self.config.payload_in_fanout,
            exact_rescore: self.config.exact_rescore,
        };
        let fanout_started = Instant::now();
        let mut fan = fan_out_search(self, &rec, shard_req, &request_id).await?;
        observe_stage(STAGE_FANOUT, fanout_started.elapsed());
        let weights = |lane: &str| req.weights.get(lane).copied().unwrap_or(1.0);
        let fuse_started = Instant::now();
        let mut hits = fuse(&fan, depth, k, rrf_k, weights("dense"), weights("bm25"));
        observe_stage(STAGE_FUSE, fuse_started.elapsed());
        if !self.config.payload_in_fanout {
            let fetch_started = Instant::now();
            fill_payloads(
                self,
                &rec,
                &tenant,
                &mut hits,
                &fan.answered_by,
                &mut fan.missing_shards,
                &request_id,
            )
            .await;
            observe_stage(STAGE_FETCH, fetch_started.elapsed());
        }
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
}
