//! The dense lane of a shard's search: a flat scan of the growing (and frozen) segments, and the IVF_PQ
//! search of the sealed ones.
//!
//! Sealed segments encoded with one version of the shard's quantizer are searched as one (issue 18): the query
//! is assigned to its lists once ([`crate::coarse`]), each segment scans those lists, and the best PQ candidates
//! of all of them form one list that is re-scored once — from the SQ8 copies, then the best
//! `engine.exact_refine` × k from the full vectors (at 0 the k hits alone, for their scores; none where
//! `engine.exact_scores` is off) — as a single segment of their combined size would be. A
//! segment trained on its own rows (before the shard had a quantizer) is a group of its own.

use std::collections::BTreeMap;

use super::ranking::{best_few, best_passing, keep_best, rows_by_segment, top_k};
use super::{RowView, SearchParams, SegmentView, ShardEngine};
use crate::error::Result;
use crate::search_tuning::SearchSetting;
use crate::segment::SealedSegment;
use crate::simd::dot;

/// A dense candidate of a group: (the segment's place in the group, its row).
type GroupRow = (usize, usize);

/// How many candidates ahead the SQ8 re-scoring asks for a row to be loaded: enough to cover a memory access
/// while the rows between are scored (~50 ns each with AVX2), few enough that the rows are still cached.
const SQ8_PREFETCH_AHEAD: usize = 8;

