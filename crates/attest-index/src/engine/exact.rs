//! Exact dense search: every live row of a tenant that passes the filter, scored from its full vector — what the
//! live recall estimate ([`crate::recall_probe`]) holds a served search against. Slow by design (a scan of the
//! whole replica) and run only by the probe thread. Sealed segments are scanned without the state lock (their rows
//! never change; only whether a row is still its document's live version is asked under it), so writes and
//! searches do not queue behind a scan.

use std::sync::Arc;

use super::ranking::best_passing;
use super::{RowView, SegmentView, ShardEngine};
use crate::filter::Filter;
use crate::segment::SealedSegment;
use crate::simd::dot;

impl ShardEngine {
    /// The chunk ids of the exact top `k` for `query`, best first.
    pub(crate) fn exact_dense(
        &self,
        tenant: &str,
        query: &[f32],
        filter: &Filter,
        k: usize,
    ) -> Vec<String> {
        let matches = |r: &RowView<'_>| r.tenant == tenant && filter.matches(r.metadata_json);
        let mut best: Vec<(String, f32)> = Vec::new();
        let sealed: Vec<Arc<SealedSegment>> = {
            let st = self.state.read();
            let passes = |r: &RowView<'_>| matches(r) && st.is_live(r.tenant, r.doc_id, r.seq);
            for view in st.views() {
                if let SegmentView::Growing(g) = view {
                    let scored = (0..g.len())
                        .map(|row| (row, dot(query, g.vector(row))))
                        .collect();
                    let kept = best_passing(scored, k, |row| view.row(row), &passes);
                    best.extend(
                        kept.into_iter()
                            .map(|(r, s, _)| (r.chunk_id.to_string(), s)),
                    );
                }
            }
            st.sealed.clone()
        };
        for segment in &sealed {
            let view = SegmentView::Sealed(segment);
            let scored: Vec<(usize, f32)> = (0..segment.meta.rows)
                .filter_map(|row| {
                    view.row(row).filter(|r| matches(r))?;
                    Some((row, dot(query, view.vector(row)?)))
                })
                .collect();
            let st = self.state.read();
            let live = |r: &RowView<'_>| st.is_live(r.tenant, r.doc_id, r.seq);
            let kept = best_passing(scored, k, |row| view.row(row), &live);
            best.extend(
                kept.into_iter()
                    .map(|(r, s, _)| (r.chunk_id.to_string(), s)),
            );
        }
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut seen = std::collections::HashSet::new();
        best.retain(|(id, _)| seen.insert(id.clone()));
        best.truncate(k);
        best.into_iter().map(|(id, _)| id).collect()
    }

    pub(crate) fn recall_probe(&self) -> &crate::recall_probe::RecallProbe {
        &self.recall
    }
}
