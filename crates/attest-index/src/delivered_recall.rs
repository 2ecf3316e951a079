//! The recall a replica's searches deliver to its collection's searches, not to its own (issue 73). The router
//! asks each of a collection's S shards for the same k hits and keeps the k best of them all, so of the true top
//! k a shard holds only some, and they are its own first ranks: at 1M rows over six shards a replica served 0.966
//! of its own top 10, while the router's merge kept 0.987–0.997 of the true top 10 — what IVF misses is mostly
//! a replica's ranks 8 to 10, which the merge rarely wants.
//!
//! With rows placed on shards by a hash, the number of the true top k a shard holds is Binomial(k, 1/S), so its
//! local rank r is one of them with probability w_r = P(Bin(k, 1/S) ≥ r), and the share of the true top k the
//! router keeps is Σ_r hit_r·w_r / Σ_r w_r, where hit_r says whether the replica served its exact rank r (the
//! router's merge by full-vector scores keeps every true top-k hit served: nothing served outranks it). For S = 1
//! every weight is 1 and this is plain recall@k. The probe's estimate and the tuner's measurement both use it, so a
//! replica is held to the recall its collection delivers, and the figures compare with what a client measures.

/// Whether each of the exact top k (in rank order) was among the served ids.
pub(crate) fn hits(served: &[String], exact: &[String]) -> Vec<bool> {
    exact.iter().map(|id| served.contains(id)).collect()
}

/// w_r = P(Bin(k, 1/shards) ≥ r) for r = 1..=ranks (ranks ≤ k): how likely a replica's local rank r is among
/// its collection's top k. Summed in log space from the top, so that k in the thousands neither under- nor
/// overflows.
///
/// The weights of ranks 1..=j are the first j of those of ranks 1..=k, so one vector serves every shorter list.
pub(crate) fn rank_weights(k: usize, shards: u32, ranks: usize) -> Vec<f64> {
    let ranks = ranks.min(k);
    if shards <= 1 {
        return vec![1.0; ranks];
    }
    let p = 1.0 / f64::from(shards);
    let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
    // ln C(k, j), j = 0..=k.
    let mut ln_choose = Vec::with_capacity(k + 1);
    ln_choose.push(0.0f64);
    for j in 1..=k {
        let previous = ln_choose[j - 1];
        ln_choose.push(previous + ((k - j + 1) as f64).ln() - (j as f64).ln());
    }
    let mut tail = vec![0.0; k + 2];
    for j in (1..=k).rev() {
        let pmf = (ln_choose[j] + j as f64 * ln_p + (k - j) as f64 * ln_q).exp();
        tail[j] = tail[j + 1] + pmf;
    }
    tail[1..=ranks].iter().map(|w| w.min(1.0)).collect()
}

/// The share of a search's true top k that the router keeps, from whether the replica served each of its exact
/// top ranks (`hits`, at most k of them: fewer where the replica holds fewer matching rows), given the rank
/// weights of that k over the collection's shards ([`rank_weights`]; at least `hits.len()` of them). None without
/// a rank to find.
pub(crate) fn share_kept(hits: &[bool], weights: &[f64]) -> Option<f64> {
    let weights = &weights[..hits.len().min(weights.len())];
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let kept: f64 = hits
        .iter()
        .zip(weights)
        .filter(|(hit, _)| **hit)
        .map(|(_, w)| w)
        .sum();
    Some(kept / total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `share_kept` with the weights of `k` over `shards` computed for this one search.
    fn delivered(hits: &[bool], k: usize, shards: u32) -> Option<f64> {
        share_kept(hits, &rank_weights(k, shards, hits.len()))
    }
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn one_shard_is_plain_recall_at_k() {
        assert_eq!(rank_weights(10, 1, 10), vec![1.0; 10]);
        assert_eq!(rank_weights(10, 1, 4), rank_weights(10, 1, 10)[..4]);
        assert_eq!(
            rank_weights(10, 6, 4),
            rank_weights(10, 6, 10)[..4],
            "a prefix"
        );
        let hits = [true, false, true, true];
        assert_eq!(delivered(&hits, 10, 1), Some(0.75));
        assert_eq!(delivered(&[], 10, 6), None);
    }

    #[test]
    fn the_weights_are_the_binomial_tail() {
        // k = 10 over 6 shards: P(N ≥ 1) = 1 − (5/6)^10, and E[N] = Σ_r P(N ≥ r) = 10/6.
        let w = rank_weights(10, 6, 10);
        assert!(
            (w[0] - (1.0 - (5.0f64 / 6.0).powi(10))).abs() < 1e-12,
            "{w:?}"
        );
        assert!((w.iter().sum::<f64>() - 10.0 / 6.0).abs() < 1e-9);
        assert!(w.windows(2).all(|p| p[0] >= p[1]), "{w:?}");
        // Thousands deep over two shards: no underflow, and the mean is still k/S.
        let deep = rank_weights(1000, 2, 1000);
        assert!((deep.iter().sum::<f64>() - 500.0).abs() < 1e-6);
        assert!(deep
            .iter()
            .all(|w| w.is_finite() && (0.0..=1.0).contains(w)));
    }

    #[test]
    fn a_miss_at_a_late_rank_costs_the_collection_less_than_one_at_the_first() {
        let mut late = vec![true; 10];
        late[9] = false;
        let mut first = vec![true; 10];
        first[0] = false;
        let (late, first) = (
            delivered(&late, 10, 6).unwrap(),
            delivered(&first, 10, 6).unwrap(),
        );
        assert!(late > 0.999 && first < 0.6, "late {late}, first {first}");
    }

    /// The estimate against the thing itself: rows spread over shards at random, each shard serving its exact
    /// ranks with a rate that falls with the rank, and the router keeping the k best of what they served.
    #[test]
    fn the_estimate_matches_a_simulated_merge() {
        let (k, shards, queries) = (10usize, 6u32, 20_000);
        let serve_rate = |rank: usize| 1.0 - 0.02 * rank as f64; // rank 0: always; rank 9: 0.82.
        let mut rng = StdRng::seed_from_u64(7);
        let (mut merged, mut estimated, mut local) = (0.0, 0.0, 0.0);
        for _ in 0..queries {
            // The true top k by global rank, each on a random shard; a shard's rows beyond them rank after.
            let owner: Vec<u32> = (0..k).map(|_| rng.gen_range(0..shards)).collect();
            let mut kept = 0;
            for shard in 0..shards {
                let mine: Vec<usize> = (0..k).filter(|&g| owner[g] == shard).collect();
                // This shard's exact top k: its share of the true top k, then rows no merge keeps.
                let served: Vec<bool> = (0..k).map(|r| rng.gen_bool(serve_rate(r))).collect();
                kept += mine.len().min(k) - (0..mine.len()).filter(|&r| !served[r]).count();
                if shard == 0 {
                    estimated += delivered(&served, k, shards).unwrap();
                    local += delivered(&served, k, 1).unwrap();
                }
            }
            merged += kept as f64 / k as f64;
        }
        let n = queries as f64;
        let (merged, estimated, local) = (merged / n, estimated / n, local / n);
        assert!(
            (merged - estimated).abs() < 0.003,
            "merged {merged}, estimated {estimated}"
        );
        assert!(
            local < merged - 0.05,
            "a replica's own recall {local} reads low"
        );
    }
}
