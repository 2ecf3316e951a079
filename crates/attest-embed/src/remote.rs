//! Remote embedders over HTTP, for GPU fleets: the OpenAI-compatible `POST /v1/embeddings` and Hugging Face
//! text-embeddings-inference `POST /embed`. Texts are sent in batches of `batch_size`; every request has a
//! connect timeout and a total timeout; a failed request is retried only when it failed fast (a refused
//! connection, a 5xx or 429 answered at once) and only while the retry budget lasts, so a dead or slow
//! service costs one timeout per call, not a storm of retries. Returned vectors are checked (count, dimension,
//! finite) and L2-normalised.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokenizers::Tokenizer;

use crate::embedder::Embedder;
use crate::error::EmbedError;

/// Which HTTP API the service speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteApi {
    /// `POST /v1/embeddings` `{model, input}` → `{data: [{index, embedding}]}` (vLLM, OpenAI, Attest).
    OpenAi,
    /// `POST /embed` `{inputs, normalize, truncate}` → `[[f32]]` (text-embeddings-inference, Attest).
    Tei,
}

/// Settings of a [`RemoteEmbedder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteEmbedderConfig {
    /// Base URL (`http://gpu-embed:8080`) or the full endpoint (`…/v1/embeddings`, `…/embed`), which then
    /// also decides the API.
    pub url: String,
    /// API used when `url` is a base URL.
    pub api: RemoteApi,
    /// Model name sent to OpenAI-compatible servers; also the embedder id stored with collections, so it
    /// must name the same model as the collection's vectors.
    pub model: String,
    /// Length of the vectors the service returns.
    pub dimension: usize,
    /// Put before each search query (not passages) before it is sent: the instruction of an asymmetric model
    /// the service runs. Unset: the model's own when it is a model Attest runs locally (bge's "Represent this
    /// sentence for searching relevant passages: "), else none; "" for none.
    pub query_prefix: Option<String>,
    /// Total time allowed for one HTTP request of one text (a query), in milliseconds.
    pub timeout_ms: u64,
    /// Added to `timeout_ms` for every further text of a batch (ingest), in milliseconds: a batch of 32
    /// passages takes seconds on a CPU embedding server, a query must fail fast.
    pub timeout_per_text_ms: u64,
    /// Time allowed to open the connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Texts per HTTP request.
    pub batch_size: usize,
    /// Most retries of one request.
    pub max_retries: u32,
    /// Pause before a retry, in milliseconds.
    pub retry_backoff_ms: u64,
    /// Retries earned per request (0.2 = at most one retry per five requests, over time).
    pub retry_budget_ratio: f64,
    /// Bearer token, if the service wants one (`ATTEST__EMBEDDER__REMOTE__API_KEY`).
    pub api_key: Option<String>,
    /// `tokenizer.json` used to count tokens for the chunker; default: the local model's. Without one, tokens
    /// are estimated from words.
    pub tokenizer_path: Option<PathBuf>,
    /// PEM CA certificates to trust for an `https://` service (a cluster's own CA; `attest serve --tls-ca`
    /// sets it). Without one, the public roots.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate and key presented to a service under mutual TLS (`attest serve --tls-cert/--tls-key`
    /// with `--tls-ca` set them: an embedder of the cluster admits only its nodes).
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
}

impl Default for RemoteEmbedderConfig {
    fn default() -> Self {
        RemoteEmbedderConfig {
            url: String::new(),
            api: RemoteApi::OpenAi,
            // The model `attest serve --role embedder` runs by default.
            model: crate::LocalModel::default().id().to_string(),
            dimension: crate::MINILM_DIMENSION,
            query_prefix: None,
            timeout_ms: 2_000,
            timeout_per_text_ms: 500,
            connect_timeout_ms: 500,
            batch_size: 32,
            max_retries: 1,
            retry_backoff_ms: 50,
            retry_budget_ratio: 0.2,
            api_key: None,
            tokenizer_path: None,
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
        }
    }
}

