//! Generators (SPEC "answer" step 9): text with `[n]` footnote markers, from the minted passages of one turn.
//!
//! - [`ExtractiveGenerator`], the default: the built-in composer, no model.
//! - [`OpenAiChatGenerator`]: any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama), streamed,
//!   temperature 0, with the fixed system prompt below; retrieved text goes only into the user message.
//! - [`GgufGenerator`] (`crate::gguf_generator`): the local SmolLM2 model, same prompt, the top passages only.
//!
//! What a generator writes is raw: the pipeline passes it through the gauntlet before anything else sees it.
//! [`GeneratorChain`] tries each back end in turn, so a failing LLM falls back to the composer and, if that
//! finds nothing, to a clean abstention — never an error.

use attest_models::chat::{ChatClient, ChatError, OpenAiChatConfig};
use serde_json::{json, Value};

use crate::compose::{compose, Composition};
use crate::footnotes::Footnotes;
use crate::gguf_generator::{GgufConfig, GgufGenerator};

/// The system prompt, fixed: the model may only use the numbered passages and must cite them.
pub const SYSTEM_PROMPT: &str = "You answer questions using only the numbered passages you are given. \
After every sentence, cite the passage that supports it with its number in square brackets, like [1]. \
Never cite a number that was not given, never mention any other identifier. \
If the passages do not contain the answer, reply exactly: I cannot answer from the given passages.";

/// What a model says when the passages do not hold the answer (see [`SYSTEM_PROMPT`]).
pub const MODEL_ABSTENTION: &str = "I cannot answer from the given passages";

/// Whether a model's reply is [`MODEL_ABSTENTION`] (any case, with or without its full stop).
pub fn is_model_abstention(reply: &str) -> bool {
    reply
        .trim()
        .trim_end_matches('.')
        .eq_ignore_ascii_case(MODEL_ABSTENTION)
}

/// The outcome of one generation.
#[derive(Debug, Clone, PartialEq)]
pub enum Generated {
    /// Raw text with markers.
    Text(String),
    /// The back end declined (no sentence fits / the model said it cannot answer).
    Declined,
}

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("generator unavailable: {0}")]
    Unavailable(String),
}

impl From<ChatError> for GenerateError {
    fn from(err: ChatError) -> Self {
        GenerateError::Unavailable(err.to_string())
    }
}

pub trait Generator: Send + Sync {
    fn name(&self) -> &'static str;
    fn generate(&self, question: &str, footnotes: &Footnotes) -> Result<Generated, GenerateError>;
}

/// The built-in extractive composer as a generator.
pub struct ExtractiveGenerator {
    composition: Composition,
}

impl ExtractiveGenerator {
    pub fn new(composition: Composition) -> Self {
        ExtractiveGenerator { composition }
    }
}

impl Generator for ExtractiveGenerator {
    fn name(&self) -> &'static str {
        "extractive"
    }
    fn generate(&self, question: &str, footnotes: &Footnotes) -> Result<Generated, GenerateError> {
        Ok(match compose(question, footnotes, &self.composition) {
            Some(text) => Generated::Text(text),
            None => Generated::Declined,
        })
    }
}

/// The generator over an OpenAI-compatible chat endpoint (the `answer.llm` config section).
pub struct OpenAiChatGenerator {
    chat: ChatClient,
}

impl OpenAiChatGenerator {
    pub fn new(config: OpenAiChatConfig) -> Self {
        OpenAiChatGenerator {
            chat: ChatClient::new(config),
        }
    }

    /// The messages sent: the fixed system prompt; passages and question in the user message only.
    pub fn messages(question: &str, footnotes: &Footnotes) -> Value {
        json!([
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": format!("Passages:\n\n{}\n\nQuestion: {question}", footnotes.context_block())},
        ])
    }
}

impl Generator for OpenAiChatGenerator {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn generate(&self, question: &str, footnotes: &Footnotes) -> Result<Generated, GenerateError> {
        let text = self
            .chat
            .complete(Self::messages(question, footnotes), self.chat.max_tokens())?;
        if is_model_abstention(&text) {
            return Ok(Generated::Declined);
        }
        Ok(Generated::Text(text))
    }
}

/// Back ends tried in order: the first that answers (or declines) wins; failures fall through.
pub struct GeneratorChain {
    generators: Vec<Box<dyn Generator>>,
}

/// What the chain produced and which back end produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainOutcome {
    pub generated: Generated,
    pub generator: &'static str,
}

impl GeneratorChain {
    pub fn new(generators: Vec<Box<dyn Generator>>) -> Self {
        GeneratorChain { generators }
    }

    /// The default chain: the LLM `llm` names (if any), the local GGUF model (if enabled), then the extractive
    /// composer (`answer.llm`, `answer.gguf` and `AnswerConfig::composition`).
    pub fn configured(llm: &OpenAiChatConfig, gguf: &GgufConfig, composition: Composition) -> Self {
        let mut generators: Vec<Box<dyn Generator>> = Vec::new();
        if !llm.url.trim().is_empty() {
            generators.push(Box::new(OpenAiChatGenerator::new(llm.clone())));
        }
        if gguf.enabled {
            generators.push(Box::new(GgufGenerator::new(gguf.clone())));
        }
        generators.push(Box::new(ExtractiveGenerator::new(composition)));
        GeneratorChain { generators }
    }

    pub fn generate(&self, question: &str, footnotes: &Footnotes) -> ChainOutcome {
        for g in &self.generators {
            match g.generate(question, footnotes) {
                Ok(generated) => {
                    return ChainOutcome {
                        generated,
                        generator: g.name(),
                    }
                }
                Err(e) => {
                    tracing::warn!(generator = g.name(), error = %e, event = "generator_failed", "falling back to the next generator");
                }
            }
        }
        ChainOutcome {
            generated: Generated::Declined,
            generator: "none",
        }
    }
}
