//! The verifier (SPEC "answer" step 11): how well does a cited passage support a claim? A score in 0..1.
//!
//! The default is the reader's support head calibrated together with the lexical features ([`calibration`],
//! `models/reader/support.json`, `attest-lab train support`). Without the reader, the learned lexical verifier: a
//! logistic regression over [`features`] learned from HaluEval QA (`attest-lab train verifier`,
//! `models/verifier.json`). Other back ends (an LLM judge over an OpenAI-compatible endpoint, the local GGUF model)
//! implement the same [`Verifier`] trait.

pub mod calibration;
pub mod features;
pub mod judge;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use self::features::{features, FEATURE_NAMES};
pub use self::judge::{
    GgufJudgeVerifier, GgufModel, LlmJudgeVerifier, VerifierBackend, VerifierConfig,
};
use crate::reader::{Reader, ReaderVerifier};
use attest_models::logistic::LogisticModel;

/// Scores the support a passage gives a claim made in answer to a question.
pub trait Verifier: Send + Sync {
    /// 0 = the passage does not support the claim, 1 = it does.
    fn support(&self, question: &str, claim: &str, passage: &str) -> f64;
    /// The same, with the passage's title (a back end that reads titles overrides this).
    fn support_in(&self, question: &str, claim: &str, _title: &str, passage: &str) -> f64 {
        self.support(question, claim, passage)
    }
    /// Support of `answer` as the answer to `question` (HaluEval's items). A back end that reads whole
    /// statements overrides this to read the question and the answer as one.
    fn support_answer(&self, question: &str, answer: &str, passage: &str) -> f64 {
        self.support(question, answer, passage)
    }
}

/// The committed verifier model.
const BUNDLED_MODEL: &str = attest_models::bundled::VERIFIER_JSON;

/// The model file: the parameters plus what they were trained on and how well they did on held-out data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifierFile {
    pub features: Vec<String>,
    pub model: LogisticModel,
    pub trained_on: String,
    pub split: String,
    pub train_items: usize,
    pub heldout_items: usize,
    pub heldout_auroc: f64,
    pub heldout_balanced_accuracy: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum VerifierError {
    #[error("verifier model: {0}")]
    Model(String),
}

/// The learned local verifier.
#[derive(Debug, Clone)]
pub struct LearnedVerifier {
    model: LogisticModel,
}

impl LearnedVerifier {
    /// The committed model.
    pub fn bundled() -> Self {
        Self::from_json(BUNDLED_MODEL).expect("the committed verifier model parses")
    }

    pub fn from_json(json: &str) -> Result<Self, VerifierError> {
        let file: VerifierFile =
            serde_json::from_str(json).map_err(|e| VerifierError::Model(e.to_string()))?;
        Self::from_file(file)
    }

    pub fn from_file(file: VerifierFile) -> Result<Self, VerifierError> {
        let names: Vec<&str> = file.features.iter().map(String::as_str).collect();
        if names != FEATURE_NAMES
            || file.model.weights.len() != FEATURE_NAMES.len()
            || file.model.means.len() != FEATURE_NAMES.len()
            || file.model.scales.len() != FEATURE_NAMES.len()
        {
            return Err(VerifierError::Model(format!(
                "features {names:?} do not match this build's {FEATURE_NAMES:?}; retrain with `attest-lab train verifier`"
            )));
        }
        Ok(LearnedVerifier { model: file.model })
    }
}

impl Verifier for LearnedVerifier {
    fn support(&self, question: &str, claim: &str, passage: &str) -> f64 {
        self.model.predict(&features(question, claim, passage))
    }
}

/// The verifier `v` (`answer.verifier`) names, over the reader the service loaded (None: `reader.backend: lexical`,
/// and the reader back end is the learned verifier); the `gguf` judge reads `answer.gguf`'s model. `llm` without a
/// URL falls back to the learned verifier (warned).
pub fn verifier_from_config(
    v: &VerifierConfig,
    gguf: &GgufModel,
    reader: Option<&Reader>,
) -> Arc<dyn Verifier> {
    match v.backend {
        VerifierBackend::Reader => match reader {
            Some(reader) => Arc::new(ReaderVerifier::new(reader.clone())),
            None => Arc::new(LearnedVerifier::bundled()),
        },
        VerifierBackend::Learned => Arc::new(LearnedVerifier::bundled()),
        VerifierBackend::Llm if v.llm.url.trim().is_empty() => {
            tracing::warn!(
                event = "verifier_config",
                "verifier.backend is llm but verifier.llm.url is empty: using the learned verifier"
            );
            Arc::new(LearnedVerifier::bundled())
        }
        VerifierBackend::Llm => Arc::new(LlmJudgeVerifier::new(v.llm.clone(), v.reply_tokens)),
        VerifierBackend::Gguf => Arc::new(GgufJudgeVerifier::new(gguf.clone(), v.reply_tokens)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_model_loads_and_separates_an_obvious_pair() {
        let v = LearnedVerifier::bundled();
        let passage =
            "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.";
        let q = "Where was Marie Curie born?";
        let good = v.support(q, "Marie Curie was born in Warsaw.", passage);
        let bad = v.support(q, "Marie Curie was born in Lyon in 1871.", passage);
        assert!(good > bad + 0.2, "good {good} bad {bad}");
    }
}
