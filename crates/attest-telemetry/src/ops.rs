//! `/healthz`, `/readyz` and `/metrics`, mounted by every role's HTTP listener.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;

/// Answers whether the role can serve traffic now (its stores open, its dependencies known): `Err` says what it
/// is waiting for, in words an operator reads in `/readyz`'s body.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Runs before `/metrics` renders, to set gauges that are cheaper to read on demand (shard sizes).
pub type MetricsRefresh = Arc<dyn Fn() + Send + Sync>;

/// Set once when the process was started with `--insecure`: every `/readyz` body says so, so a probe or an
/// operator reading it sees that the role serves unprotected.
static INSECURE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The bearer token `/metrics` wants, when the operator set one (`attest serve --metrics-token`); open
/// otherwise, as Prometheus scrapers usually are inside a cluster.
static METRICS_TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Makes every `/metrics` of this process want `Authorization: Bearer <token>` (set once, at start-up).
pub fn protect_metrics(token: &str) {
    let _ = METRICS_TOKEN.set(token.to_string());
}

/// Whether `headers` carry the metrics token (always, when none is set). Compared in constant time.
fn metrics_allowed(headers: &axum::http::HeaderMap) -> bool {
    let Some(token) = METRICS_TOKEN.get() else {
        return true;
    };
    let expected = format!("Bearer {token}");
    let given = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected.as_bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Marks this process as serving without TLS or keys (`attest serve --insecure`).
pub fn mark_insecure() {
    INSECURE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The `/readyz` body: `ready`, or `not ready: <why>`, then a line for each data directory below its free-space
/// reserve (`crate::disk`: still ready, reads are served), with the `--insecure` warning after either.
fn readiness_body(readiness: &Result<(), String>) -> String {
    let mut body = match readiness {
        Ok(()) => "ready".to_string(),
        Err(why) => format!("not ready: {why}"),
    };
    for note in crate::disk::readiness_notes() {
        body.push_str("; ");
        body.push_str(&note);
    }
    if INSECURE.load(std::sync::atomic::Ordering::Relaxed) {
        body.push_str(
            " (insecure: started with --insecure, traffic may be plaintext and unauthenticated)",
        );
    }
    body
}

/// `/healthz` (the process is up), `/readyz` (200 when `ready()` holds, else 503) and `/metrics`.
pub fn routes(ready: ReadinessCheck, refresh: Option<MetricsRefresh>) -> axum::Router {
    crate::metrics::install();
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz).with_state(ready))
        .route("/metrics", get(metrics).with_state(refresh))
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "ops", operation_id = "healthz",
    responses((status = 200, description = "The process is up: `ok`.", body = String, content_type = "text/plain")))]
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: whether this process can serve traffic now.
#[utoipa::path(get, path = "/readyz", tag = "ops", operation_id = "readyz",
    responses(
        (status = 200, description = "`ready`, followed by a warning when the process runs with `--insecure`.",
            body = String, content_type = "text/plain"),
        // Every role's app ends in `http_error::with_json_errors`, which turns the plain-text reason written
        // below into the JSON error body's message.
        (status = 503, description = "Not ready yet: the message says what it waits for (`not ready: waiting \
            for the cluster state from meta ...`).", body = crate::http_error::ErrorBody),
    ))]
pub(crate) async fn readyz(State(ready): State<ReadinessCheck>) -> (StatusCode, String) {
    let readiness = ready();
    let status = if readiness.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, readiness_body(&readiness))
}

/// Prometheus metrics, in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "ops", operation_id = "metrics",
    // Open unless the operator set a metrics token (`attest serve --metrics-token`): both are allowed.
    security((), ("metrics_token" = [])),
    responses(
        (status = 200, description = "Every metric of this process.", body = String,
            content_type = "text/plain; version=0.0.4"),
        (status = 401, description = "A metrics token is set and the request did not carry it.",
            body = crate::http_error::ErrorBody),
    ))]
pub(crate) async fn metrics(
    State(refresh): State<Option<MetricsRefresh>>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    if !metrics_allowed(&headers) {
        ::metrics::counter!("auth_denied_total", "reason" => "metrics_token").increment(1);
        return (
            StatusCode::UNAUTHORIZED,
            "/metrics needs the metrics token (Authorization: Bearer <token>)",
        )
            .into_response();
    }
    if let Some(refresh) = &refresh {
        refresh();
    }
    let body = crate::metrics::render();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// Readiness that is always true (roles whose only dependency is their own process).
pub fn always_ready() -> ReadinessCheck {
    Arc::new(|| Ok(()))
}
