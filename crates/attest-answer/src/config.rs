//! Thresholds and limits of the answer pipeline (defaults from SPEC.md "answer" and the seeds).

use serde::{Deserialize, Serialize};

use crate::generate::OpenAiChatConfig;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnswerConfig {
    /// Candidates asked of the router per retrieval hop (the router's largest k).
    pub candidates: u32,
    /// Passages kept for composing and citing (SPEC: 16–20).
    pub passages: usize,
    /// Coverage gate (CRAG): below this best relevance, give up at once.
    pub bail_threshold: f64,
    /// At or above this best relevance, ground the answer.
    pub ground_threshold: f64,
    /// ... or at or above this one with `min_supporting` passages over it.
    pub ground_with_support_threshold: f64,
    pub min_supporting: usize,
    /// Retrieval hops at most, the first included (SPEC: 3).
    pub max_hops: usize,
    /// Sentences the extractive composer may use.
    pub max_answer_sentences: usize,
    /// A further sentence joins the answer only when its relevance is this share of the best one's.
    pub companion_ratio: f64,
    /// A claim is supported when the verifier scores it at least this.
    pub claim_support_threshold: f64,
    /// Confidence is multiplied by this when the router answered from BM25 alone (SPEC: reduced by 20%).
    pub fallback_confidence_factor: f64,
    /// Longest question accepted, in bytes.
    pub max_question_bytes: usize,
    /// "Did you mean" titles offered with an abstention.
    pub max_suggestions: usize,
    /// An OpenAI-compatible chat endpoint tried before the extractive composer (unset: composer only).
    pub llm: OpenAiChatConfig,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        AnswerConfig {
            candidates: 100,
            passages: 16,
            bail_threshold: 0.40,
            ground_threshold: 0.65,
            ground_with_support_threshold: 0.55,
            min_supporting: 2,
            max_hops: 3,
            max_answer_sentences: 2,
            companion_ratio: 0.9,
            claim_support_threshold: 0.5,
            fallback_confidence_factor: 0.8,
            max_question_bytes: 2048,
            max_suggestions: 3,
            llm: OpenAiChatConfig::default(),
        }
    }
}
