//! Hybrid search on the router: validate, embed the query (BM25 alone when that fails, and say so), fan out
//! to one replica of every shard for ids and scores, merge each lane, fuse with weighted RRF, and fetch the
//! payloads of the hits returned ([`crate::payloads`]). A batch of searches (the answer tier's rewrites and
//! pins of one hop) shares one embedding call, one round trip per shard and one payload fetch per shard.

use std::sync::Arc;
use std::time::Instant;

use attest_core::limits;
use attest_embed::{CachedEmbedder, Embedder};
use attest_proto::v1 as pb;
use attest_telemetry::metrics::{
    observe_stage, EMBEDDING_FALLBACK_TOTAL, STAGE_EMBED, STAGE_FANOUT, STAGE_FETCH, STAGE_FUSE,
    STAGE_TOTAL,
};
use tracing::warn;

use crate::collection::CollectionRecord;
use crate::error::RouterError;
use crate::fanout::{fan_out, fuse};
use crate::payloads::{fill_payloads, payload_top};
use crate::shared::Shared;

/// The lanes a search may name (`lanes`, the keys of `weights`).
pub const LANES: [&str; 2] = ["dense", "bm25"];

/// Search: one query or a batch of one collection and tenant, fanned out to its shards and fused.
#[derive(Clone)]
pub struct Search {
    pub(crate) shared: Arc<Shared>,
}

