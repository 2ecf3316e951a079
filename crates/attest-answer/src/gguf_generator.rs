//! The `gguf` generator: the local SmolLM2 model writes the answer from the top passages of the turn.
//!
//! A 135M model on a 2-core CPU reads a few hundred tokens a second, so the prompt is kept small: the fixed
//! system prompt, then only the `max_passages` best footnotes, each cut so that all of them fit
//! `context_tokens`. Their numbers are the turn's own (`[1]` is still the best passage), so whatever the model
//! cites maps back through the same footnotes and the same gauntlet as any other generator's output.
//!
//! SmolLM2-135M does not write markers by itself, so by default the decoder makes it end its sentence with one
//! whose number the model picks (`attest_models::gguf::decode`), and it writes one sentence. What it writes is often
//! wrong on real questions; the verifier then finds the claim unsupported and the turn abstains, which is why
//! the generator is off by default.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::footnotes::{Footnotes, Passage};
use crate::generate::{GenerateError, Generated, Generator, MODEL_ABSTENTION, SYSTEM_PROMPT};
use attest_models::gguf::{default_llm_path, CitationRule, DecodeRules, LocalLlm, LocalLlmError};

/// Appended to the user message after the question: a 135M model follows a short, concrete instruction there
/// far better than the system prompt alone (it answers in one sentence instead of copying passages). It does
/// not mention numbers: asked for "the number of the passage", the model answered "1"; given an example
/// (`like [1]`), it cited that number whatever the passage. The marker is forced instead (`force_citations`).
pub const ANSWER_HINT: &str = "Answer in one short sentence.";

/// Settings of the local GGUF generator (the `answer.gguf` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GgufConfig {
    /// Off by default: the extractive composer is faster and, with a 135M model, more faithful.
    pub enabled: bool,
    /// The GGUF file.
    pub path: PathBuf,
    /// New tokens at most per answer.
    pub max_tokens: usize,
    /// Footnotes (best first) the model sees.
    pub max_passages: usize,
    /// Tokens of passage text the model sees, all passages together.
    pub context_tokens: usize,
    /// Widen the quantized weights to f32 on load: ~13x faster prompt reading on a CPU without
    /// compile-time SIMD, for ~700 MB instead of ~250 MB of memory (see `attest_models::gguf`).
    pub dequantize: bool,
    /// Make the model end every sentence with a marker whose number it chooses (`attest_models::gguf::decode`).
    pub force_citations: bool,
    /// Sentences the model may write (see `attest_models::gguf::decode`: after the first it mostly copies passages).
    pub max_sentences: usize,
    /// A reply citing no passage cannot be grounded: treat it as a failure so the chain falls back to the
    /// next generator (the extractive composer) instead of abstaining on every uncited sentence.
    pub require_citation: bool,
}

impl GgufConfig {
    /// The model as the `gguf` verifier judges with it.
    pub fn judge_model(&self) -> attest_grounding::verifier::GgufModel {
        attest_grounding::verifier::GgufModel {
            path: self.path.clone(),
            dequantize: self.dequantize,
            context_tokens: self.context_tokens,
        }
    }
}

impl Default for GgufConfig {
    fn default() -> Self {
        GgufConfig {
            enabled: false,
            path: default_llm_path(),
            max_tokens: 128,
            max_passages: 3,
            context_tokens: 384,
            dequantize: true,
            force_citations: true,
            max_sentences: 1,
            require_citation: true,
        }
    }
}

/// The local model as a [`Generator`]. The model is loaded on first use and shared (see
/// [`LocalLlm::shared`]); a missing model makes every call `Unavailable`, so the chain falls back.
pub struct GgufGenerator {
    config: GgufConfig,
}

impl GgufGenerator {
    pub fn new(config: GgufConfig) -> Self {
        GgufGenerator { config }
    }

    fn model(&self) -> Result<Arc<LocalLlm>, LocalLlmError> {
        LocalLlm::shared(&self.config.path, self.config.dequantize)
    }

