//! A replica's searches: the dense and BM25 lanes over every segment (the growing one, one being sealed, the
//! sealed ones) under one read of the engine's state, and the fetch of the few hits a router keeps.

use std::collections::BTreeMap;

use super::ranking::{best_few, best_passing, rows_by_segment, top_k};
use super::{check_vector, Hit, LaneResults, RowView, SearchParams, SegmentView, ShardEngine};
use crate::config::MAX_TOP_K;
use crate::error::{IndexError, Result};
use crate::text_index::{bm25_search, TextIndex};

impl ShardEngine {
    /// The current title, text and metadata of each named (doc id, chunk id) of `tenant`, read from the log (one
    /// read per document); chunks no longer live are left out. What a search returned ids of, fetched for the few
    /// hits a router keeps (`score` is 0).
    pub fn fetch_chunks(&self, tenant: &str, chunks: &[(String, String)]) -> Result<Vec<Hit>> {
        if tenant.is_empty() {
            return Err(IndexError::invalid("tenant", "a tenant is required"));
        }
        let mut wanted: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (doc_id, chunk_id) in chunks {
            wanted.entry(doc_id).or_default().push(chunk_id);
        }
        // No writer lock: a search's fetch must not queue behind an ingest's synced append. Holding `state` is
        // what keeps each record read here: versions cannot move on meanwhile, and a record is only forgotten
        // once they say it is dead.
        let st = self.state.read();
        let mut out = Vec::with_capacity(chunks.len());
        for (doc_id, chunk_ids) in wanted {
            let Some(v) = st.versions.get(tenant, doc_id).filter(|v| !v.deleted) else {
                continue;
            };
            let (_, logged) = self.live_chunks(v.seq, doc_id)?;
            out.extend(
                logged
                    .into_iter()
                    .filter(|c| chunk_ids.contains(&c.chunk_id.as_str()))
                    .map(|c| Hit {
                        chunk_id: c.chunk_id,
                        doc_id: doc_id.to_string(),
                        title: c.title,
                        text: c.text,
                        metadata_json: c.metadata_json,
                        score: 0.0,
                    }),
            );
        }
        Ok(out)
    }

    /// Dense and BM25 top-k of the tenant's live chunks that pass the filter.
    pub fn search(&self, p: &SearchParams<'_>) -> Result<LaneResults> {
        let out = self.search_with(p, self.setting_for(p))?;
        if let Some(q) = p.query_vector {
            self.recall
                .offer(p.tenant, q, p.filter, p.k, &out.dense, p.nprobe.is_none());
        }
        Ok(out)
    }

    /// [`Self::search`] with the dense lane's setting given (a tuning measures each setting with it).
    pub(super) fn search_with(
        &self,
        p: &SearchParams<'_>,
        setting: crate::search_tuning::SearchSetting,
    ) -> Result<LaneResults> {
        if p.tenant.is_empty() {
            return Err(IndexError::invalid("tenant", "a tenant is required"));
        }
        if p.k == 0 || p.k > MAX_TOP_K {
            return Err(IndexError::invalid(
                "k",
                format!("must be between 1 and {MAX_TOP_K}"),
            ));
        }
        if let Some(q) = p.query_vector {
            check_vector(q, self.config.dimension, "query_vector")?;
        }
        let st = self.state.read();
        let views = st.views();
        let passes = |r: &RowView<'_>| {
            r.tenant == p.tenant
                && st.is_live(r.tenant, r.doc_id, r.seq)
                && p.filter.matches(r.metadata_json)
        };
        // Candidates are borrowed rows until the top k of a lane is known: only those k are copied out.
        let hits = |rows: Vec<(RowView<'_>, f32)>| -> Vec<Hit> {
            top_k(rows, p.k)
                .into_iter()
                .enumerate()
                .map(|(rank, (r, score))| r.to_hit(score, rank < p.payload_top))
                .collect()
        };
        let mut out = LaneResults::default();
        // A span per lane: a trace shows which lane of which shard a slow search spent its time in.
        if let Some(q) = p.query_vector {
            let _lane = tracing::info_span!("dense_lane", segments = views.len()).entered();
            out.dense = hits(self.dense_lane(&views, q, p, setting, &passes)?);
        }
        if let Some(text) = p.query_text.filter(|t| !t.trim().is_empty()) {
            let _lane = tracing::info_span!("bm25_lane", segments = views.len()).entered();
            out.bm25 = hits(self.bm25(&views, text, p, &passes)?);
        }
        Ok(out)
    }

    fn bm25<'v>(
        &self,
        views: &[SegmentView<'v>],
        text: &str,
        p: &SearchParams<'_>,
        passes: &dyn Fn(&RowView<'_>) -> bool,
    ) -> Result<Vec<(RowView<'v>, f32)>> {
        let indexes: Vec<&TextIndex> = views.iter().map(|v| v.text()).collect();
        let max_rows: usize = views.iter().map(|v| v.len()).sum();
        let mut limit = p.k * self.config.overfetch.max(1);
        loop {
            let per_index = bm25_search(&indexes, text, p.tenant, limit)?;
            let full = per_index.iter().any(|rows| rows.len() == limit);
            // One list over every segment (scores are comparable: global statistics), checked best first.
            let candidates: Vec<((usize, u64), f32)> = per_index
                .into_iter()
                .enumerate()
                .flat_map(|(segment, rows)| {
                    rows.into_iter().map(move |(row, s)| ((segment, row), s))
                })
                .collect();
            if self.config.prefetch_rows {
                // The rows the check below reads one by one: random reads where the cache does not hold them.
                let best = best_few(&candidates, p.k).into_iter();
                let rows = rows_by_segment(best.map(|(s, row)| (s, row as usize)), views.len());
                for (view, rows) in views.iter().zip(&rows) {
                    if let SegmentView::Sealed(s) = view {
                        s.chunks.read_ahead(rows);
                    }
                }
            }
            let row = |(segment, row): (usize, u64)| views[segment].row(row as usize);
            let hits: Vec<_> = best_passing(candidates, p.k, row, passes)
                .into_iter()
                .map(|(r, s, _)| (r, s))
                .collect();
            if hits.len() >= p.k || !full || limit >= max_rows {
                return Ok(hits);
            }
            limit *= 4;
        }
    }
}
