//! `/healthz`, `/readyz` and `/metrics`, mounted by every role's HTTP listener.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;

/// Answers whether the role can serve traffic now (its stores open, its dependencies known).
pub type ReadinessCheck = Arc<dyn Fn() -> bool + Send + Sync>;

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

/// The `/readyz` body of a ready or unready process.
fn readiness_body(ready: bool) -> &'static str {
    let insecure = INSECURE.load(std::sync::atomic::Ordering::Relaxed);
    match (ready, insecure) {
        (true, false) => "ready",
        (false, false) => "not ready",
        (true, true) => "ready (insecure: started with --insecure, traffic may be plaintext and unauthenticated)",
        (false, true) => {
            "not ready (insecure: started with --insecure, traffic may be plaintext and unauthenticated)"
        }
    }
}

/// `/healthz` (the process is up), `/readyz` (200 when `ready()` holds, else 503) and `/metrics`.
pub fn routes(ready: ReadinessCheck, refresh: Option<MetricsRefresh>) -> axum::Router {
    crate::metrics::install();
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready();
                async move {
                    let status = if ready {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    };
                    (status, readiness_body(ready))
                }
            }),
        )
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                let allowed = metrics_allowed(&headers);
                if allowed {
                    if let Some(refresh) = &refresh {
                        refresh();
                    }
                }
                async move {
                    if !allowed {
                        ::metrics::counter!("auth_denied_total", "reason" => "metrics_token")
                            .increment(1);
                        return (
                            StatusCode::UNAUTHORIZED,
                            "/metrics needs the metrics token (Authorization: Bearer <token>)",
                        )
                            .into_response();
                    }
                    let body = crate::metrics::render();
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
                }
            }),
        )
}

/// Readiness that is always true (roles whose only dependency is their own process).
pub fn always_ready() -> ReadinessCheck {
    Arc::new(|| true)
}