/// The endpoint to post to, and its API.
pub fn resolve_endpoint(url: &str, api: RemoteApi) -> Result<(String, RemoteApi), EmbedError> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(EmbedError::InvalidInput(format!(
            "embedder url `{url}` must start with http:// or https://"
        )));
    }
    if url.ends_with("/v1/embeddings") {
        return Ok((url.to_string(), RemoteApi::OpenAi));
    }
    if url.ends_with("/embed") {
        return Ok((url.to_string(), RemoteApi::Tei));
    }
    let path = match api {
        RemoteApi::OpenAi => "/v1/embeddings",
        RemoteApi::Tei => "/embed",
    };
    Ok((format!("{url}{path}"), api))
}

/// Tokens of retry credit, earned by requests and spent by retries.
struct RetryBudget {
    tokens: Mutex<f64>,
    ratio: f64,
}

/// Retries available at start and the most that can be saved up.
const RETRY_BUDGET_CAP: f64 = 10.0;

impl RetryBudget {
    fn new(ratio: f64) -> Self {
        RetryBudget {
            tokens: Mutex::new(RETRY_BUDGET_CAP),
            ratio: ratio.max(0.0),
        }
    }
    fn deposit(&self) {
        let mut t = self.tokens.lock();
        *t = (*t + self.ratio).min(RETRY_BUDGET_CAP);
    }
    fn withdraw(&self) -> bool {
        let mut t = self.tokens.lock();
        if *t >= 1.0 {
            *t -= 1.0;
            true
        } else {
            false
        }
    }
}

pub struct RemoteEmbedder {
    config: RemoteEmbedderConfig,
    endpoint: String,
    api: RemoteApi,
    agent: ureq::Agent,
    tokenizer: Option<Tokenizer>,
    budget: RetryBudget,
    /// `config.query_prefix`, or the model's own when unset.
    query_prefix: String,
}

impl std::fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("endpoint", &self.endpoint)
            .field("api", &self.api)
            .field("model", &self.config.model)
            .finish()
    }
}

#[derive(Deserialize)]
struct OpenAiResponse {
    data: Vec<OpenAiItem>,
}

#[derive(Deserialize)]
struct OpenAiItem {
    #[serde(default)]
    index: usize,
    embedding: Vec<f32>,
}