impl Search {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        Search {
            shared: Arc::clone(shared),
        }
    }

    /// Refuses a filter with more conditions, or an `in` list with more values, than the configured limits (each
    /// condition is checked against every candidate on the shard).
    fn check_filter_size(&self, filter: &pb::Filter) -> Result<(), RouterError> {
        let (most, most_values) = (
            self.shared.config.max_filter_conditions,
            self.shared.config.max_filter_values,
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

    /// The body of [`Search::run`] (which counts it, [`crate::measured`]): validate, embed the query (BM25
    /// alone if that fails), fan out, merge each lane, fuse.
    pub(crate) async fn search_unmeasured(
        &self,
        req: pb::SearchRequest,
        request_id: String,
    ) -> Result<pb::SearchResponse, RouterError> {
        let rec = self.shared.view.get(&req.collection)?;
        let checked = self.check_search(req, &rec, "")?;
        let mut answers = self.run_searches(&rec, vec![checked], request_id).await?;
        Ok(answers.remove(0))
    }

    /// Several searches of one collection and tenant as one: one embedding call for their query texts, one
    /// round trip per shard, one payload fetch per shard. An invalid search fails the batch, its field named
    /// `searches[i].…`.
    pub(crate) async fn search_batch_unmeasured(
        &self,
        reqs: Vec<pb::SearchRequest>,
        request_id: String,
    ) -> Result<pb::SearchBatchResponse, RouterError> {
        let started = Instant::now();
        let Some(first) = reqs.first() else {
            return Err(RouterError::invalid("searches", "empty batch"));
        };
        if reqs.len() > limits::MAX_BATCH_SEARCHES {
            return Err(RouterError::invalid(
                "searches",
                format!(
                    "{} in one batch; at most {}",
                    reqs.len(),
                    limits::MAX_BATCH_SEARCHES
                ),
            ));
        }
        let (collection, tenant) = (first.collection.clone(), self.tenant_of(first));
        if let Some(i) = reqs
            .iter()
            .position(|r| r.collection != collection || self.tenant_of(r) != tenant)
        {
            return Err(RouterError::invalid(
                format!("searches[{i}]"),
                "every search of a batch must name the same collection and tenant",
            ));
        }
        let rec = self.shared.view.get(&collection)?;
        let checked = reqs
            .into_iter()
            .enumerate()
            .map(|(i, r)| self.check_search(r, &rec, &format!("searches[{i}].")))
            .collect::<Result<Vec<_>, _>>()?;
        let results = self.run_searches(&rec, checked, request_id.clone()).await?;
        Ok(pb::SearchBatchResponse {
            results,
            request_id,
            took_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The tenant a search acts as (the router's default when it names none).
    pub(crate) fn tenant_of(&self, req: &pb::SearchRequest) -> String {
        self.shared
            .config
            .tenant_or_default(Some(&req.tenant))
            .to_string()
    }

    /// A search request of `rec` checked against the limits (`field` prefixes the name of the field an error
    /// names).
    fn check_search(
        &self,
        mut req: pb::SearchRequest,
        rec: &CollectionRecord,
        field: &str,
    ) -> Result<Checked, RouterError> {
        let invalid =
            |name: &str, reason: String| RouterError::invalid(format!("{field}{name}"), reason);
        let query = req.query.trim().to_string();
        if query.len() > self.shared.config.max_query_bytes {
            return Err(invalid(
                "query",
                format!("longer than {} bytes", self.shared.config.max_query_bytes),
            ));
        }
        let k = req.k.unwrap_or(self.shared.config.default_k as u32) as usize;
        if k == 0 || k > self.shared.config.max_k {
            return Err(invalid(
                "k",
                format!("must be between 1 and {}", self.shared.config.max_k),
            ));
        }
        if let Some(filter) = &req.filter {
            self.check_filter_size(filter).map_err(|e| match e {
                RouterError::InvalidArgument {
                    field: name,
                    reason,
                } => invalid(&name, reason),
                other => other,
            })?;
        }
        // Unset: the collection's own setting (its shards' tuned one, under a recall target). One the caller
        // chose must fit the collection's lists.
        let nprobe = match req.nprobe {
            None => rec.index.default_nprobe(),
            Some(nprobe) => match limits::nprobe_problem(nprobe, rec.index.nlist) {
                Some(problem) => return Err(invalid("nprobe", problem)),
                None => Some(nprobe),
            },
        };
        let rrf_k = req.rrf_k.unwrap_or(self.shared.config.rrf_k);
        if !(rrf_k.is_finite() && rrf_k > 0.0) {
            return Err(invalid("rrf_k", "must be a positive number".into()));
        }
        let (mut want_dense, mut want_bm25) = (req.lanes.is_empty(), req.lanes.is_empty());
        for lane in &req.lanes {
            match lane.as_str() {
                "dense" => want_dense = true,
                "bm25" => want_bm25 = true,
                other => {
                    return Err(invalid(
                        "lanes",
                        format!("unknown lane `{other}` (dense, bm25)"),
                    ))
                }
            }
        }
        for (lane, w) in &req.weights {
            if !LANES.contains(&lane.as_str()) {
                return Err(invalid("weights", format!("unknown lane `{lane}`")));
            }
            if !(w.is_finite() && *w >= 0.0) {
                return Err(invalid(
                    "weights",
                    format!("weight of `{lane}` must be a finite number ≥ 0"),
                ));
            }
        }
        if !req.weights.is_empty() && req.weights.values().all(|w| *w == 0.0) {
            return Err(invalid(
                "weights",
                "all zero: every hit would score 0 (leave weights out for equal lanes)".into(),
            ));
        }
        let vector = (!req.vector.is_empty()).then(|| std::mem::take(&mut req.vector));
        if let Some(problem) = vector
            .as_deref()
            .and_then(|v| limits::vector_problem(v, rec.dimension as usize))
        {
            return Err(invalid("vector", problem));
        }
        // A text is needed unless the caller's vector is all the search uses (the dense lane alone).
        let text_needed = want_bm25 || vector.is_none();
        if text_needed && query.chars().all(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "query",
                "empty (nothing but whitespace or control characters)".into(),
            ));
        }
        let weight = |lane: &str| {
            req.weights
                .get(lane)
                .or_else(|| self.shared.config.lane_weights.get(lane))
                .copied()
                .unwrap_or_else(|| crate::rrf::default_lane_weight(lane))
        };
        Ok(Checked {
            tenant: self.tenant_of(&req),
            k,
            rrf_k,
            want_dense,
            want_bm25,
            dense_weight: weight("dense"),
            bm25_weight: weight("bm25"),
            query,
            vector,
            nprobe,
            filter: req.filter,
        })
    }

    /// The query vectors of `texts` from one embedder call, or `None` when it fails (counted and logged: the
    /// searches then answer from BM25 alone and say so, never an error).
    async fn embed_queries(
        &self,
        embedder: Arc<CachedEmbedder<Arc<dyn Embedder>>>,
        texts: Vec<String>,
        request_id: &str,
    ) -> Option<Vec<Vec<f32>>> {
        let embed_started = Instant::now();
        let rid = request_id.to_string();
        let wanted = texts.len();
        let embedded = attest_telemetry::cpu::run_cpu_intensive(move || {
            // An asymmetric model's instruction goes before each query (passages are embedded as written).
            let prefix = embedder.query_prefix();
            let texts: Vec<String> = if prefix.is_empty() {
                texts
            } else {
                texts.into_iter().map(|t| format!("{prefix}{t}")).collect()
            };
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            attest_telemetry::request_id::with_current(&rid, || embedder.embed(&refs))
        })
        .await;
        observe_stage(STAGE_EMBED, embed_started.elapsed());
        let reason = match embedded {
            Ok(Ok(v)) if v.len() == wanted => return Some(v),
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("embedding task failed: {e}"),
            Ok(Ok(v)) => format!("embedder returned {} vectors for {wanted} queries", v.len()),
        };
        metrics::counter!(EMBEDDING_FALLBACK_TOTAL).increment(1);
        warn!(request_id = %request_id, reason = %reason, event = "embedding_fallback", "query not embedded; answering from BM25 alone");
        None
    }

    /// Embeds, fans out, fuses and fetches checked searches of `rec` (one tenant); one answer per search.
    async fn run_searches(
        &self,
        rec: &CollectionRecord,
        searches: Vec<Checked>,
        request_id: String,
    ) -> Result<Vec<pb::SearchResponse>, RouterError> {
        let started = Instant::now();
        let embeds = |s: &Checked| s.want_dense && s.vector.is_none();
        let texts: Vec<String> = searches
            .iter()
            .filter(|s| embeds(s))
            .map(|s| s.query.clone())
            .collect();
        // SPEC: an embedder failure is never an error; the dense searches answer from BM25 alone. A collection
        // filled by a model this router cannot run is an error, not a fallback: it is so until reconfigured.
        let mut vectors = if texts.is_empty() {
            Some(Vec::new())
        } else {
            let model = self.shared.embedders.for_collection(rec).await?;
            self.embed_queries(model.queries, texts, &request_id).await
        }
        .map(Vec::into_iter);
        let fallback: Vec<bool> = searches
            .iter()
            .map(|s| embeds(s) && vectors.is_none())
            .collect();
        let shard_requests = searches
            .iter()
            .zip(&fallback)
            .map(|(s, &fallback)| {
                let query_vector = match (&s.vector, &mut vectors) {
                    _ if !s.want_dense => Vec::new(),
                    (Some(own), _) => own.clone(),
                    (None, Some(embedded)) => embedded.next().unwrap_or_default(),
                    (None, None) => Vec::new(),
                };
                let query_text = if s.want_bm25 || fallback {
                    s.query.clone()
                } else {
                    String::new()
                };
                let lanes =
                    usize::from(!query_vector.is_empty()) + usize::from(!query_text.is_empty());
                let depth = lane_depth(self.shared.config.lane_depth, s.k, lanes);
                pb::ShardSearchRequest {
                    collection: rec.stored_name.clone(),
                    shard: 0,
                    tenant: s.tenant.clone(),
                    query_vector,
                    query_text,
                    k: depth as u32,
                    nprobe: s.nprobe,
                    filter: s.filter.clone(),
                    include_payload: false,
                    payload_top: payload_top(
                        self.shared.config.payload_inline_factor,
                        s.k,
                        rec.shards as usize,
                        depth,
                    ),
                    exact_rescore: self.shared.config.exact_rescore,
                }
            })
            .collect::<Vec<_>>();
        let depths: Vec<usize> = shard_requests.iter().map(|r| r.k as usize).collect();
        let fanout_started = Instant::now();
        let fans = fan_out(&self.shared, rec, shard_requests, &request_id).await?;
        observe_stage(STAGE_FANOUT, fanout_started.elapsed());
        let fuse_started = Instant::now();
        let mut lists: Vec<Vec<pb::Hit>> = searches
            .iter()
            .zip(&fans)
            .zip(depths)
            .map(|((s, fan), depth)| fuse(fan, depth, s.k, s.rrf_k, s.dense_weight, s.bm25_weight))
            .collect();
        observe_stage(STAGE_FUSE, fuse_started.elapsed());
        let mut missing_shards = fans
            .first()
            .map(|f| f.missing_shards.clone())
            .unwrap_or_default();
        let fetch_started = Instant::now();
        let tenant = searches.first().map_or("", |s| s.tenant.as_str());
        fill_payloads(
            &self.shared,
            rec,
            tenant,
            &mut lists,
            &fans,
            &mut missing_shards,
            &request_id,
        )
        .await;
        observe_stage(STAGE_FETCH, fetch_started.elapsed());
        let took_ms = started.elapsed().as_secs_f64() * 1e3;
        observe_stage(STAGE_TOTAL, started.elapsed());
        Ok(lists
            .into_iter()
            .zip(fallback)
            .map(|(hits, fallback_mode)| pb::SearchResponse {
                hits,
                degraded: !missing_shards.is_empty(),
                missing_shards: missing_shards.clone(),
                fallback_mode,
                request_id: request_id.clone(),
                took_ms,
            })
            .collect())
    }
}

/// How deep each shard searches each lane for a search returning `k` through `lanes` lanes. Fusion ranks
/// by two lists, so each is searched `lane_depth` deep. One lane alone is its own ranking, and the best `k`
/// of the union of every shard's best `k` are the collection's best `k`: `k` deep loses nothing, and a
/// shard's dense lane re-scores `compact_overfetch` × its depth candidates (50 deep for a top 10: 1.6× the
/// CPU of a shard search at 1M, docs/bench/history.md "1M, fourth session").
fn lane_depth(configured: usize, k: usize, lanes: usize) -> usize {
    let depth = if lanes > 1 { configured.max(k) } else { k };
    depth.min(limits::MAX_TOP_K)
}

/// A search checked against the limits: what the fan-out, fusion and fetch need.
struct Checked {
    query: String,
    /// The caller's query vector, used instead of embedding `query`.
    vector: Option<Vec<f32>>,
    tenant: String,
    k: usize,
    rrf_k: f64,
    want_dense: bool,
    want_bm25: bool,
    dense_weight: f64,
    bm25_weight: f64,
    /// Lists probed per shard: the request's, checked, or the collection's (none: each replica's tuned setting).
    nprobe: Option<u32>,
    filter: Option<pb::Filter>,
}

#[cfg(test)]
mod tests {
    use super::lane_depth;
    use attest_core::limits::MAX_TOP_K;

    #[test]
    fn fused_lanes_are_searched_deep_and_a_lone_lane_k_deep() {
        assert_eq!(lane_depth(50, 10, 2), 50, "fusion needs the deep lists");
        assert_eq!(lane_depth(50, 80, 2), 80, "never shallower than k");
        assert_eq!(
            lane_depth(50, 10, 1),
            10,
            "one lane: each shard's top k holds the top k"
        );
        assert_eq!(lane_depth(50, 10, 0), 10);
        assert_eq!(lane_depth(50, MAX_TOP_K + 5, 2), MAX_TOP_K);
        assert_eq!(lane_depth(MAX_TOP_K * 2, 10, 2), MAX_TOP_K);
    }
}
