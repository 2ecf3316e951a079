//! A remote cross-encoder over HTTP (production plugs a GPU reranking service in here):
//! text-embeddings-inference `POST /rerank` and the Cohere / Jina-style `POST /v1/rerank`.
//!
//! A cross-encoder reads question and passage together and is far better at ranking than features; its
//! scores must still land on the gate's 0..1 scale: when a response holds any score outside 0..1 it is taken
//! as raw logits and every score goes through the sigmoid (one rule for the whole response, so scores stay
//! comparable).

use std::time::Duration;

use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{RerankError, Reranker};

/// Which HTTP API the service speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteApi {
    /// text-embeddings-inference: `POST /rerank` `{query, texts, raw_scores}` → `[{index, score}]`.
    #[default]
    Tei,
    /// Cohere / Jina: `POST /v1/rerank` `{model, query, documents, top_n}` →
    /// `{results: [{index, relevance_score}]}`.
    Cohere,
}

/// Settings of [`RemoteReranker`] (the `answer.rerank.remote` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteRerankConfig {
    /// Base URL (`http://tei:8080`) or the full endpoint (`…/rerank`, `…/v1/rerank`).
    pub url: String,
    pub api: RemoteApi,
    /// Model name sent to Cohere-style services (TEI serves one model and ignores it).
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    pub timeout_ms: u64,
}

impl Default for RemoteRerankConfig {
    fn default() -> Self {
        RemoteRerankConfig {
            url: String::new(),
            api: RemoteApi::Tei,
            model: "default".into(),
            api_key: None,
            timeout_ms: 2_000,
        }
    }
}

/// The endpoint of `url` for `api`: a base URL gets the API's path; a URL already ending in it is kept.
pub fn rerank_endpoint(url: &str, api: RemoteApi) -> String {
    let path = match api {
        RemoteApi::Tei => "/rerank",
        RemoteApi::Cohere => "/v1/rerank",
    };
    attest_models::remote::endpoint(url, "/rerank", path)
}

pub struct RemoteReranker {
    endpoint: String,
    config: RemoteRerankConfig,
    agent: ureq::Agent,
}

impl RemoteReranker {
    pub fn new(config: RemoteRerankConfig) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_millis(config.timeout_ms.max(1)))
            .build();
        RemoteReranker {
            endpoint: rerank_endpoint(&config.url, config.api),
            config,
            agent,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn body(&self, question: &str, documents: &[String]) -> Value {
        match self.config.api {
            RemoteApi::Tei => {
                json!({"query": question, "texts": documents, "raw_scores": false, "truncate": true})
            }
            RemoteApi::Cohere => json!({
                "model": self.config.model,
                "query": question,
                "documents": documents,
                "top_n": documents.len(),
            }),
        }
    }

    /// `(index, score)` pairs of a response.
    fn parse(&self, reply: &Value) -> Result<Vec<(usize, f64)>, RerankError> {
        let (items, field) = match self.config.api {
            RemoteApi::Tei => (reply.as_array(), "score"),
            RemoteApi::Cohere => (reply["results"].as_array(), "relevance_score"),
        };
        let items = items.ok_or_else(|| bad_reply("no list of results", reply))?;
        items
            .iter()
            .map(|item| {
                let index = item["index"].as_u64().and_then(|i| usize::try_from(i).ok());
                match (index, item[field].as_f64()) {
                    (Some(i), Some(s)) if s.is_finite() => Ok((i, s)),
                    _ => Err(bad_reply(
                        &format!("an item without index and {field}"),
                        item,
                    )),
                }
            })
            .collect()
    }
}

fn bad_reply(why: &str, reply: &Value) -> RerankError {
    let mut shown = reply.to_string();
    shown.truncate(200);
    RerankError::Unavailable(format!("unexpected reply ({why}): {shown}"))
}

/// The text a cross-encoder reads for a hit: the title (if any) on its own line, then the passage.
fn document(hit: &pb::Hit) -> String {
    let title = hit.title.replace('_', " ");
    if title.trim().is_empty() {
        hit.text.clone()
    } else {
        format!("{}\n{}", title.trim(), hit.text)
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl Reranker for RemoteReranker {
    fn name(&self) -> &'static str {
        "remote"
    }

    fn score(&self, question: &str, candidates: &[pb::Hit]) -> Result<Vec<f64>, RerankError> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let documents: Vec<String> = candidates.iter().map(document).collect();
        let response = attest_models::remote::post(
            &self.agent,
            &self.endpoint,
            self.config.api_key.as_deref(),
        )
        .set("Content-Type", "application/json")
        .send_json(self.body(question, &documents))
        .map_err(|e| RerankError::Unavailable(format!("{}: {e}", self.endpoint)))?;
        let reply: Value = response.into_json().map_err(|e| {
            RerankError::Unavailable(format!("{}: reading the reply: {e}", self.endpoint))
        })?;
        let pairs = self.parse(&reply)?;
        let logits = pairs.iter().any(|(_, s)| !(0.0..=1.0).contains(s));
        // A candidate the service left out (a `top_n` below the pool) counts as not answering.
        let mut scores = vec![0.0; candidates.len()];
        for (index, score) in pairs {
            let slot = scores.get_mut(index).ok_or_else(|| {
                RerankError::Unavailable(format!(
                    "{}: index {index} beyond the {} documents sent",
                    self.endpoint,
                    candidates.len()
                ))
            })?;
            *slot = if logits { sigmoid(score) } else { score };
        }
        Ok(scores)
    }
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
