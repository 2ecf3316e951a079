//! Request ids: made at the edge (or taken from the caller's `x-request-id`) and carried through every hop in
//! the `x-request-id` HTTP header and gRPC metadata key, so one request can be followed in every role's logs.

use tracing::Instrument;

/// Header and gRPC metadata key.
pub const HEADER: &str = "x-request-id";

/// Longest caller-supplied id accepted; longer ones are replaced by a fresh id.
pub const MAX_LEN: usize = 128;

/// A fresh id, `req-` followed by 32 hex digits.
pub fn new_id() -> String {
    format!("req-{}", uuid::Uuid::new_v4().simple())
}

/// The caller's id if it is usable: 1–128 visible ASCII characters (it ends up in logs and headers).
pub fn accept(candidate: &str) -> Option<String> {
    let ok = !candidate.is_empty()
        && candidate.len() <= MAX_LEN
        && candidate.bytes().all(|b| b.is_ascii_graphic());
    ok.then(|| candidate.to_string())
}

/// The id of an incoming HTTP request, or a fresh one.
pub fn from_http(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(accept)
        .unwrap_or_else(new_id)
}

/// The id of an incoming gRPC request, or a fresh one.
pub fn from_grpc(metadata: &tonic::metadata::MetadataMap) -> String {
    metadata
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(accept)
        .unwrap_or_else(new_id)
}

/// Wraps an outgoing gRPC message with the request id and the current span's trace context in its metadata.
pub fn grpc_request<T>(message: T, request_id: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Ok(v) = tonic::metadata::MetadataValue::try_from(request_id) {
        req.metadata_mut().insert(HEADER, v);
    }
    crate::traces::inject_grpc(req.metadata_mut());
    req
}

/// The caller's request id (or a fresh one) and the span a gRPC handler runs in, the caller's trace its
/// parent.
pub fn grpc_span(metadata: &tonic::metadata::MetadataMap) -> (String, tracing::Span) {
    let id = from_grpc(metadata);
    let span = span(&id);
    crate::traces::set_parent_from_grpc(&span, metadata);
    (id, span)
}

thread_local! {
    static CURRENT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `request_id` as this thread's current request id. Synchronous code that cannot take the id
/// as an argument (an `Embedder` on a blocking thread) reads it with [`current`] to pass it on to the next hop.
pub fn with_current<T>(request_id: &str, f: impl FnOnce() -> T) -> T {
    let previous = CURRENT.with(|c| c.replace(Some(request_id.to_string())));
    let out = f();
    CURRENT.with(|c| *c.borrow_mut() = previous);
    out
}

/// The id set by the innermost [`with_current`] on this thread.
pub fn current() -> Option<String> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The request id of an HTTP request, put in its extensions by [`http_middleware`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

/// The span every handler runs in, so each log line inside carries the id.
pub fn span(request_id: &str) -> tracing::Span {
    tracing::info_span!("request", request_id = %request_id)
}

/// axum middleware (`axum::middleware::from_fn(http_middleware)`): takes the caller's `x-request-id` or makes
/// one, stores it as a [`RequestId`] extension, runs the handler inside [`span`], echoes the id in the
/// response's `x-request-id` header and writes one access-log line (`event: "http_request"`, component `http`).
pub async fn http_middleware(
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let id = from_http(req.headers());
    req.extensions_mut().insert(RequestId(id.clone()));
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let started = std::time::Instant::now();
    let span = span(&id);
    crate::traces::set_parent_from_http(&span, req.headers());
    let mut resp = next.run(req).instrument(span).await;
    if let Ok(v) = axum::http::HeaderValue::from_str(&id) {
        resp.headers_mut().insert(HEADER, v);
    }
    // Probes and scrapes would drown the access log.
    if !matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics") {
        tracing::info!(target: "attest_http", request_id = %id, method = %method, path = %path,
            status = resp.status().as_u16(), took_ms = started.elapsed().as_secs_f64() * 1e3,
            event = "http_request", "request served");
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_ids_are_kept_when_sane_and_replaced_otherwise() {
        let mut h = axum::http::HeaderMap::new();
        h.insert(HEADER, "abc-123".parse().unwrap());
        assert_eq!(from_http(&h), "abc-123");
        h.insert(HEADER, "x".repeat(MAX_LEN + 1).parse().unwrap());
        assert!(from_http(&h).starts_with("req-"));
        assert!(accept("has space").is_none());
        assert!(accept("").is_none());
        assert_ne!(new_id(), new_id());
    }

    #[test]
    fn current_is_scoped_and_nests() {
        assert_eq!(current(), None);
        with_current("outer", || {
            assert_eq!(current().as_deref(), Some("outer"));
            with_current("inner", || assert_eq!(current().as_deref(), Some("inner")));
            assert_eq!(current().as_deref(), Some("outer"));
        });
        assert_eq!(current(), None);
    }

    #[test]
    fn grpc_metadata_round_trip() {
        let req = grpc_request((), "req-42");
        assert_eq!(from_grpc(req.metadata()), "req-42");
        assert!(from_grpc(&tonic::metadata::MetadataMap::new()).starts_with("req-"));
    }
}
