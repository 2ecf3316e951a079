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

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::compose::compose;
use crate::config::AnswerConfig;
use crate::footnotes::Footnotes;
use crate::gguf_generator::GgufGenerator;

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

pub trait Generator: Send + Sync {
    fn name(&self) -> &'static str;
    fn generate(&self, question: &str, footnotes: &Footnotes) -> Result<Generated, GenerateError>;
}

/// The built-in extractive composer as a generator.
pub struct ExtractiveGenerator {
    config: AnswerConfig,
}

impl ExtractiveGenerator {
    pub fn new(config: AnswerConfig) -> Self {
        ExtractiveGenerator { config }
    }
}

impl Generator for ExtractiveGenerator {
    fn name(&self) -> &'static str {
        "extractive"
    }
    fn generate(&self, question: &str, footnotes: &Footnotes) -> Result<Generated, GenerateError> {
        Ok(match compose(question, footnotes, &self.config) {
            Some(text) => Generated::Text(text),
            None => Generated::Declined,
        })
    }
}

/// Settings of [`OpenAiChatGenerator`] (the `answer.llm` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenAiChatConfig {
    /// Base URL (`http://vllm:8000`) or the full `…/v1/chat/completions` endpoint. Empty: not used.
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout_ms: u64,
    pub max_tokens: u32,
}

impl Default for OpenAiChatConfig {
    fn default() -> Self {
        OpenAiChatConfig {
            url: String::new(),
            model: "default".into(),
            api_key: None,
            timeout_ms: 30_000,
            max_tokens: 400,
        }
    }
}

/// The chat-completions endpoint of `url`: a base URL (`http://vllm:8000`) or the full endpoint.
pub fn chat_endpoint(url: &str) -> String {
    let base = url.trim().trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/v1/chat/completions")
    }
}

/// One OpenAI-compatible chat endpoint: the request (temperature 0, streamed, the request id passed on) and the
/// reading of its Server-Sent Events, shared by the generator, the history rewriter and the out-of-corpus answer.
pub struct ChatClient {
    endpoint: String,
    config: OpenAiChatConfig,
    agent: ureq::Agent,
}

impl ChatClient {
    pub fn new(config: OpenAiChatConfig) -> Self {
        let endpoint = chat_endpoint(&config.url);
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_millis(config.timeout_ms.max(1)))
            .build();
        ChatClient {
            endpoint,
            config,
            agent,
        }
    }

    /// The configured maximum reply length, in tokens.
    pub fn max_tokens(&self) -> u32 {
        self.config.max_tokens
    }

    /// The reply to `messages`, at most `max_tokens` long; an error when the endpoint fails or says nothing.
    pub fn complete(&self, messages: Value, max_tokens: u32) -> Result<String, GenerateError> {
        let body = json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": true,
        });
        let response = attest_models::remote::post(
            &self.agent,
            &self.endpoint,
            self.config.api_key.as_deref(),
        )
        .send_json(body)
        .map_err(|e| GenerateError::Unavailable(format!("{}: {e}", self.endpoint)))?;
        // Server-Sent Events: `data: {chunk}` lines, ending with `data: [DONE]`.
        let mut text = String::new();
        for line in BufReader::new(response.into_reader()).lines() {
            let line =
                line.map_err(|e| GenerateError::Unavailable(format!("reading the stream: {e}")))?;
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(data)
                .map_err(|e| GenerateError::Unavailable(format!("bad stream chunk: {e}")))?;
            if let Some(delta) = chunk["choices"][0]["delta"]["content"].as_str() {
                text.push_str(delta);
            }
        }
        if text.trim().is_empty() {
            return Err(GenerateError::Unavailable(
                "the model returned no text".into(),
            ));
        }
        Ok(text)
    }
}

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

    /// The default chain: the configured LLM (if any), the local GGUF model (if enabled), then the extractive
    /// composer.
    pub fn from_config(config: &AnswerConfig) -> Self {
        let mut generators: Vec<Box<dyn Generator>> = Vec::new();
        if !config.llm.url.trim().is_empty() {
            generators.push(Box::new(OpenAiChatGenerator::new(config.llm.clone())));
        }
        if config.gguf.enabled {
            generators.push(Box::new(GgufGenerator::new(config.gguf.clone())));
        }
        generators.push(Box::new(ExtractiveGenerator::new(config.clone())));
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
