//! Choosing the embedder from configuration: the local model (ONNX Runtime by default, or candle) or a remote service behind a
//! circuit breaker. Every choice is wrapped in [`GuardedEmbedder`] so the embedding metrics always count.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::breaker::{BreakerConfig, CircuitBreaker};
use crate::config::{LocalEmbedderConfig, LocalModel, LocalRuntime};
use crate::embedder::Embedder;
use crate::error::EmbedError;
use crate::guarded::GuardedEmbedder;
use crate::minilm::MiniLmEmbedder;
use crate::onnx::OnnxEmbedder;
use crate::remote::{RemoteEmbedder, RemoteEmbedderConfig};

/// The `embedder:` section of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmbedderConfig {
    pub backend: EmbedderBackend,
    pub local: LocalEmbedderConfig,
    pub remote: RemoteEmbedderConfig,
    /// The breaker around the remote embedder (`circuit_breaker.embeddings` in the seed).
    pub breaker: BreakerConfig,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderBackend {
    #[default]
    Local,
    Remote,
}

/// The `service` label of the breaker around the embedding service.
pub const EMBEDDINGS_SERVICE: &str = attest_telemetry::metrics::SERVICE_EMBEDDINGS;

impl EmbedderConfig {
    /// Points the configuration at a remote service (`--embedder-url`).
    pub fn use_remote_url(&mut self, url: &str) {
        self.backend = EmbedderBackend::Remote;
        self.remote.url = url.to_string();
    }
}

/// Builds the configured embedder. The local model is loaded (and checksummed) now; a remote service is not
/// contacted until the first call, so a router starts even while its embedding service is down.
pub fn build_embedder(config: &EmbedderConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    attest_telemetry::metrics::register_embedding_metrics();
    Ok(match config.backend {
        EmbedderBackend::Local => match (config.local.model, config.local.runtime) {
            (_, LocalRuntime::Onnx) => Arc::new(GuardedEmbedder::metered(OnnxEmbedder::from_config(
                &config.local,
            )?)),
            (LocalModel::MiniLm, LocalRuntime::Candle) => Arc::new(GuardedEmbedder::metered(
                MiniLmEmbedder::from_config(&config.local)?,
            )),
            (model, LocalRuntime::Candle) => {
                return Err(EmbedError::InvalidInput(format!(
                    "embedder.local.model {} runs under ONNX Runtime only (embedder.local.runtime: onnx)",
                    model.id()
                )))
            }
        },
        EmbedderBackend::Remote => {
            let remote = RemoteEmbedder::new(config.remote.clone())?;
            tracing::info!(endpoint = %remote.endpoint(), event = "remote_embedder", "using a remote embedder");
            let breaker = CircuitBreaker::new(EMBEDDINGS_SERVICE, config.breaker.clone());
            Arc::new(GuardedEmbedder::with_breaker(remote, breaker))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_shape_and_defaults() {
        let cfg: EmbedderConfig = serde_json::from_str(
            r#"{"backend": "remote", "remote": {"url": "http://gpu:80", "api": "tei"},
                "breaker": {"failure_threshold": 3}}"#,
        )
        .unwrap();
        assert_eq!(cfg.backend, EmbedderBackend::Remote);
        assert_eq!(cfg.remote.api, crate::remote::RemoteApi::Tei);
        assert_eq!(cfg.breaker.failure_threshold, 3);
        assert_eq!(cfg.breaker.success_threshold, 2);
        assert_eq!(cfg.breaker.open_timeout_secs, 30.0);
        assert_eq!(cfg.remote.timeout_ms, 2_000);
    }

    #[test]
    fn bge_under_candle_is_refused_by_name() {
        let cfg: EmbedderConfig = serde_json::from_str(
            r#"{"local": {"model": "bge-small-en-v1.5", "runtime": "candle"}}"#,
        )
        .unwrap();
        let err = build_embedder(&cfg).err().expect("refused");
        assert!(err.to_string().contains("ONNX Runtime only"), "{err}");
    }

    #[test]
    fn a_bad_remote_url_is_a_clear_error() {
        let mut cfg = EmbedderConfig::default();
        cfg.use_remote_url("gpu-embed:8080");
        let err = build_embedder(&cfg).err().expect("refused");
        assert!(err.to_string().contains("http://"), "{err}");
    }
}
