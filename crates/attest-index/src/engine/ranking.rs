//! Choosing a lane's best rows. A search scores many more candidates than it returns (a whole growing segment,
//! an over-fetched PQ or BM25 list), and whether a row may be returned — its tenant, whether it is still its
//! document's live version (a hash lookup), the metadata filter — costs more than its score. So rows are checked
//! in descending score order, and only until the best `k` that pass are known.

use std::collections::HashSet;

use super::RowView;

/// How many candidates are ordered before the rest, as a multiple of k: enough that the rest is rarely needed
/// (most rows pass), few enough that a 50,000-row growing segment is not sorted for a top 50.
const HEAD_PER_K: usize = 4;

/// The best `k` distinct chunks among `candidates` whose rows pass `passes`, as [`top_k`] would choose them from
/// every passing row: ordered by score (ties by chunk id), one row per chunk, each with its candidate. `row`
/// gives a candidate's row (None: skipped). Rows are looked at best first and only until the k-th distinct chunk
/// is found and no candidate left scores as high.
pub(super) fn best_passing<'v, C: Copy>(
    mut candidates: Vec<(C, f32)>,
    k: usize,
    row: impl Fn(C) -> Option<RowView<'v>>,
    passes: &dyn Fn(&RowView<'_>) -> bool,
) -> Vec<(RowView<'v>, f32, C)> {
    if k == 0 {
        return Vec::new();
    }
    let best_first = |a: &(C, f32), b: &(C, f32)| b.1.total_cmp(&a.1);
    let head = k.saturating_mul(HEAD_PER_K).max(16);
    // Every candidate of the head scores at least as high as every one after it.
    let split = if candidates.len() > head {
        candidates.select_nth_unstable_by(head - 1, best_first);
        head
    } else {
        candidates.len()
    };
    candidates[..split].sort_unstable_by(best_first);
    let mut kept = Vec::new();
    let mut distinct: HashSet<&'v str> = HashSet::new();
    let mut kth_score: Option<f32> = None;
    for i in 0..candidates.len() {
        if i == split {
            candidates[split..].sort_unstable_by(best_first);
        }
        let (candidate, score) = candidates[i];
        if kth_score.is_some_and(|t| score.total_cmp(&t).is_lt()) {
            break;
        }
        let Some(r) = row(candidate) else { continue };
        if !passes(&r) {
            continue;
        }
        if distinct.insert(r.chunk_id) && distinct.len() == k {
            kth_score = Some(score);
        }
        kept.push((r, score, candidate));
    }
    cut(kept, k, |(r, s, _)| (r.chunk_id, *s))
}

/// The `n` best of `candidates` (higher score first; which of equal scores, unspecified), in no particular order:
/// the rows [`best_passing`] reads first, when most pass — what a search asks the page cache for ahead.
pub(super) fn best_few<C: Copy>(candidates: &[(C, f32)], n: usize) -> Vec<C> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    if order.len() > n {
        if n > 0 {
            order.select_nth_unstable_by(n - 1, |&a, &b| {
                candidates[b].1.total_cmp(&candidates[a].1)
            });
        }
        order.truncate(n);
    }
    order.into_iter().map(|i| candidates[i].0).collect()
}

/// `(segment, row)` pairs as each segment's rows, for `segments` segments: what a search asks each segment's files
/// to read ahead.
pub(super) fn rows_by_segment(
    rows: impl IntoIterator<Item = (usize, usize)>,
    segments: usize,
) -> Vec<Vec<usize>> {
    let mut by_segment = vec![Vec::new(); segments];
    for (segment, row) in rows {
        by_segment[segment].push(row);
    }
    by_segment
}

/// Keeps the `n` best candidates (higher score, ties to the lower candidate), in no particular order.
pub(super) fn keep_best<C: Ord + Copy>(candidates: &mut Vec<(C, f32)>, n: usize) {
    if candidates.len() > n {
        if n > 0 {
            candidates.select_nth_unstable_by(n - 1, crate::ivfpq::best_first);
        }
        candidates.truncate(n);
    }
}

