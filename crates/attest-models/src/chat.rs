//! The one client of an OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama) that every remote
//! language-model call of the answer tier goes through — the generator, the history rewriter, the out-of-corpus
//! answer and the LLM judge: its settings, its endpoint, the request (temperature 0, streamed, the headers of
//! [`crate::remote::post`]) and the reading of its Server-Sent Events. What is asked and what the reply means is
//! the caller's.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An OpenAI-compatible chat endpoint (the `answer.llm` and `answer.verifier.llm` config sections).
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

/// Why a chat call gave no text.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("{0}")]
    Unavailable(String),
}

/// The chat-completions endpoint of `url`: a base URL (`http://vllm:8000`) or the full endpoint.
pub fn chat_endpoint(url: &str) -> String {
    crate::remote::endpoint(url, "/chat/completions", "/v1/chat/completions")
}

/// One OpenAI-compatible chat endpoint, with its own agent (and so its own timeout).
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
    pub fn complete(&self, messages: Value, max_tokens: u32) -> Result<String, ChatError> {
        let body = json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": true,
        });
        let unavailable = |why: String| ChatError::Unavailable(format!("{}: {why}", self.endpoint));
        let response =
            crate::remote::post(&self.agent, &self.endpoint, self.config.api_key.as_deref())
                .send_json(body)
                .map_err(|e| unavailable(e.to_string()))?;
        // Server-Sent Events: `data: {chunk}` lines, ending with `data: [DONE]`.
        let mut text = String::new();
        for line in BufReader::new(response.into_reader()).lines() {
            let line = line.map_err(|e| unavailable(format!("reading the stream: {e}")))?;
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(data)
                .map_err(|e| unavailable(format!("bad stream chunk: {e}")))?;
            if let Some(delta) = chunk["choices"][0]["delta"]["content"].as_str() {
                text.push_str(delta);
            }
        }
        if text.trim().is_empty() {
            return Err(unavailable("the model returned no text".into()));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_chat_path_and_a_full_endpoint_is_kept() {
        assert_eq!(
            chat_endpoint("http://vllm:8000/"),
            "http://vllm:8000/v1/chat/completions"
        );
        assert_eq!(
            chat_endpoint(" http://x/v1/chat/completions "),
            "http://x/v1/chat/completions"
        );
    }
}
