//! The reader verifier's support as one calibrated probability (issue 41): a logistic regression over the
//! support head's logit and the lexical verifier's [`features`](super::features), fitted by `attest-lab train
//! support` on the held-in items of HaluEval QA and VitaminC with every (set, label) group weighted alike, so
//! that the product's threshold (`answer.claim_support_threshold`, 0.5) separates one-edit claims (VitaminC)
//! as well as invented ones (HaluEval).
//!
//! It replaces a fixed half-and-half blend of the head and the lexical model, which ranked VitaminC's claims
//! well (AUROC 0.845) but put most unsupported ones above 0.5 (balanced accuracy 0.644): the lexical model,
//! fitted on HaluEval alone, scores any claim that reuses the evidence's words as supported. The parameters are
//! the committed `models/reader/support.json`, fitted to the committed reader's head (its weights are
//! checksummed, so the pair cannot drift apart).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::features::{FEATURE_COUNT, FEATURE_NAMES, FEATURE_SIGNS};
use attest_models::logistic::{LogisticModel, Sign};
use attest_text::text;

/// The committed calibration of the committed reader.
const BUNDLED: &str = attest_models::bundled::READER_SUPPORT_JSON;

/// Head scores are clamped this far from 0 and 1 before their logit is taken.
const HEAD_CLAMP: f64 = 1e-6;

/// Inputs besides the lexical features: the head's logit first, whether the claim is a quote last.
const INPUTS: usize = FEATURE_COUNT + 2;

/// The inputs of one judgement: the support head's probability, the lexical features, and whether the claim is
/// a quote of the passage (its words, in order, are a run of the passage's words).
///
/// The quote flag is there because the extractive composer's claims are quotes, which the head, trained on
/// whole sentences and rewrites, can score low when a quote is a clause or starts with a pronoun; fitted with
/// the synthetic pairs (passage sentences against their one-edit twins), it weighs what quoting proves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SupportInputs {
    pub head: f64,
    pub lexical: [f64; FEATURE_COUNT],
    pub quoted: bool,
}

impl SupportInputs {
    /// The model's input row: the head's logit, the lexical features, the quote flag.
    pub fn row(&self) -> Vec<f64> {
        let p = self.head.clamp(HEAD_CLAMP, 1.0 - HEAD_CLAMP);
        let mut row = Vec::with_capacity(INPUTS);
        row.push((p / (1.0 - p)).ln());
        row.extend_from_slice(&self.lexical);
        row.push(f64::from(u8::from(self.quoted)));
        row
    }
}

/// The sign each input's weight is held to, in row order: support rises with the head and with quoting.
pub fn input_signs() -> Vec<Sign> {
    std::iter::once(Sign::Positive)
        .chain(FEATURE_SIGNS)
        .chain([Sign::Positive])
        .collect()
}

/// The names of the model's inputs, in row order.
pub fn input_names() -> Vec<String> {
    std::iter::once("head_logit")
        .chain(FEATURE_NAMES)
        .chain(["quoted"])
        .map(str::to_string)
        .collect()
}

/// Whether `claim`'s words, in order, are a run of `passage`'s words (case, punctuation and possessives aside).
pub fn is_quote(claim: &str, passage: &str) -> bool {
    let claim = text::words(claim);
    let passage = text::words(passage);
    !claim.is_empty() && passage.windows(claim.len()).any(|w| w == claim.as_slice())
}

/// How well the calibrated support did on one set's held-out items.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HeldoutScores {
    pub items: usize,
    pub auroc: f64,
    /// At 0.5, the product's claim-support threshold.
    pub balanced_accuracy: f64,
}

/// The committed file: the parameters, what they were fitted on and how they did on held-out items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFile {
    pub features: Vec<String>,
    pub model: LogisticModel,
    pub trained_on: String,
    pub split: String,
    pub train_items: usize,
    pub heldout: BTreeMap<String, HeldoutScores>,
}

#[derive(Debug, thiserror::Error)]
#[error("support calibration: {0}")]
pub struct CalibrationError(String);

/// The calibrated support.
#[derive(Debug, Clone)]
pub struct SupportCalibration {
    model: LogisticModel,
}

impl SupportCalibration {
    /// The committed calibration.
    pub fn bundled() -> Self {
        Self::from_json(BUNDLED).expect("the committed support calibration parses")
    }

    pub fn from_json(json: &str) -> Result<Self, CalibrationError> {
        let file: CalibrationFile =
            serde_json::from_str(json).map_err(|e| CalibrationError(e.to_string()))?;
        let dim = INPUTS;
        if file.features != input_names()
            || [
                file.model.weights.len(),
                file.model.means.len(),
                file.model.scales.len(),
            ] != [dim; 3]
        {
            return Err(CalibrationError(format!(
                "inputs {:?} do not match this build's {:?}; refit with `attest-lab train support`",
                file.features,
                input_names()
            )));
        }
        Ok(SupportCalibration { model: file.model })
    }

    pub fn support(&self, inputs: &SupportInputs) -> f64 {
        self.model.predict(&inputs.row())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_calibration_loads_and_follows_the_head() {
        let c = SupportCalibration::bundled();
        let covered = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let sure = c.support(&SupportInputs {
            head: 0.98,
            lexical: covered,
            quoted: false,
        });
        let doubtful = c.support(&SupportInputs {
            head: 0.05,
            lexical: covered,
            quoted: false,
        });
        assert!(
            sure > 0.5 && doubtful < 0.5,
            "sure {sure}, doubtful {doubtful}"
        );
    }

    #[test]
    fn a_quote_is_a_run_of_the_passages_words() {
        let passage = "Denver's defense, led by Von Miller, held Carolina to 10 points.";
        assert!(is_quote("led by Von Miller", passage));
        assert!(is_quote("Denver defense, led by von miller", passage));
        assert!(!is_quote("led by Miller", passage), "a word left out");
        assert!(!is_quote("held Carolina to 12 points", passage));
        assert!(!is_quote("", passage));
    }

    #[test]
    fn a_file_for_other_inputs_is_refused() {
        let mut file: CalibrationFile = serde_json::from_str(BUNDLED).unwrap();
        file.features.pop();
        let err = SupportCalibration::from_json(&serde_json::to_string(&file).unwrap());
        assert!(err.is_err());
    }
}
