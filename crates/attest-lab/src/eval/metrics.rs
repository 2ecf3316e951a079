//! Ranking and answering metrics of EVALUATION.md, as pure functions: nDCG@k, recall@k, MRR@k, percentiles,
//! and the risk–coverage curve with its operating point (most coverage under a hallucination budget).

use std::collections::HashMap;

/// nDCG@k with graded relevance (gain = grade, log2 discount); 0 when nothing is relevant.
pub fn ndcg_at(k: usize, ranked: &[String], relevant: &HashMap<String, u32>) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| f64::from(*relevant.get(id).unwrap_or(&0)) / ((i + 2) as f64).log2())
        .sum();
    let mut grades: Vec<u32> = relevant.values().copied().filter(|g| *g > 0).collect();
    grades.sort_unstable_by(|a, b| b.cmp(a));
    let ideal: f64 = grades
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| f64::from(*g) / ((i + 2) as f64).log2())
        .sum();
    if ideal == 0.0 {
        0.0
    } else {
        dcg / ideal
    }
}

/// Share of the relevant documents found in the top k.
pub fn recall_at(k: usize, ranked: &[String], relevant: &HashMap<String, u32>) -> f64 {
    let total = relevant.values().filter(|g| **g > 0).count();
    if total == 0 {
        return 0.0;
    }
    let found = ranked
        .iter()
        .take(k)
        .filter(|id| relevant.get(*id).is_some_and(|g| *g > 0))
        .count();
    found as f64 / total as f64
}

/// 1 / rank of the first relevant document within the top k, else 0.
pub fn mrr_at(k: usize, ranked: &[String], relevant: &HashMap<String, u32>) -> f64 {
    ranked
        .iter()
        .take(k)
        .position(|id| relevant.get(id).is_some_and(|g| *g > 0))
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// Documents in rank order without repeats (several chunks of one document count once, at the best rank).
pub fn dedup_docs<'a>(doc_ids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    doc_ids
        .into_iter()
        .filter(|d| seen.insert(*d))
        .map(str::to_string)
        .collect()
}

/// The p-th percentile (0..=1) by nearest rank; None for no values.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// One question's outcome for the risk–coverage curve: whether it has an answer in the corpus, and the
/// confidence of the answer given (None when the pipeline abstained whatever the threshold).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub answerable: bool,
    pub confidence: Option<f64>,
}

/// A point of the curve: answering only when confidence ≥ `threshold`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CurvePoint {
    pub threshold: f64,
    pub coverage: f64,
    pub hallucination_rate: f64,
}

/// The 95% Wilson score interval of a rate of `hits` in `n` trials ([0, 1] when there are none): unlike the
/// normal approximation it stays inside 0..1 and is honest at rates near 0, where hallucination rates live.
pub fn wilson_interval(hits: usize, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    const Z: f64 = 1.959_963_984_540_054;
    let (n, p) = (n as f64, hits as f64 / n as f64);
    let centre = p + Z * Z / (2.0 * n);
    let spread = Z * (p * (1.0 - p) / n + Z * Z / (4.0 * n * n)).sqrt();
    let scale = 1.0 + Z * Z / n;
    // Clamped to hold the rate itself: at 0 of n, rounding leaves the lower bound a hair above 0.
    [
        ((centre - spread) / scale).clamp(0.0, p),
        ((centre + spread) / scale).clamp(p, 1.0),
    ]
}

/// A rate of `hits` in `n` with its 95% Wilson interval (`lo`..`hi`): how a hallucination rate or a coverage
/// of a sample is reported, so that a figure over a few dozen questions reads as the guess it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rate {
    pub rate: f64,
    pub lo: f64,
    pub hi: f64,
    pub hits: usize,
    pub n: usize,
}

impl Rate {
    pub fn of(hits: usize, n: usize) -> Rate {
        let [lo, hi] = wilson_interval(hits, n);
        Rate {
            rate: hits as f64 / n.max(1) as f64,
            lo,
            hi,
            hits,
            n,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3} ({:.3}–{:.3}) {}/{}",
            self.rate, self.lo, self.hi, self.hits, self.n
        )
    }
}

/// Coverage and hallucination rate at `threshold`.
pub fn point_at(outcomes: &[Outcome], threshold: f64) -> CurvePoint {
    let (mut answerable, mut covered, mut unanswerable, mut hallucinated) = (0usize, 0, 0, 0);
    for o in outcomes {
        let answered = o.confidence.is_some_and(|c| c >= threshold);
        if o.answerable {
            answerable += 1;
            covered += usize::from(answered);
        } else {
            unanswerable += 1;
            hallucinated += usize::from(answered);
        }
    }
    CurvePoint {
        threshold,
        coverage: covered as f64 / answerable.max(1) as f64,
        hallucination_rate: hallucinated as f64 / unanswerable.max(1) as f64,
    }
}

/// The curve over `steps + 1` thresholds from 0 to 1.
pub fn risk_coverage(outcomes: &[Outcome], steps: usize) -> Vec<CurvePoint> {
    let steps = steps.max(1);
    (0..=steps)
        .map(|i| point_at(outcomes, i as f64 / steps as f64))
        .collect()
}

