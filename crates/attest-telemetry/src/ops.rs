//! `/healthz`, `/readyz` and `/metrics`, mounted by every role's HTTP listener.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;

/// Answers whether the role can serve traffic now (its stores open, its dependencies known).
pub type ReadinessCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Runs before `/metrics` renders, to set gauges that are cheaper to read on demand (shard sizes).
pub type MetricsRefresh = Arc<dyn Fn() + Send + Sync>;

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
                    if ready {
                        (StatusCode::OK, "ready")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                if let Some(refresh) = &refresh {
                    refresh();
                }
                let body = crate::metrics::render();
                async move {
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
                }
            }),
        )
}

/// Readiness that is always true (roles whose only dependency is their own process).
pub fn always_ready() -> ReadinessCheck {
    Arc::new(|| true)
}