/// The `k` best rows, best first (ties by chunk id, so results are deterministic), one per chunk id.
pub(super) fn top_k(rows: Vec<(RowView<'_>, f32)>, k: usize) -> Vec<(RowView<'_>, f32)> {
    cut(rows, k, |(r, s)| (r.chunk_id, *s))
}

/// The one ordering rule of a lane: best score first, ties by chunk id, one entry per chunk id, `k` of them.
fn cut<T>(mut rows: Vec<T>, k: usize, key: impl Fn(&T) -> (&str, f32)) -> Vec<T> {
    rows.sort_by(|a, b| {
        let ((a_id, a_score), (b_id, b_score)) = (key(a), key(b));
        b_score.total_cmp(&a_score).then_with(|| a_id.cmp(b_id))
    });
    rows.dedup_by(|a, b| key(a).0 == key(b).0);
    rows.truncate(k);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn view(chunk_id: &str) -> RowView<'_> {
        RowView {
            chunk_id,
            doc_id: chunk_id,
            tenant: "t",
            title: "",
            text: "",
            metadata_json: "{}",
            seq: 0,
        }
    }

    fn ids<'a>(rows: impl IntoIterator<Item = (RowView<'a>, f32)>) -> Vec<(&'a str, f32)> {
        rows.into_iter().map(|(r, s)| (r.chunk_id, s)).collect()
    }

    proptest! {
        /// Checking rows lazily returns what filtering every row and then taking the top k returns, with ties,
        /// duplicate chunks, rows that fail and candidates without a row.
        #[test]
        fn lazy_choice_equals_filtering_everything(
            scored in prop::collection::vec((0usize..40, 0u8..12, any::<bool>()), 0..300),
            k in 1usize..30,
        ) {
            let names: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
            // Candidate i: chunk name, a coarse score (many ties), whether its row passes; every 7th has no row.
            let candidates: Vec<(usize, f32)> =
                scored.iter().enumerate().map(|(i, (_, s, _))| (i, f32::from(*s) / 4.0)).collect();
            let row = |i: usize| (i % 7 != 6).then(|| view(&names[scored[i].0]));
            let pass_by_chunk: std::collections::HashMap<&str, bool> =
                scored.iter().map(|(c, _, p)| (names[*c].as_str(), *p)).collect();
            let passes = |r: &RowView<'_>| pass_by_chunk[r.chunk_id];
            let everything: Vec<(RowView<'_>, f32)> = candidates
                .iter()
                .filter_map(|&(i, s)| row(i).filter(|r| passes(r)).map(|r| (r, s)))
                .collect();
            let expected = top_k(everything, k);
            let lazy = best_passing(candidates, k, row, &passes);
            prop_assert_eq!(ids(lazy.into_iter().map(|(r, s, _)| (r, s))), ids(expected));
        }
    }

    #[test]
    fn keep_best_keeps_the_best_with_ties_to_the_lower_candidate() {
        let mut c = vec![
            (5, 0.5),
            (1, 0.9),
            (3, 0.5),
            (2, 0.1),
            (4, 0.5),
            (0, f32::NAN),
        ];
        keep_best(&mut c, 3);
        c.sort_unstable_by_key(|(id, _)| *id);
        assert_eq!(c, vec![(1, 0.9), (3, 0.5), (4, 0.5)]);
        keep_best(&mut c, 10);
        assert_eq!(c.len(), 3);
        keep_best(&mut c, 0);
        assert!(c.is_empty());
    }

    #[test]
    fn rows_past_the_kth_distinct_chunk_are_not_looked_at() {
        let names: Vec<String> = (0..1000).map(|i| format!("c{i:04}")).collect();
        let candidates: Vec<(usize, f32)> = (0..1000).map(|i| (i, 1000.0 - i as f32)).collect();
        let looked = std::cell::Cell::new(0);
        let row = |i: usize| {
            looked.set(looked.get() + 1);
            Some(view(&names[i]))
        };
        // Rows whose number ends in 0, 3, 6 or 9 fail: the best 10 passing are rows 1, 2, 4, 5, … 15.
        let passes = |r: &RowView<'_>| !r.chunk_id.ends_with(['0', '3', '6', '9']);
        let best = best_passing(candidates, 10, row, &passes);
        assert_eq!(best.len(), 10);
        assert_eq!(best[0].0.chunk_id, "c0001");
        assert!(
            looked.get() <= 20,
            "looked at {} rows for a top 10",
            looked.get()
        );
    }
}
