//! Step 8 of SPEC "answer", the coverage gate (CRAG): a handful of plain comparisons on the reranked scores
//! decide whether the pool as a whole can ground an answer — bail out when the best score is below 0.40;
//! ground when it is at least 0.65, or at least 0.55 with 2+ supporting chunks; in between, refine the query and
//! retrieve again (the pipeline stops after `max_hops` retrievals).

use crate::config::AnswerConfig;

/// What the coverage gate says about the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Ground,
    Bail,
    Refine,
}

/// The gate over the pool's scores (any order). An empty pool asks for another try.
pub fn decide(scores: &[f64], config: &AnswerConfig) -> Gate {
    let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if scores.is_empty() {
        return Gate::Refine;
    }
    let supporting = scores
        .iter()
        .filter(|&&s| s >= config.ground_with_support_threshold)
        .count();
    if best >= config.ground_threshold
        || (best >= config.ground_with_support_threshold && supporting >= config.min_supporting)
    {
        Gate::Ground
    } else if best < config.bail_threshold {
        Gate::Bail
    } else {
        Gate::Refine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_of_the_seed() {
        let c = AnswerConfig::default();
        assert_eq!(decide(&[], &c), Gate::Refine);
        assert_eq!(decide(&[0.39, 0.1], &c), Gate::Bail);
        assert_eq!(decide(&[0.40], &c), Gate::Refine);
        assert_eq!(decide(&[0.6, 0.3], &c), Gate::Refine);
        assert_eq!(decide(&[0.3, 0.6, 0.55], &c), Gate::Ground);
        assert_eq!(decide(&[0.65], &c), Gate::Ground);
        assert_eq!(decide(&[0.64, 0.54], &c), Gate::Refine);
    }
}
