//! Weighted Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009,
//! <https://plg.uwaterloo.ca/~gvcormac/cormacksigir09-rrf.pdf>):
//! `score(d) = Σ_lane w_lane / (k + rank_lane(d))`, ranks starting at 1.
//!
//! Properties (property-tested below): the order in which lanes are given does not matter; improving an item's
//! rank in a lane never lowers its fused score; a lane with weight 0 changes nothing; a larger `k` flattens the
//! differences between ranks. Ties are broken by the item itself, so the output is deterministic.

use std::collections::HashMap;
use std::hash::Hash;

/// Default `k` of the paper and of the SPEC.
pub const DEFAULT_RRF_K: f64 = 60.0;

/// The dense lane's default weight (BM25's is 1): chosen on held-in squad-dev and shift-reddit among 1.0, 0.7,
/// 0.5 and 0.3 as the largest at which the hybrid beats both its lanes on both (all-MiniLM-L6-v2, whose dense lane
/// is 0.10–0.15 nDCG@10 under BM25 there; docs/decisions/embedders.md). At 0.3 the dense lane's first hit weighs
/// as BM25's 143rd: it orders the candidates BM25 scores alike and brings in what BM25 misses.
pub const DEFAULT_DENSE_WEIGHT: f64 = 0.3;

/// A lane's weight when neither the request nor `router.lane_weights` gives one.
pub fn default_lane_weight(lane: &str) -> f64 {
    if lane == "dense" {
        DEFAULT_DENSE_WEIGHT
    } else {
        1.0
    }
}

/// One ranked list (best first) with its weight.
#[derive(Debug, Clone)]
pub struct RankedLane<T> {
    pub weight: f64,
    pub items: Vec<T>,
}

/// Fuses ranked lists; returns every item once with its fused score, best first. An item repeated inside one
/// lane counts at its best rank only. Weights must be finite and ≥ 0, `k` finite and > 0 (checked by callers).
pub fn reciprocal_rank_fusion<T: Clone + Eq + Hash + Ord>(
    lanes: &[RankedLane<T>],
    k: f64,
) -> Vec<(T, f64)> {
    let mut scores: HashMap<T, f64> = HashMap::new();
    for lane in lanes {
        let mut seen = std::collections::HashSet::new();
        for (i, item) in lane.items.iter().enumerate() {
            if !seen.insert(item) {
                continue;
            }
            let rank = (i + 1) as f64;
            *scores.entry(item.clone()).or_insert(0.0) += lane.weight / (k + rank);
        }
    }
    let mut out: Vec<(T, f64)> = scores.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lane(weight: f64, items: &[u32]) -> RankedLane<u32> {
        RankedLane {
            weight,
            items: items.to_vec(),
        }
    }

    fn score_of(fused: &[(u32, f64)], item: u32) -> f64 {
        fused
            .iter()
            .find(|(i, _)| *i == item)
            .map_or(0.0, |(_, s)| *s)
    }

    #[test]
    fn matches_the_formula() {
        let fused = reciprocal_rank_fusion(&[lane(1.0, &[1, 2, 3]), lane(0.5, &[3, 1])], 60.0);
        assert!((score_of(&fused, 1) - (1.0 / 61.0 + 0.5 / 62.0)).abs() < 1e-12);
        assert!((score_of(&fused, 3) - (1.0 / 63.0 + 0.5 / 61.0)).abs() < 1e-12);
        assert_eq!(fused[0].0, 1);
    }

    #[test]
    fn item_in_both_lanes_beats_items_in_one() {
        let fused = reciprocal_rank_fusion(&[lane(1.0, &[1, 2]), lane(1.0, &[3, 2])], 60.0);
        assert_eq!(fused[0].0, 2);
    }

    fn distinct_list() -> impl Strategy<Value = Vec<u32>> {
        proptest::collection::hash_set(0u32..200, 0..40).prop_map(|s| {
            let mut v: Vec<u32> = s.into_iter().collect();
            v.sort();
            v
        })
    }

    proptest! {
        #[test]
        fn lane_order_does_not_matter(a in distinct_list(), b in distinct_list(), c in distinct_list(),
                                      wa in 0.0f64..3.0, wb in 0.0f64..3.0, k in 1.0f64..200.0) {
            let l = [lane(wa, &a), lane(wb, &b), lane(1.0, &c)];
            let r = [lane(1.0, &c), lane(wb, &b), lane(wa, &a)];
            let x = reciprocal_rank_fusion(&l, k);
            let y = reciprocal_rank_fusion(&r, k);
            prop_assert_eq!(x.len(), y.len());
            for ((i, s), (j, t)) in x.iter().zip(&y) {
                prop_assert_eq!(i, j);
                prop_assert!((s - t).abs() < 1e-12);
            }
        }

        #[test]
        fn promoting_an_item_never_lowers_its_score(a in distinct_list(), b in distinct_list(), pos in 1usize..40, k in 1.0f64..200.0) {
            prop_assume!(pos < a.len());
            let item = a[pos];
            let mut promoted = a.clone();
            promoted.swap(pos, pos - 1);
            let before = reciprocal_rank_fusion(&[lane(1.0, &a), lane(1.0, &b)], k);
            let after = reciprocal_rank_fusion(&[lane(1.0, &promoted), lane(1.0, &b)], k);
            prop_assert!(score_of(&after, item) > score_of(&before, item));
        }

        #[test]
        fn zero_weight_lane_changes_no_order(a in distinct_list(), b in distinct_list(), k in 1.0f64..200.0) {
            let only = reciprocal_rank_fusion(&[lane(1.0, &a)], k);
            let with_zero = reciprocal_rank_fusion(&[lane(1.0, &a), lane(0.0, &b)], k);
            let ranked: Vec<u32> = with_zero.iter().filter(|(_, s)| *s > 0.0).map(|(i, _)| *i).collect();
            prop_assert_eq!(ranked, only.iter().map(|(i, _)| *i).collect::<Vec<_>>());
        }

        #[test]
        fn output_is_sorted_and_unique(a in distinct_list(), b in distinct_list(), k in 1.0f64..200.0) {
            let fused = reciprocal_rank_fusion(&[lane(1.0, &a), lane(2.0, &b)], k);
            prop_assert!(fused.windows(2).all(|w| w[0].1 >= w[1].1));
            let mut ids: Vec<u32> = fused.iter().map(|(i, _)| *i).collect();
            ids.sort();
            ids.dedup();
            prop_assert_eq!(ids.len(), fused.len());
        }

        #[test]
        fn larger_k_flattens_rank_differences(k in 1.0f64..100.0, extra in 1.0f64..500.0) {
            let items: Vec<u32> = (0..10).collect();
            let small = reciprocal_rank_fusion(&[lane(1.0, &items)], k);
            let large = reciprocal_rank_fusion(&[lane(1.0, &items)], k + extra);
            let ratio = |f: &[(u32, f64)]| f[0].1 / f[9].1;
            prop_assert!(ratio(&large) < ratio(&small));
        }
    }
}
