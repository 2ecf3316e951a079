//! Exact dense search: every live row of a tenant that passes the filter, scored from its full vector — what the
//! live recall estimate ([`crate::recall_probe`]) holds served searches against, and what a tuning
//! ([`crate::search_tuning`]) measures each setting by. Slow by design (a scan of the whole replica for a batch of
//! queries) and run only by the probe's and the tuner's threads. Sealed segments are scanned without the state lock
//! (their rows never change; only whether a row is still its document's live version is asked under it, in
//! blocks), so writes and searches do not queue behind a scan. A scan leaves the page cache as it found it ([`crate::page_cache`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::{SegmentView, ShardEngine};
use crate::filter::Filter;
use crate::segment::SealedSegment;

impl ShardEngine {
    /// The exact top `k` chunk ids of each query, best first, from one pass over the replica: a tuning's
    /// hundreds of queries and a probe pass's samples read each full vector once. Whether a row is live is asked
    /// once for every row (in blocks, each under a short read lock), not per query.
    pub(crate) fn exact_dense_batch(
        &self,
        queries: &[ExactQuery<'_>],
        k: usize,
    ) -> Vec<Vec<String>> {
        let mut best: Vec<BinaryHeap<Reverse<Scored>>> =
            queries.iter().map(|_| BinaryHeap::new()).collect();
        let sealed: Vec<Arc<SealedSegment>> = {
            let st = self.state.read();
            for view in st.views() {
                if let SegmentView::Growing(_) = view {
                    let live = |row: usize| {
                        view.row(row)
                            .is_some_and(|r| st.is_live(r.tenant, r.doc_id, r.seq))
                    };
                    scan_rows(&view, &live, queries, k, &mut best);
                }
            }
            st.sealed.clone()
        };
        for segment in &sealed {
            let view = SegmentView::Sealed(segment);
            let live = self.live_rows(&view);
            let untouched = segment.untouched();
            scan_rows(&view, &|row| live[row], queries, k, &mut best);
            untouched.restore();
        }
        best.into_iter()
            .map(|heap| {
                let mut ids = heap.into_sorted_vec();
                // Sorted ascending by `Reverse`: best first.
                ids.dedup_by(|a, b| a.0 .1 == b.0 .1);
                ids.into_iter().map(|Reverse(Scored(_, id))| id).collect()
            })
            .collect()
    }

    /// Whether each row of a sealed segment is its document's live version, asked in blocks so that writers
    /// never wait long for the state lock.
    fn live_rows(&self, view: &SegmentView<'_>) -> Vec<bool> {
        const BLOCK: usize = 65_536;
        let rows = view.len();
        let mut live = Vec::with_capacity(rows);
        for start in (0..rows).step_by(BLOCK) {
            let st = self.state.read();
            live.extend((start..(start + BLOCK).min(rows)).map(|row| {
                view.row(row)
                    .is_some_and(|r| st.is_live(r.tenant, r.doc_id, r.seq))
            }));
        }
        live
    }

    pub(crate) fn recall_probe(&self) -> &crate::recall_probe::RecallProbe {
        &self.recall
    }
}

/// Scores every live row of `view` against each query of its tenant that it passes, keeping each query's best
/// `k` in its heap.
fn scan_rows(
    view: &SegmentView<'_>,
    live: &dyn Fn(usize) -> bool,
    queries: &[ExactQuery<'_>],
    k: usize,
    best: &mut [BinaryHeap<Reverse<Scored>>],
) {
    for row in 0..view.len() {
        let (Some(r), Some(v)) = (view.row(row), view.vector(row)) else {
            continue;
        };
        if !live(row) {
            continue;
        }
        for (q, heap) in queries.iter().zip(best.iter_mut()) {
            if r.tenant != q.tenant || !q.filter.matches(r.metadata_json) {
                continue;
            }
            let score = v.dot(q.vector);
            if heap.len() < k {
                heap.push(Reverse(Scored(score, r.chunk_id.to_string())));
            } else if heap.peek().is_some_and(|Reverse(low)| score > low.0) {
                heap.pop();
                heap.push(Reverse(Scored(score, r.chunk_id.to_string())));
            }
        }
    }
}

/// One query of an exact batch.
pub(crate) struct ExactQuery<'a> {
    pub tenant: &'a str,
    pub vector: &'a [f32],
    pub filter: &'a Filter,
}

/// A row's score and chunk id, ordered by score (ties by id) for the batch's heaps.
#[derive(PartialEq)]
struct Scored(f32, String);

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}
