//! The learned local reranker: logistic regression over [`super::features`], trained on the TRAIN split of
//! squad-dev by `attest-lab train reranker` (see [`super::train`]). Its parameters, what they were trained on and
//! the held-out figures are the committed file `models/reranker.json`; `rerank.model_path` overrides it.

use std::path::Path;

use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};

use super::features::{pool_features, FEATURE_NAMES};
use super::{RerankError, Reranker};
use attest_models::logistic::LogisticModel;

/// The committed reranker model.
const BUNDLED_MODEL: &str = attest_models::bundled::RERANKER_JSON;

/// Ranking quality of one ordering of the candidates, averaged over queries (one relevant document each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RankMetrics {
    pub ndcg_at_10: f64,
    pub mrr_at_10: f64,
    pub recall_at_10: f64,
}

/// Share of queries whose best candidate scores at least each of the coverage gate's thresholds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TopScoreShares {
    pub queries: usize,
    /// `(threshold, share of queries whose top score ≥ threshold)`, thresholds ascending.
    pub at_least: Vec<(f64, f64)>,
    pub median: f64,
}

/// What the held-out split says about the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldoutReport {
    /// Held-out answerable queries evaluated.
    pub queries: usize,
    /// Queries whose gold document is among the candidates (the others rank nothing right whatever the order).
    pub queries_with_gold: usize,
    /// The router's own (fused) order.
    pub router: RankMetrics,
    pub learned: RankMetrics,
    pub lexical: RankMetrics,
    /// Per candidate: gold document or not.
    pub auroc_learned: f64,
    pub auroc_lexical: f64,
    /// The top learned score on held-out answerable queries, and on unanswerable ones (article not in the corpus).
    pub top_learned_answerable: TopScoreShares,
    pub top_learned_unanswerable: TopScoreShares,
    /// The same for the lexical reranker, for comparison.
    pub top_lexical_answerable: TopScoreShares,
    pub top_lexical_unanswerable: TopScoreShares,
}

/// The model file: the parameters plus what they were trained on and how well they did on held-out data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankerFile {
    pub features: Vec<String>,
    pub model: LogisticModel,
    pub trained_on: String,
    pub split: String,
    /// How the candidates were retrieved (collection, lanes, k).
    pub candidates: String,
    pub train_queries: usize,
    pub train_rows: usize,
    /// The held-out split of the first data set trained on (squad-dev).
    pub heldout: HeldoutReport,
    /// The held-out split of every data set trained on, by set name, when there were several.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub heldout_by_set: std::collections::BTreeMap<String, HeldoutReport>,
}

/// The learned local reranker.
#[derive(Debug, Clone)]
pub struct LearnedReranker {
    model: LogisticModel,
}

impl LearnedReranker {
    /// The committed model.
    pub fn bundled() -> Result<Self, RerankError> {
        Self::from_json(BUNDLED_MODEL)
    }

    /// A model file written by `attest-lab train reranker`.
    pub fn from_path(path: &Path) -> Result<Self, RerankError> {
        let json = std::fs::read_to_string(path)
            .map_err(|e| RerankError::Model(format!("reading {}: {e}", path.display())))?;
        Self::from_json(&json).map_err(|e| RerankError::Model(format!("{}: {e}", path.display())))
    }

    pub fn from_json(json: &str) -> Result<Self, RerankError> {
        let file: RerankerFile =
            serde_json::from_str(json).map_err(|e| RerankError::Model(e.to_string()))?;
        Self::from_model(&file.features, file.model)
    }

    /// Checks that `model` was trained on this build's features, in this order.
    pub fn from_model(features: &[String], model: LogisticModel) -> Result<Self, RerankError> {
        let names: Vec<&str> = features.iter().map(String::as_str).collect();
        let n = FEATURE_NAMES.len();
        if names != FEATURE_NAMES
            || model.weights.len() != n
            || model.means.len() != n
            || model.scales.len() != n
        {
            return Err(RerankError::Model(format!(
                "features {names:?} do not match this build's {FEATURE_NAMES:?}; retrain with `attest-lab train reranker`"
            )));
        }
        Ok(LearnedReranker { model })
    }

    pub fn model(&self) -> &LogisticModel {
        &self.model
    }
}

impl Reranker for LearnedReranker {
    fn name(&self) -> &'static str {
        "learned"
    }

    fn score(&self, question: &str, candidates: &[pb::Hit]) -> Result<Vec<f64>, RerankError> {
        Ok(pool_features(question, candidates)
            .iter()
            .map(|row| self.model.predict(row))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(
        id: &str,
        title: &str,
        text: &str,
        bm25: Option<(u32, f32)>,
        dense: Option<(u32, f32)>,
    ) -> pb::Hit {
        pb::Hit {
            chunk_id: id.into(),
            doc_id: id.into(),
            title: title.into(),
            text: text.into(),
            score: 0.016,
            bm25: bm25.map(|(rank, score)| pb::LaneRank { rank, score }),
            dense: dense.map(|(rank, score)| pb::LaneRank { rank, score }),
            ..Default::default()
        }
    }

    #[test]
    fn the_bundled_model_loads_and_ranks_the_relevant_passage_first() {
        let r = LearnedReranker::bundled().expect("the committed model matches this build");
        assert_eq!(r.name(), "learned");
        let q = "In what year did Nikola Tesla move to New York City?";
        let mut pool = vec![
            hit(
                "relevant",
                "Nikola_Tesla",
                "Tesla moved to New York City in 1884. He began working for Thomas Edison there.",
                Some((3, 9.0)),
                Some((2, 0.62)),
            ),
            hit(
                "irrelevant",
                "Amazon_rainforest",
                "The Amazon rainforest covers much of the Amazon basin of South America. Its trees are tall.",
                None,
                Some((1, 0.21)),
            ),
        ];
        // Filler that shares a word or two with the question, as a real pool does.
        for i in 0..30 {
            pool.push(hit(
                &format!("filler{i}"),
                "Some_city",
                &format!("The city had {i} parks in that year. Visitors came from far away."),
                Some((10 + i, 2.0)),
                Some((5 + i, 0.2)),
            ));
        }
        let scores = r.score(q, &pool).expect("scores");
        assert_eq!(scores.len(), pool.len());
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)));
        let best = scores
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i);
        assert_eq!(best, Some(0), "scores {scores:?}");
        assert!(
            scores[0] > scores[1] + 0.2,
            "relevant {} irrelevant {}",
            scores[0],
            scores[1]
        );
    }

    #[test]
    fn a_mismatched_features_list_is_a_clear_error() {
        let good: RerankerFile =
            serde_json::from_str(BUNDLED_MODEL).expect("the committed model parses");
        let mut bad = good.clone();
        bad.features.swap(0, 1);
        let err = LearnedReranker::from_json(&serde_json::to_string(&bad).expect("serialises"))
            .expect_err("swapped features are refused");
        assert!(
            err.to_string()
                .contains("retrain with `attest-lab train reranker`"),
            "{err}"
        );
        let mut short = good;
        short.model.weights.pop();
        assert!(
            LearnedReranker::from_json(&serde_json::to_string(&short).expect("serialises"))
                .is_err()
        );
        assert!(LearnedReranker::from_path(Path::new("/nonexistent/reranker.json")).is_err());
    }
}