impl RemoteEmbedder {
    pub fn new(config: RemoteEmbedderConfig) -> Result<Self, EmbedError> {
        let (endpoint, api) = resolve_endpoint(&config.url, config.api)?;
        if config.dimension == 0 || config.batch_size == 0 {
            return Err(EmbedError::InvalidInput(
                "remote embedder dimension and batch_size must be positive".into(),
            ));
        }
        let mut agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_millis(config.connect_timeout_ms.max(1)));
        if let Some(ca) = &config.ca_file {
            let roots = attest_telemetry::tls::roots(ca)
                .map_err(|e| EmbedError::InvalidInput(format!("embedder ca_file: {e}")))?;
            let tls_error =
                |e: &dyn std::fmt::Display| EmbedError::InvalidInput(format!("embedder TLS: {e}"));
            let builder =
                rustls::ClientConfig::builder_with_provider(attest_telemetry::tls::provider())
                    .with_safe_default_protocol_versions()
                    .map_err(|e| tls_error(&e))?
                    .with_root_certificates(roots);
            let tls = match (&config.client_cert_file, &config.client_key_file) {
                (Some(cert), Some(key)) => {
                    let certs =
                        attest_telemetry::tls::certificates(cert).map_err(|e| tls_error(&e))?;
                    let key = attest_telemetry::tls::private_key(key).map_err(|e| tls_error(&e))?;
                    builder
                        .with_client_auth_cert(certs, key)
                        .map_err(|e| tls_error(&e))?
                }
                _ => builder.with_no_client_auth(),
            };
            agent = agent.tls_config(std::sync::Arc::new(tls));
        }
        let agent = agent.build();
        let tokenizer_path = config
            .tokenizer_path
            .clone()
            .unwrap_or_else(|| crate::default_model_dir().join("tokenizer.json"));
        let tokenizer = Tokenizer::from_file(&tokenizer_path).ok();
        if tokenizer.is_none() {
            tracing::warn!(path = %tokenizer_path.display(), event = "tokenizer_missing",
                "no tokenizer for the remote embedder; chunk budgets are estimated from words");
        }
        let query_prefix = config.query_prefix.clone().unwrap_or_else(|| {
            crate::LocalModel::from_id(&config.model)
                .map(|m| m.identity().query_prefix)
                .unwrap_or_default()
        });
        Ok(RemoteEmbedder {
            budget: RetryBudget::new(config.retry_budget_ratio),
            query_prefix,
            config,
            endpoint,
            api,
            agent,
            tokenizer,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn post_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.budget.deposit();
        let mut attempt = 0;
        loop {
            let started = Instant::now();
            let result = self.post_once(texts);
            let failed_fast = started.elapsed() < self.timeout_for(texts.len()) / 2;
            match result {
                Err(EmbedError::Unavailable(reason))
                    if attempt < self.config.max_retries
                        && failed_fast
                        && self.budget.withdraw() =>
                {
                    attempt += 1;
                    tracing::debug!(endpoint = %self.endpoint, attempt, reason = %reason, event = "embed_retry", "retrying embedder");
                    std::thread::sleep(Duration::from_millis(self.config.retry_backoff_ms));
                }
                other => return other,
            }
        }
    }

    fn post_once(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = match self.api {
            RemoteApi::OpenAi => {
                json!({"model": self.config.model, "input": texts, "encoding_format": "float"})
            }
            RemoteApi::Tei => json!({"inputs": texts, "normalize": true, "truncate": true}),
        };
        let response = attest_models::remote::post(
            &self.agent,
            &self.endpoint,
            self.config.api_key.as_deref(),
        )
        .timeout(self.timeout_for(texts.len()))
        .send_json(body)
        .map_err(|e| self.map_error(e))?;
        let garbled = |e: std::io::Error| {
            EmbedError::Unavailable(format!("unreadable embedder response: {e}"))
        };
        let vectors = match self.api {
            RemoteApi::OpenAi => {
                let mut parsed: OpenAiResponse = response.into_json().map_err(garbled)?;
                parsed.data.sort_by_key(|item| item.index);
                parsed.data.into_iter().map(|item| item.embedding).collect()
            }
            RemoteApi::Tei => response.into_json::<Vec<Vec<f32>>>().map_err(garbled)?,
        };
        self.check(texts.len(), vectors)
    }

    /// The whole-request timeout for a batch of `n` texts.
    fn timeout_for(&self, n: usize) -> Duration {
        Duration::from_millis(
            self.config.timeout_ms.max(1)
                + self.config.timeout_per_text_ms * n.saturating_sub(1) as u64,
        )
    }

    fn map_error(&self, err: ureq::Error) -> EmbedError {
        match err {
            ureq::Error::Status(code, response) => {
                let detail: String = response
                    .into_string()
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                let message = format!("{} answered {code}: {detail}", self.endpoint);
                // 4xx means this input was refused; the service itself is fine (except timeouts and overload).
                if (400..500).contains(&code) && code != 408 && code != 429 {
                    EmbedError::InvalidInput(message)
                } else {
                    EmbedError::Unavailable(message)
                }
            }
            ureq::Error::Transport(t) => EmbedError::Unavailable(format!("{}: {t}", self.endpoint)),
        }
    }

    fn check(&self, expected: usize, vectors: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if vectors.len() != expected {
            return Err(EmbedError::Unavailable(format!(
                "embedder returned {} vectors for {expected} texts",
                vectors.len()
            )));
        }
        vectors
            .into_iter()
            .map(|mut v| {
                if v.len() != self.config.dimension {
                    return Err(EmbedError::Unavailable(format!(
                        "embedder returned dimension {}, configured {}",
                        v.len(),
                        self.config.dimension
                    )));
                }
                if v.iter().any(|x| !x.is_finite()) {
                    return Err(EmbedError::Unavailable(
                        "embedder returned a non-finite component".into(),
                    ));
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
                Ok(v)
            })
            .collect()
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> &str {
        &self.config.model
    }

    fn query_prefix(&self) -> &str {
        &self.query_prefix
    }

    fn dimension(&self) -> usize {
        self.config.dimension
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size) {
            out.extend(self.post_batch(batch)?);
        }
        Ok(out)
    }

    fn count_tokens(&self, text: &str) -> usize {
        match &self.tokenizer {
            Some(t) => t
                .encode(text, false)
                .map(|e| e.len())
                .unwrap_or_else(|_| estimate_tokens(text)),
            None => estimate_tokens(text),
        }
    }
}

/// WordPiece splits about four English words into five tokens; erring high keeps chunks inside the window.
fn estimate_tokens(text: &str) -> usize {
    (text.split_whitespace().count() * 13).div_ceil(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_from_base_or_full_urls() {
        let r = |u: &str, api| resolve_endpoint(u, api).unwrap();
        assert_eq!(
            r("http://h:1/", RemoteApi::OpenAi),
            ("http://h:1/v1/embeddings".into(), RemoteApi::OpenAi)
        );
        assert_eq!(
            r("http://h:1", RemoteApi::Tei),
            ("http://h:1/embed".into(), RemoteApi::Tei)
        );
        assert_eq!(
            r("http://h:1/embed", RemoteApi::OpenAi),
            ("http://h:1/embed".into(), RemoteApi::Tei)
        );
        assert_eq!(
            r("https://h/v1/embeddings", RemoteApi::Tei).1,
            RemoteApi::OpenAi
        );
        assert!(resolve_endpoint("h:1", RemoteApi::OpenAi).is_err());
    }

    #[test]
    fn an_unset_query_prefix_is_the_models_own_when_attest_knows_the_model() {
        let prefix = |model: &str, query_prefix: Option<&str>| {
            let embedder = RemoteEmbedder::new(RemoteEmbedderConfig {
                url: "http://127.0.0.1:9".into(),
                model: model.into(),
                query_prefix: query_prefix.map(str::to_string),
                ..RemoteEmbedderConfig::default()
            })
            .unwrap();
            (embedder.query_prefix().to_string(), embedder.identity())
        };
        let (bge, identity) = prefix(crate::BGE_SMALL_ID, None);
        assert_eq!(bge, crate::BGE_QUERY_PREFIX);
        assert_eq!(
            (
                identity.model.as_str(),
                identity.query_prefix.as_str(),
                identity.checksum.as_str()
            ),
            (crate::BGE_SMALL_ID, crate::BGE_QUERY_PREFIX, "")
        );
        assert_eq!(prefix(crate::BGE_SMALL_ID, Some("")).0, "");
        assert_eq!(prefix("e5-large", None).0, "");
        assert_eq!(prefix("e5-large", Some("query: ")).0, "query: ");
        assert_eq!(
            RemoteEmbedderConfig::default().model,
            crate::LocalModel::default().id(),
            "the model `attest serve --role embedder` runs by default"
        );
    }

    #[test]
    fn retry_budget_is_earned_by_requests() {
        let b = RetryBudget::new(0.5);
        for _ in 0..10 {
            assert!(b.withdraw());
        }
        assert!(!b.withdraw());
        b.deposit();
        assert!(!b.withdraw());
        b.deposit();
        assert!(b.withdraw());
    }

    #[test]
    fn token_estimate_errs_high() {
        assert_eq!(
            estimate_tokens("one two three four five six seven eight nine ten"),
            13
        );
        assert_eq!(estimate_tokens(""), 0);
    }
}
