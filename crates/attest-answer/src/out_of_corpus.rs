//! An out-of-corpus answer that cannot be mistaken for a grounded one (Lectorium's fallback): when the coverage
//! gate bails (the best candidate below `answer.bail_threshold`, or nothing retrieved) and the collection has
//! opted in (`answer.out_of_corpus.enabled`, or per collection under `answer.collections`), the configured LLM
//! answers from general knowledge.
//!
//! The response says so in every way a caller can read it: `status: "out_of_corpus"`, `reason:
//! "out_of_corpus"` (counted in `rag_abstention_total{reason="out_of_corpus"}`, and by `attest-lab eval` apart from
//! answers), the fixed [`DISCLAIMER`] opening the answer text and in its own field, no citations, no claims, no
//! confidence, and no footnote markers: the model is given no passages, and the gauntlet drops any marker it
//! writes. A model that fails or declines leaves the turn's abstention as it was.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::footnotes::Footnotes;
use crate::gauntlet::Gauntlet;
use crate::generate::is_model_abstention;
use attest_models::chat::ChatClient;

/// Settings of the out-of-corpus answer (the `answer.out_of_corpus` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutOfCorpusConfig {
    /// Off by default; needs `answer.llm.url`. A collection's entry in `answer.collections` overrides it.
    pub enabled: bool,
    /// Longest general-knowledge answer, in tokens.
    pub max_tokens: u32,
}

impl Default for OutOfCorpusConfig {
    fn default() -> Self {
        OutOfCorpusConfig {
            enabled: false,
            max_tokens: 300,
        }
    }
}

/// Opens every out-of-corpus answer, and is its `disclaimer` field. Fixed: no configuration can soften it.
pub const DISCLAIMER: &str =
    "Not found in this collection. The answer below comes from the model's general \
knowledge; it cites no source and has not been verified.";

/// The system prompt of the out-of-corpus answer, fixed; the question is the only user text.
pub const PROMPT: &str = "The user's document collection does not cover this question. Answer it briefly from \
general knowledge. Do not cite sources, do not use bracketed numbers, and do not claim that any document says \
anything. If you do not know, reply exactly: I cannot answer from the given passages.";

pub fn messages(question: &str) -> Value {
    json!([
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": question},
    ])
}

/// The model's general-knowledge answer, markers dropped by the gauntlet; `None` when the endpoint fails, says
/// nothing or declines.
pub fn answer(chat: &ChatClient, question: &str, max_tokens: u32) -> Option<String> {
    let reply = match chat.complete(messages(question), max_tokens) {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(error = %e, event = "out_of_corpus_failed", "abstaining as before");
            return None;
        }
    };
    if is_model_abstention(&reply) {
        return None;
    }
    // No passage was minted: every marker the model wrote is dropped (and counted).
    let filtered = Gauntlet::run(&reply, &Footnotes::mint(Vec::new())).text;
    let mut text = filtered.split_whitespace().collect::<Vec<_>>().join(" ");
    // A dropped marker leaves its space before the punctuation that followed it.
    for stop in [".", ",", ";", ":", "!", "?"] {
        text = text.replace(&format!(" {stop}"), stop);
    }
    (!text.is_empty()).then_some(text)
}

/// The answer text of an out-of-corpus response: the disclaimer, then the model's answer.
pub fn with_disclaimer(text: &str) -> String {
    format!("{DISCLAIMER}\n\n{text}")
}