/// The point with the most coverage whose hallucination rate is within `budget` (ties: the lower threshold);
/// None when no threshold meets the budget.
pub fn operating_point(curve: &[CurvePoint], budget: f64) -> Option<CurvePoint> {
    curve
        .iter()
        .filter(|p| p.hallucination_rate <= budget)
        .fold(None, |best: Option<CurvePoint>, p| match best {
            Some(b) if b.coverage >= p.coverage => Some(b),
            _ => Some(*p),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rel(ids: &[(&str, u32)]) -> HashMap<String, u32> {
        ids.iter().map(|(i, g)| (i.to_string(), *g)).collect()
    }
    fn ranked(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranking_metrics_by_hand() {
        let r = rel(&[("a", 1)]);
        assert_eq!(ndcg_at(10, &ranked(&["a", "b"]), &r), 1.0);
        let second = ndcg_at(10, &ranked(&["b", "a"]), &r);
        assert!((second - 1.0 / 3f64.log2()).abs() < 1e-12);
        assert_eq!(mrr_at(10, &ranked(&["b", "c", "a"]), &r), 1.0 / 3.0);
        assert_eq!(mrr_at(2, &ranked(&["b", "c", "a"]), &r), 0.0);
        let two = rel(&[("a", 1), ("b", 1)]);
        assert_eq!(recall_at(1, &ranked(&["a", "b"]), &two), 0.5);
        assert_eq!(recall_at(10, &ranked(&["x"]), &two), 0.0);
        assert_eq!(
            dedup_docs(["d1", "d2", "d1", "d3"]),
            ranked(&["d1", "d2", "d3"])
        );
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.95), Some(95.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_operating_point_maximises_coverage_within_budget() {
        let o = |answerable, c: Option<f64>| Outcome {
            answerable,
            confidence: c,
        };
        let outcomes = vec![
            o(true, Some(0.9)),
            o(true, Some(0.6)),
            o(true, None),
            o(false, Some(0.7)),
            o(false, Some(0.2)),
        ];
        let curve = risk_coverage(&outcomes, 10);
        let best = operating_point(&curve, 0.0).unwrap();
        assert!((best.threshold - 0.8).abs() < 1e-9, "{best:?}");
        assert!((best.coverage - 1.0 / 3.0).abs() < 1e-9);
        let loose = operating_point(&curve, 0.5).unwrap();
        assert!((loose.coverage - 2.0 / 3.0).abs() < 1e-9, "{loose:?}");
        assert_eq!(operating_point(&curve, -1.0), None);
    }

    proptest! {
        #[test]
        fn coverage_and_hallucination_never_grow_with_the_threshold(
            raw in proptest::collection::vec((any::<bool>(), proptest::option::of(0.0f64..1.0)), 1..60)
        ) {
            let outcomes: Vec<Outcome> = raw.iter().map(|(a, c)| Outcome { answerable: *a, confidence: *c }).collect();
            let curve = risk_coverage(&outcomes, 20);
            for w in curve.windows(2) {
                prop_assert!(w[1].coverage <= w[0].coverage);
                prop_assert!(w[1].hallucination_rate <= w[0].hallucination_rate);
            }
        }

        #[test]
        fn ranking_metrics_stay_in_unit_range(n in 1usize..30, hits in proptest::collection::vec(0usize..30, 0..10)) {
            let docs: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
            let relevant: HashMap<String, u32> = hits.iter().map(|h| (format!("d{h}"), 1)).collect();
            for m in [ndcg_at(10, &docs, &relevant), recall_at(10, &docs, &relevant), mrr_at(10, &docs, &relevant)] {
                prop_assert!((0.0..=1.0 + 1e-12).contains(&m));
            }
        }
    }

    #[test]
    fn wilson_interval_matches_the_textbook_values() {
        // 10 of 100: 0.0552–0.1744 (Wilson, 95%).
        let [lo, hi] = wilson_interval(10, 100);
        assert!(
            (lo - 0.0552).abs() < 1e-3 && (hi - 0.1744).abs() < 1e-3,
            "{lo} {hi}"
        );
        // None of 50: the lower bound is 0, the upper one is not.
        let [lo, hi] = wilson_interval(0, 50);
        assert!(lo.abs() < 1e-12 && (hi - 0.0713).abs() < 1e-3, "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0), [0.0, 1.0]);
        // All of 20: the upper bound is 1, the lower one 0.8389.
        let [lo, hi] = wilson_interval(20, 20);
        assert!(
            (lo - 0.8389).abs() < 1e-3 && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        // 1 of 2: symmetric around one half, 0.0945–0.9055.
        let [lo, hi] = wilson_interval(1, 2);
        assert!(
            (lo - 0.0945).abs() < 1e-3 && (hi - 0.9055).abs() < 1e-3,
            "{lo} {hi}"
        );
    }

    #[test]
    fn a_rate_carries_its_interval_and_counts() {
        let r = Rate::of(10, 100);
        assert_eq!((r.hits, r.n), (10, 100));
        assert!((r.rate - 0.1).abs() < 1e-12);
        assert_eq!([r.lo, r.hi], wilson_interval(10, 100));
        assert!(r.lo < r.rate && r.rate < r.hi);
        assert_eq!(r.to_string(), "0.100 (0.055–0.174) 10/100");
        let none = Rate::of(0, 0);
        assert_eq!((none.rate, none.lo, none.hi), (0.0, 0.0, 1.0));
    }
}
