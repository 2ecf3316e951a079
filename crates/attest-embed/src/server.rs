//! `attest serve --role embedder`: Attest's own embedding service, speaking the OpenAI-compatible
//! `POST /v1/embeddings` and the text-embeddings-inference `POST /embed`, plus `/healthz`, `/readyz` and
//! `/metrics`. It gives a cluster a real embedding service that can be scaled, moved to a GPU host (the
//! `cuda` feature) and killed, with the router's breaker in front of it.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use attest_proto::ErrorCode;
use attest_telemetry::http_error::HttpError;
use attest_telemetry::metrics::{observe_stage, EMBED_SERVER_TEXTS_TOTAL, STAGE_EMBED};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::embedder::Embedder;
use crate::error::EmbedError;

/// Limits of the embedding server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmbedServerConfig {
    /// Most texts in one request.
    pub max_batch_texts: usize,
    /// Longest text accepted, in bytes (the model truncates to its window anyway).
    pub max_text_bytes: usize,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Forward passes run at once; more requests wait their turn.
    pub max_concurrent_batches: usize,
}

impl Default for EmbedServerConfig {
    fn default() -> Self {
        EmbedServerConfig {
            max_batch_texts: 256,
            max_text_bytes: 64 * 1024,
            max_body_bytes: 8 * 1024 * 1024,
            max_concurrent_batches: 2,
        }
    }
}

struct AppState {
    embedder: Arc<dyn Embedder>,
    config: EmbedServerConfig,
    permits: Semaphore,
}

/// Serves until `shutdown` resolves. The caller binds the listener (tests use `127.0.0.1:0`).
pub async fn serve(
    embedder: Arc<dyn Embedder>,
    config: EmbedServerConfig,
    guard: attest_auth::cluster::ClusterGuard,
    listener: impl Into<attest_telemetry::listener::Listener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app =
        attest_telemetry::http_error::with_json_errors(guarded_routes(embedder, config, guard));
    attest_telemetry::listener::serve_http(listener.into(), app, shutdown).await
}

/// The routes without a guard (the embedding APIs open to any caller).
pub fn routes(embedder: Arc<dyn Embedder>, config: EmbedServerConfig) -> axum::Router {
    guarded_routes(embedder, config, Default::default())
}

/// The routes with the embedding APIs behind `guard` (the cluster credential, when one is configured: the
/// embedder is an internal service of the cluster); health, readiness and metrics stay open for probes.
pub fn guarded_routes(
    embedder: Arc<dyn Embedder>,
    config: EmbedServerConfig,
    guard: attest_auth::cluster::ClusterGuard,
) -> axum::Router {
    let state = Arc::new(AppState {
        permits: Semaphore::new(config.max_concurrent_batches.max(1)),
        embedder,
        config,
    });
    axum::Router::new()
        .route("/v1/embeddings", post(openai_embeddings))
        .route("/embed", post(tei_embed))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .route_layer(axum::middleware::from_fn_with_state(
            guard,
            attest_auth::cluster::require,
        ))
        .with_state(state)
        .merge(attest_telemetry::ops::routes(
            attest_telemetry::ops::always_ready(),
            None,
        ))
}

/// One text or a list of texts, as both APIs accept.
#[derive(Deserialize)]
#[serde(untagged)]
enum Texts {
    One(String),
    Many(Vec<String>),
}

impl Texts {
    fn into_vec(self) -> Vec<String> {
        match self {
            Texts::One(t) => vec![t],
            Texts::Many(v) => v,
        }
    }
}

