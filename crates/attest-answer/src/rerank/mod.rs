//! Rerankers (SPEC "answer" step 7): score each retrieved candidate against the question on a 0..1 scale —
//! the probability that the passage answers it. The coverage gate holds its thresholds (0.40 / 0.55 / 0.65)
//! against these scores, so every back end must be calibrated to 0..1.
//!
//! Back ends (chosen by `answer.rerank.backend`, see [`from_config`]): the learned local reranker
//! ([`learned`], the default, over [`features`], trained by [`train`]), a remote cross-encoder over HTTP
//! ([`remote`]), and [`LexicalReranker`] (no model: the question coverage of [`attest_text::relevance`]), the
//! "without rerank" baseline.

pub mod features;
pub mod learned;
pub mod readers;
pub mod remote;

use std::path::PathBuf;
use std::sync::Arc;

use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};

pub use self::learned::{LearnedReranker, RerankerFile};
pub use self::readers::ReaderRerankConfig;
pub use self::remote::{RemoteApi, RemoteRerankConfig, RemoteReranker};
use attest_text::relevance::passage_relevance;

#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    #[error("reranker unavailable: {0}")]
    Unavailable(String),
    #[error("reranker model: {0}")]
    Model(String),
    #[error("reranker config: {0}")]
    Config(String),
}

/// Scores candidates for a question.
pub trait Reranker: Send + Sync {
    /// Back-end name reported in logs and responses (`learned`, `remote`, `lexical`).
    fn name(&self) -> &'static str;
    /// One score in 0..1 per candidate, in input order: how likely the passage answers the question.
    fn score(&self, question: &str, candidates: &[pb::Hit]) -> Result<Vec<f64>, RerankError>;
}

/// The model-free baseline: the share of the question's content words its best sentence (with the title) covers.
#[derive(Debug, Clone, Copy, Default)]
pub struct LexicalReranker;

impl Reranker for LexicalReranker {
    fn name(&self) -> &'static str {
        "lexical"
    }
    fn score(&self, question: &str, candidates: &[pb::Hit]) -> Result<Vec<f64>, RerankError> {
        Ok(candidates
            .iter()
            .map(|h| passage_relevance(question, &h.title, &h.text))
            .collect())
    }
}

/// Which reranker scores candidates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankBackend {
    /// Logistic regression over features (`models/reranker.json`, or `model_path`).
    #[default]
    Learned,
    /// A cross-encoder service (`remote`).
    Remote,
    /// Question coverage alone, no model.
    Lexical,
}

/// Settings of the reranker (the `answer.rerank` config section).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RerankConfig {
    pub backend: RerankBackend,
    /// The cross-encoder service, for `backend: remote`.
    pub remote: RemoteRerankConfig,
    /// A model file of `attest-lab train reranker` used instead of the committed one, for `backend: learned`.
    pub model_path: Option<PathBuf>,
    /// The readers reordering the best candidates after this reranker ([`readers`]; off by default).
    pub readers: ReaderRerankConfig,
}

/// The reranker `config` names. A remote back end without a URL, or a model file that does not load or does
/// not match this build's features, is an error (a misconfiguration to report at start-up, not per question).
pub fn from_config(config: &RerankConfig) -> Result<Arc<dyn Reranker>, RerankError> {
    config.readers.validate().map_err(RerankError::Config)?;
    Ok(match config.backend {
        RerankBackend::Learned => match &config.model_path {
            Some(path) => Arc::new(LearnedReranker::from_path(path)?),
            None => Arc::new(LearnedReranker::bundled()?),
        },
        RerankBackend::Remote if config.remote.url.trim().is_empty() => {
            return Err(RerankError::Unavailable(
                "rerank.backend is remote but rerank.remote.url is empty".into(),
            ))
        }
        RerankBackend::Remote => Arc::new(RemoteReranker::new(config.remote.clone())),
        RerankBackend::Lexical => Arc::new(LexicalReranker),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_back_end_choice() {
        let c: RerankConfig = serde_json::from_str("{}").expect("empty config");
        assert_eq!(c.backend, RerankBackend::Learned);
        assert_eq!(c.remote.api, RemoteApi::Tei);
        assert_eq!(from_config(&c).expect("bundled model").name(), "learned");

        let c: RerankConfig = serde_json::from_str(
            r#"{"backend": "remote", "remote": {"url": "http://tei:8080", "api": "cohere", "timeout_ms": 500}}"#,
        )
        .expect("remote config");
        assert_eq!(c.remote.api, RemoteApi::Cohere);
        assert_eq!(from_config(&c).expect("remote").name(), "remote");

        let lexical = RerankConfig {
            backend: RerankBackend::Lexical,
            ..Default::default()
        };
        assert_eq!(from_config(&lexical).expect("lexical").name(), "lexical");

        let no_url = RerankConfig {
            backend: RerankBackend::Remote,
            ..Default::default()
        };
        assert!(matches!(
            from_config(&no_url),
            Err(RerankError::Unavailable(_))
        ));
        let missing = RerankConfig {
            model_path: Some(PathBuf::from("/nonexistent/reranker.json")),
            ..Default::default()
        };
        assert!(matches!(from_config(&missing), Err(RerankError::Model(_))));
        let heavy = RerankConfig {
            readers: ReaderRerankConfig {
                depth: 20,
                weight: 2.0,
                sentences: 1,
            },
            ..Default::default()
        };
        assert!(matches!(from_config(&heavy), Err(RerankError::Config(_))));
    }
}
