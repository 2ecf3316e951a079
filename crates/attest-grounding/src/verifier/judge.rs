//! Verifier back ends that ask a language model to judge: does this passage support this claim? The model is
//! asked for one number from 0 to 1 with a fixed prompt at temperature 0, and the first number in that range
//! in its reply is the score.
//!
//! - [`LlmJudgeVerifier`]: any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama), through the
//!   answer tier's one chat client (`attest_models::chat`).
//! - [`GgufJudgeVerifier`]: the local GGUF model (SmolLM2-135M) with the same prompt.
//!
//! [`Verifier::support`] cannot fail, so when the model cannot be reached or its reply holds no usable number,
//! the claim is scored by the learned local verifier instead, and a warning is logged.

use std::path::PathBuf;
use std::sync::Arc;

use attest_models::chat::{ChatClient, OpenAiChatConfig};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{LearnedVerifier, Verifier};
use attest_models::gguf::{DecodeRules, LocalLlm, LocalLlmError};

/// The judge's system prompt, fixed.
pub const JUDGE_SYSTEM_PROMPT: &str = "You check whether a passage supports a claim. \
Reply with a single number between 0 and 1: 1 if the passage states the claim or directly implies it, \
0 if the passage does not say it or contradicts it. Reply with the number only.";

/// The judge's user message: the passage and the claim (and the question the claim answers).
pub fn judge_user_message(question: &str, claim: &str, passage: &str) -> String {
    format!(
        "Question: {question}\n\nPassage: {passage}\n\nClaim: {claim}\n\n\
         Does the passage support the claim? Answer with a number from 0 to 1."
    )
}

/// The first number in `reply` that lies in `[0, 1]` (`"0.9"`, `"Score: 0.2"`, `"1."`), if any.
pub fn parse_score(reply: &str) -> Option<f64> {
    let mut rest = reply;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(tail.len());
        let number = tail[..len].trim_end_matches('.');
        if let Ok(value) = number.parse::<f64>() {
            if (0.0..=1.0).contains(&value) {
                return Some(value);
            }
        }
        rest = &tail[len..];
    }
    None
}

/// Which verifier scores claims (the `answer.verifier.backend` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifierBackend {
    /// The reader's support head (`models/reader`); the learned classifier when `reader.backend` is lexical.
    #[default]
    Reader,
    /// The learned lexical classifier (`models/verifier.json`).
    Learned,
    /// An LLM judge through `answer.verifier.llm`.
    Llm,
    /// The local GGUF model (`answer.gguf.path`) as judge.
    Gguf,
}

/// Settings of the verifier (the `answer.verifier` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VerifierConfig {
    pub backend: VerifierBackend,
    /// The judge's chat endpoint, for `backend: llm` (its `max_tokens` is not used: see `reply_tokens`).
    pub llm: OpenAiChatConfig,
    /// Tokens the judge may write: a number, perhaps after a word or two.
    pub reply_tokens: u32,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        VerifierConfig {
            backend: VerifierBackend::Reader,
            llm: OpenAiChatConfig::default(),
            reply_tokens: 16,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("judge unavailable: {0}")]
    Unavailable(String),
    #[error("no score in the judge's reply {0:?}")]
    Unparseable(String),
}

/// Scores with the learned verifier after a judge failed, saying so in the log.
fn fall_back(
    fallback: &LearnedVerifier,
    judge: &'static str,
    error: &JudgeError,
    question: &str,
    claim: &str,
    passage: &str,
) -> f64 {
    tracing::warn!(judge, error = %error, event = "judge_failed", "scoring with the learned verifier instead");
    fallback.support(question, claim, passage)
}

/// An LLM judge over an OpenAI-compatible chat endpoint.
pub struct LlmJudgeVerifier {
    chat: ChatClient,
    reply_tokens: u32,
    fallback: LearnedVerifier,
}

impl LlmJudgeVerifier {
    pub fn new(config: OpenAiChatConfig, reply_tokens: u32) -> Self {
        LlmJudgeVerifier {
            chat: ChatClient::new(config),
            reply_tokens,
            fallback: LearnedVerifier::bundled(),
        }
    }

    /// The judge's score, or why there is none.
    pub fn judge(&self, question: &str, claim: &str, passage: &str) -> Result<f64, JudgeError> {
        let messages = json!([
            {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
            {"role": "user", "content": judge_user_message(question, claim, passage)},
        ]);
        let text = self
            .chat
            .complete(messages, self.reply_tokens)
            .map_err(|e| JudgeError::Unavailable(e.to_string()))?;
        parse_score(&text).ok_or(JudgeError::Unparseable(text))
    }
}

impl Verifier for LlmJudgeVerifier {
    fn support(&self, question: &str, claim: &str, passage: &str) -> f64 {
        self.judge(question, claim, passage)
            .unwrap_or_else(|e| fall_back(&self.fallback, "llm", &e, question, claim, passage))
    }
}

/// The local GGUF model as judge, with the same prompt; the passage is cut to `context_tokens`.
/// The local GGUF model a `gguf` judge reads with: the generator's (`answer.gguf`: its file, how it is loaded,
/// and how many tokens of passage it sees).
#[derive(Debug, Clone, PartialEq)]
pub struct GgufModel {
    pub path: PathBuf,
    pub dequantize: bool,
    pub context_tokens: usize,
}

pub struct GgufJudgeVerifier {
    model: GgufModel,
    reply_tokens: usize,
    fallback: LearnedVerifier,
}

impl GgufJudgeVerifier {
    pub fn new(model: GgufModel, reply_tokens: u32) -> Self {
        GgufJudgeVerifier {
            model,
            reply_tokens: reply_tokens as usize,
            fallback: LearnedVerifier::bundled(),
        }
    }

    pub fn judge(&self, question: &str, claim: &str, passage: &str) -> Result<f64, JudgeError> {
        let unavailable = |e: LocalLlmError| JudgeError::Unavailable(e.to_string());
        let model: Arc<LocalLlm> =
            LocalLlm::shared(&self.model.path, self.model.dequantize).map_err(unavailable)?;
        let passage = model
            .tokenizer()
            .truncate(passage, self.model.context_tokens)
            .map_err(unavailable)?;
        let completion = model
            .chat(
                JUDGE_SYSTEM_PROMPT,
                &judge_user_message(question, claim, &passage),
                self.reply_tokens,
                &DecodeRules::default(),
            )
            .map_err(unavailable)?;
        parse_score(&completion.text).ok_or(JudgeError::Unparseable(completion.text))
    }
}

impl Verifier for GgufJudgeVerifier {
    fn support(&self, question: &str, claim: &str, passage: &str) -> f64 {
        self.judge(question, claim, passage)
            .unwrap_or_else(|e| fall_back(&self.fallback, "gguf", &e, question, claim, passage))
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
