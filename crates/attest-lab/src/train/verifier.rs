//! Training and evaluating the local verifier on HaluEval QA (`data/halueval-qa/items.jsonl`).
//!
//! Split (fixed, by question, so the two answers of one question never straddle it): an item `hqNNNNN-…` is
//! held out when `NNNNN % 5 == 0` (20% of the questions), otherwise it trains. The claim is the item's answer,
//! the question its question, the passage its knowledge; label 1 = supported.

use std::path::Path;

use serde::Deserialize;

use crate::train::logistic::{auroc, balanced_accuracy, fit, TrainSettings};
use attest_answer::verifier::features::{features, FEATURE_NAMES, FEATURE_SIGNS};
use attest_answer::verifier::VerifierFile;
use attest_models::logistic::LogisticModel;

#[derive(Debug, Clone, Deserialize)]
pub struct HaluevalItem {
    #[serde(rename = "_id")]
    pub id: String,
    pub knowledge: String,
    pub question: String,
    pub answer: String,
    pub label: u8,
}

impl HaluevalItem {
    /// Whether the item belongs to the held-out split.
    pub fn held_out(&self) -> bool {
        halueval_heldout(&self.id)
    }

    fn row(&self) -> Vec<f64> {
        features(&self.question, &self.answer, &self.knowledge).to_vec()
    }
}

/// Whether the HaluEval item `hqNNNNN-…` is held out (NNNNN % 5 == 0).
pub fn halueval_heldout(id: &str) -> bool {
    id.strip_prefix("hq")
        .and_then(|rest| rest.get(..5))
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n % 5 == 0)
}

pub fn load_items(path: &Path) -> std::io::Result<Vec<HaluevalItem>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}:{}: {e}", path.display(), i + 1),
                )
            })
        })
        .collect()
}

/// Trains on the train split, evaluates on the held-out split.
pub fn train_verifier(items: &[HaluevalItem], source: &str) -> VerifierFile {
    let (train, heldout): (Vec<&HaluevalItem>, Vec<&HaluevalItem>) =
        items.iter().partition(|it| !it.held_out());
    let rows: Vec<Vec<f64>> = train.iter().map(|it| it.row()).collect();
    let labels: Vec<bool> = train.iter().map(|it| it.label == 1).collect();
    let model = fit(&rows, &labels, &FEATURE_SIGNS, TrainSettings::default());
    let (auroc_h, bacc_h) = evaluate(&model, &heldout);
    VerifierFile {
        features: FEATURE_NAMES.iter().map(|s| s.to_string()).collect(),
        model,
        trained_on: source.to_string(),
        split: "held out: items hqNNNNN with NNNNN % 5 == 0".into(),
        train_items: train.len(),
        heldout_items: heldout.len(),
        heldout_auroc: auroc_h,
        heldout_balanced_accuracy: bacc_h,
    }
}

/// AUROC and balanced accuracy (threshold 0.5) of `model` on `items`.
pub fn evaluate(model: &LogisticModel, items: &[&HaluevalItem]) -> (f64, f64) {
    let scores: Vec<f64> = items.iter().map(|it| model.predict(&it.row())).collect();
    let labels: Vec<bool> = items.iter().map(|it| it.label == 1).collect();
    (
        auroc(&scores, &labels),
        balanced_accuracy(&scores, &labels, 0.5),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_keeps_both_answers_of_a_question_together() {
        let item = |id: &str| HaluevalItem {
            id: id.into(),
            knowledge: String::new(),
            question: String::new(),
            answer: String::new(),
            label: 1,
        };
        assert!(item("hq00000-right").held_out() && item("hq00000-hallu").held_out());
        assert!(!item("hq00001-right").held_out());
        assert!(item("hq00015-hallu").held_out());
    }
}