#[derive(Deserialize)]
struct OpenAiRequest {
    input: Texts,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct TeiRequest {
    inputs: Texts,
}

/// The errors of this server, in the vocabulary every role shares (`attest_proto::error`).
type ApiError = HttpError;

fn error(code: ErrorCode, message: impl Into<String>) -> ApiError {
    HttpError(attest_proto::ApiError::new(code, message))
}

fn bad_request(field: &str, message: impl Into<String>) -> ApiError {
    HttpError(attest_proto::ApiError::invalid(field, message))
}

fn body<T>(r: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    r.map(|Json(v)| v)
        .map_err(|e| HttpError(attest_telemetry::http_error::json_rejection(e)))
}

async fn openai_embeddings(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    req: Result<Json<OpenAiRequest>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let req = body(req)?;
    let model = state.embedder.id().to_string();
    // A client naming another model would record this model's vectors under that name: a collection would then
    // claim an identity its vectors do not have.
    if let Some(asked) = req.model.filter(|asked| *asked != model) {
        return Err(bad_request(
            "model",
            format!("this service embeds with {model}, not {asked}"),
        ));
    }
    let texts = req.input.into_vec();
    let tokens: usize = texts.iter().map(|t| state.embedder.count_tokens(t)).sum();
    let vectors = embed(&state, &headers, texts).await?;
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| json!({"object": "embedding", "index": index, "embedding": embedding}))
        .collect();
    Ok(Json(json!({
        "object": "list", "data": data, "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })))
}

async fn tei_embed(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    req: Result<Json<TeiRequest>, JsonRejection>,
) -> Result<Json<Vec<Vec<f32>>>, ApiError> {
    let req = body(req)?;
    Ok(Json(embed(&state, &headers, req.inputs.into_vec()).await?))
}

async fn embed(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    texts: Vec<String>,
) -> Result<Vec<Vec<f32>>, ApiError> {
    let request_id = attest_telemetry::request_id::from_http(headers);
    let span = tracing::info_span!("request", request_id = %request_id);
    async move {
        if texts.is_empty() {
            return Err(bad_request("input", "no input texts"));
        }
        if texts.len() > state.config.max_batch_texts {
            return Err(error(
                ErrorCode::PayloadTooLarge,
                format!("at most {} texts per request", state.config.max_batch_texts),
            ));
        }
        if let Some(i) = texts
            .iter()
            .position(|t| t.len() > state.config.max_text_bytes)
        {
            return Err(bad_request(
                "input",
                format!(
                    "input {i} is longer than {} bytes",
                    state.config.max_text_bytes
                ),
            ));
        }
        let _permit = state
            .permits
            .acquire()
            .await
            .map_err(|_| error(ErrorCode::Unavailable, "shutting down"))?;
        let started = Instant::now();
        let n = texts.len();
        let embedder = Arc::clone(&state.embedder);
        let result = attest_telemetry::cpu::run_cpu_intensive(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed(&refs)
        })
        .await
        .map_err(|e| error(ErrorCode::Internal, e.to_string()))?;
        observe_stage(STAGE_EMBED, started.elapsed());
        match result {
            Ok(vectors) => {
                metrics::counter!(EMBED_SERVER_TEXTS_TOTAL).increment(n as u64);
                tracing::info!(
                    texts = n,
                    took_ms = started.elapsed().as_secs_f64() * 1e3,
                    event = "embedded",
                    "embedded texts"
                );
                Ok(vectors)
            }
            Err(EmbedError::InvalidInput(m)) => Err(bad_request("input", m)),
            Err(e) => {
                tracing::error!(error = %e, event = "embed_failed", "embedding failed");
                Err(error(ErrorCode::Unavailable, e.to_string()))
            }
        }
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EmbedError;

    /// The model this service runs: fixed vectors, so the test is about the API, not the model.
    struct Fixed;

    impl Embedder for Fixed {
        fn id(&self) -> &str {
            "fixed-model"
        }
        fn dimension(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
        }
        fn count_tokens(&self, text: &str) -> usize {
            text.len()
        }
    }

    #[tokio::test]
    async fn a_request_naming_another_model_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            Arc::new(Fixed),
            EmbedServerConfig::default(),
            Default::default(),
            listener,
            async {
                let _ = stopped.await;
            },
        ));
        let http = reqwest::Client::new();
        let post = |body: Value| http.post(&url).json(&body).send();
        let other = post(json!({"model": "e5-large", "input": "a"}))
            .await
            .unwrap();
        assert_eq!(other.status(), 400);
        let text = other.text().await.unwrap();
        assert!(
            text.contains("fixed-model") && text.contains("e5-large"),
            "{text}"
        );
        for body in [
            json!({"model": "fixed-model", "input": "a"}),
            json!({"input": ["a", "b"]}),
        ] {
            let ok = post(body).await.unwrap();
            assert_eq!(ok.status(), 200);
            let v: Value = ok.json().await.unwrap();
            assert_eq!(v["model"], "fixed-model", "{v}");
        }
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
