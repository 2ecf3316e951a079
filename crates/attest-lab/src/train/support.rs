//! Fitting the reader verifier's calibration (`attest-lab train support`): the logistic model over the reader's
//! support head and the lexical features that `attest_answer::verifier::calibration` reads from
//! `models/reader/support.json`.

use std::collections::BTreeMap;

use crate::train::logistic::{auroc, balanced_accuracy, fit_weighted, TrainSettings};
use attest_answer::verifier::calibration::{input_signs, HeldoutScores, SupportInputs};
use attest_models::logistic::LogisticModel;

/// One labelled judgement of a claim-verification set.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub set: String,
    pub inputs: SupportInputs,
    pub supported: bool,
}

/// Fits the calibration; every (set, label) group weighs the same in the loss, so neither a large set nor a
/// set's share of supported claims moves the threshold.
pub fn fit(examples: &[Example]) -> LogisticModel {
    let mut group_sizes: BTreeMap<(&str, bool), usize> = BTreeMap::new();
    for e in examples {
        *group_sizes.entry((&e.set, e.supported)).or_default() += 1;
    }
    let weights: Vec<f64> = examples
        .iter()
        .map(|e| 1.0 / group_sizes[&(e.set.as_str(), e.supported)] as f64)
        .collect();
    let rows: Vec<Vec<f64>> = examples.iter().map(|e| e.inputs.row()).collect();
    let labels: Vec<bool> = examples.iter().map(|e| e.supported).collect();
    fit_weighted(
        &rows,
        &labels,
        &weights,
        &input_signs(),
        TrainSettings::default(),
    )
}

/// AUROC and balanced accuracy at 0.5 of `model` on `examples`.
pub fn score(model: &LogisticModel, examples: &[&Example]) -> HeldoutScores {
    let scores: Vec<f64> = examples
        .iter()
        .map(|e| model.predict(&e.inputs.row()))
        .collect();
    let labels: Vec<bool> = examples.iter().map(|e| e.supported).collect();
    HeldoutScores {
        items: examples.len(),
        auroc: auroc(&scores, &labels),
        balanced_accuracy: balanced_accuracy(&scores, &labels, 0.5),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use attest_answer::verifier::features::FEATURE_COUNT;

    fn example(set: &str, head: f64, coverage: f64, supported: bool) -> Example {
        let mut lexical = [0.0; FEATURE_COUNT];
        lexical[0] = coverage;
        lexical[1] = coverage;
        lexical[2] = coverage;
        Example {
            set: set.into(),
            inputs: SupportInputs {
                head,
                lexical,
                quoted: false,
            },
            supported,
        }
    }

    #[test]
    fn a_set_full_of_reused_words_does_not_lift_its_unsupported_claims_over_the_threshold() {
        // One set's claims all reuse the evidence's words (coverage 1) and only the head tells them apart;
        // the other's unsupported claims bring new words. The fitted threshold must hold for both.
        let mut examples = Vec::new();
        for i in 0..200 {
            let jitter = f64::from(i % 10) / 100.0;
            examples.push(example("edits", 0.8 + jitter, 1.0, true));
            examples.push(example("edits", 0.2 - jitter, 1.0, false));
            examples.push(example("invented", 0.7 + jitter, 1.0, true));
            examples.push(example("invented", 0.5 + jitter, 0.3, false));
        }
        let model = fit(&examples);
        for set in ["edits", "invented"] {
            let of_set: Vec<&Example> = examples.iter().filter(|e| e.set == set).collect();
            let s = score(&model, &of_set);
            assert!(s.balanced_accuracy > 0.95, "{set}: {s:?}");
        }
    }
}