    /// The user message: the best `max_passages` footnotes (numbers unchanged), each cut to its share of
    /// `context_tokens`, then the question and [`ANSWER_HINT`].
    pub fn user_message(
        &self,
        model: &LocalLlm,
        question: &str,
        footnotes: &Footnotes,
    ) -> Result<String, LocalLlmError> {
        let top: Vec<&Passage> = footnotes
            .iter()
            .take(self.config.max_passages)
            .map(|(_, p)| p)
            .collect();
        let mut left = self.config.context_tokens;
        let mut kept = Vec::with_capacity(top.len());
        for (i, p) in top.iter().enumerate() {
            // An equal share of what is left, so short passages leave room for the longer ones after them.
            let share = left / (top.len() - i);
            let text = model.tokenizer().truncate(&p.text, share)?;
            left -= model.tokenizer().encode(&text)?.len().min(left);
            kept.push(Passage {
                text,
                ..(*p).clone()
            });
        }
        // Minting the first k passages again gives them the numbers 1..=k they already had.
        let context = Footnotes::mint(kept).context_block();
        Ok(format!(
            "Passages:\n\n{context}\n\nQuestion: {question}\n\n{ANSWER_HINT}"
        ))
    }
}

impl Generator for GgufGenerator {
    fn name(&self) -> &'static str {
        "gguf"
    }

    fn generate(&self, question: &str, footnotes: &Footnotes) -> Result<Generated, GenerateError> {
        let unavailable = |e: LocalLlmError| GenerateError::Unavailable(e.to_string());
        if footnotes.is_empty() {
            // Not the model declining: let the chain go on to the composer, whose decline means low confidence.
            return Err(GenerateError::Unavailable(
                "no passages to answer from".into(),
            ));
        }
        let model = self.model().map_err(unavailable)?;
        let user = self
            .user_message(&model, question, footnotes)
            .map_err(unavailable)?;
        let shown = footnotes.len().min(self.config.max_passages);
        let rules = DecodeRules {
            citation: self.config.force_citations.then(|| CitationRule {
                passages: shown as u32,
                exempt_prefix: MODEL_ABSTENTION.into(),
            }),
            max_sentences: Some(self.config.max_sentences.max(1)),
        };
        let completion = model
            .chat(SYSTEM_PROMPT, &user, self.config.max_tokens, &rules)
            .map_err(unavailable)?;
        tracing::debug!(
            event = "gguf_generated",
            prompt_tokens = completion.prompt_tokens,
            generated_tokens = completion.generated_tokens,
            prompt_ms = completion.prompt_time.as_millis() as u64,
            generate_ms = completion.generate_time.as_millis() as u64,
            forced_markers = completion.forced_markers,
            reply = %completion.text,
            "local model answered"
        );
        let text = completion.text.trim();
        if text.is_empty() {
            return Err(GenerateError::Unavailable(
                "the local model returned no text".into(),
            ));
        }
        if text
            .trim_end_matches('.')
            .eq_ignore_ascii_case(MODEL_ABSTENTION)
        {
            return Ok(Generated::Declined);
        }
        if self.config.require_citation && !cites_one_of(text, shown) {
            return Err(GenerateError::Unavailable(
                "the local model cited no passage".into(),
            ));
        }
        Ok(Generated::Text(text.to_string()))
    }
}

/// Whether `text` holds a well-formed marker `[n]` with `1 <= n <= shown`. Only a pre-check: the gauntlet
/// (run by the pipeline, which also counts what it drops) decides what survives.
fn cites_one_of(text: &str, shown: usize) -> bool {
    text.split('[').skip(1).any(|rest| {
        rest.split_once(']')
            .and_then(|(inside, _)| inside.parse::<usize>().ok())
            .is_some_and(|n| (1..=shown).contains(&n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_shown_well_formed_marker_counts_as_a_citation() {
        assert!(cites_one_of("The owl hunts at night [2].", 3));
        assert!(!cites_one_of("The owl hunts at night [4].", 3));
        assert!(!cites_one_of("The owl hunts at night [0].", 3));
        assert!(!cites_one_of("The owl hunts at night [1, 2].", 3));
        assert!(!cites_one_of("The owl hunts at night.", 3));
        assert!(cites_one_of("Owls [a] hunt [ at night [1]", 3));
    }

    use attest_models::gguf::{LLM_DIR_ENV, LLM_FILE};

    #[test]
    fn the_default_path_names_the_installed_file() {
        let path = GgufConfig::default().path;
        assert!(path.ends_with(LLM_FILE), "{}", path.display());
        assert!(
            path.parent()
                .is_some_and(|d| d.ends_with("smollm2-135m-instruct"))
                || std::env::var_os(LLM_DIR_ENV).is_some()
        );
    }
}

#[cfg(test)]
mod with_the_model;