impl ShardEngine {
    /// Dense candidates of every segment: each group's best k (at most; fewer when fewer pass).
    pub(super) fn dense_lane<'v>(
        &self,
        views: &[SegmentView<'v>],
        q: &[f32],
        p: &SearchParams<'_>,
        setting: SearchSetting,
        passes: &dyn Fn(&RowView<'_>) -> bool,
    ) -> Result<Vec<(RowView<'v>, f32)>> {
        let mut out = Vec::new();
        // Segments by the quantizer version they were encoded with; those trained on their own rows apart.
        let mut groups: BTreeMap<(u64, usize), Vec<&'v SealedSegment>> = BTreeMap::new();
        for (at, view) in views.iter().enumerate() {
            match view {
                SegmentView::Growing(g) => {
                    // Score every row (a flat scan), then check rows best first: not 50,000 version lookups.
                    let scored = (0..g.len())
                        .map(|row| (row, dot(q, g.vector(row))))
                        .collect();
                    let best = best_passing(scored, p.k, |row| view.row(row), passes);
                    out.extend(best.into_iter().map(|(r, s, _)| (r, s)));
                }
                SegmentView::Sealed(seg) if seg.dense.is_some() => {
                    let key = seg.meta.quantizer.map_or((u64::MAX, at), |v| (v, 0));
                    groups.entry(key).or_default().push(seg);
                }
                SegmentView::Sealed(_) => {}
            }
        }
        for group in groups.values() {
            out.extend(self.sealed_group(group, q, p, setting, passes)?);
        }
        Ok(out)
    }

    /// The best k passing rows of segments that share their coarse centroids and codebooks.
    fn sealed_group<'v>(
        &self,
        group: &[&'v SealedSegment],
        q: &[f32],
        p: &SearchParams<'_>,
        setting: SearchSetting,
        passes: &dyn Fn(&RowView<'_>) -> bool,
    ) -> Result<Vec<(RowView<'v>, f32)>> {
        let dense = |i: usize| group[i].dense.as_ref().expect("grouped segments have one");
        let nprobe = setting.nprobe;
        // With SQ8 copies the PQ list can be deep: it is re-scored in memory from the copies, and only its best
        // `exact_refine` × k from the full vectors.
        let compact = p.exact_rescore;
        // Never shallower than the exact path's list: a collection that asked for a deep one keeps it.
        let overfetch = match compact {
            true => self.config.compact_overfetch.max(self.config.overfetch),
            false => self.config.overfetch,
        };
        let prepared = match compact {
            true => group
                .iter()
                .map(|s| s.compact.prepare(q))
                .collect::<Result<Vec<_>>>()?,
            false => Vec::new(),
        };
        let view = |i: usize| SegmentView::Sealed(group[i]);
        let row = |(i, row): GroupRow| view(i).row(row);
        let rows: usize = group.iter().map(|s| s.meta.rows).sum();
        let assignment = dense(0).coarse_assign(q, nprobe)?;
        // Over-fetch so that tombstones, other tenants and filters still leave k; widen until they do.
        let mut fetch = (p.k * overfetch.max(1)).min(rows);
        loop {
            let mut pooled: Vec<((usize, i64), f32)> = Vec::new();
            let mut exhausted = true;
            for (i, seg) in group.iter().enumerate() {
                let want = fetch.min(seg.meta.rows);
                let raw = dense(i).search_assigned(q, want, &assignment)?;
                exhausted &= raw.len() < want || want >= seg.meta.rows;
                pooled.extend(raw.into_iter().map(|(id, score)| ((i, id), score)));
            }
            // What one segment holding all of the group's rows would have returned. Rows are found for those
            // only: finding one by its id reads the segment's id file (looked up for every segment's whole list,
            // that was a fifth of the search at 1M rows in six segments).
            keep_best(&mut pooled, fetch);
            let pooled = pooled
                .into_iter()
                .filter_map(|((i, id), score)| Some(((i, group[i].row_of(id)?), score)));
            let hits: Vec<(RowView<'v>, f32)> = if compact {
                // The list ranked by the copies; rows checked best first for its top `exact_refine` × k, which
                // are scored again from the full vectors.
                let pooled: Vec<(GroupRow, f32)> = pooled.collect();
                let read_ahead = self.config.prefetch_rows;
                if read_ahead {
                    // The copies about to be scored, then (below) the rows checked and the full vectors
                    // re-scored: where the page cache does not hold them (10M rows a node), random reads, which
                    // asked for at once the disk serves side by side.
                    let rows = rows_by_segment(pooled.iter().map(|&(at, _)| at), group.len());
                    for (segment, rows) in group.iter().zip(rows) {
                        segment.compact.read_ahead(rows);
                    }
                }
                let ranked: Vec<(GroupRow, f32)> = pooled
                    .iter()
                    .enumerate()
                    .map(|(at, &((i, r), s))| {
                        if let Some(&((i, r), _)) = pooled.get(at + SQ8_PREFETCH_AHEAD) {
                            group[i].compact.prefetch(r);
                        }
                        ((i, r), group[i].compact.score(&prepared[i], r).unwrap_or(s))
                    })
                    .collect();
                let refine = setting.exact_refine;
                // The hits' scores from the full vectors (`engine.exact_scores`): the router merges shards by them.
                let rescore = refine > 0 || self.config.exact_scores;
                if read_ahead {
                    let best = best_few(&ranked, p.k * refine.max(1));
                    for (segment, rows) in group.iter().zip(&rows_by_segment(best, group.len())) {
                        segment.chunks.read_ahead(rows);
                        if rescore {
                            segment.vectors.read_ahead(rows.iter().copied());
                        }
                    }
                }
                best_passing(ranked, p.k * refine.max(1), row, passes)
                    .into_iter()
                    .map(|(r, s, (i, at))| match rescore {
                        false => (r, s),
                        true => (r, view(i).vector(at).map_or(s, |v| v.dot(q))),
                    })
                    .collect()
            } else {
                pooled
                    .filter_map(|((i, at), score)| {
                        let r = row((i, at)).filter(|r| passes(r))?;
                        let exact = p.exact_rescore.then(|| view(i).vector(at)).flatten();
                        Some((r, exact.map_or(score, |v| v.dot(q))))
                    })
                    .collect()
            };
            if hits.len() >= p.k || exhausted {
                return Ok(top_k(hits, p.k));
            }
            fetch = (fetch * 4).min(rows);
        }
    }
}
