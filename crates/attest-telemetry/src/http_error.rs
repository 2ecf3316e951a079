//! The HTTP form of [`attest_proto::ApiError`], shared by the router, the answer tier and the embedder:
//! `{"error": {"code", "message", "field"?}}` with the status of its [`attest_proto::ErrorCode`] (and
//! `Retry-After` where retrying later is the answer), including for bodies axum refuses and for unknown routes
//! and methods, which would otherwise answer with an empty or plain-text body.

use attest_proto::{ApiError, ErrorCode};
use axum::extract::rejection::JsonRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error answer; its HTTP status follows from `error.code`.
// [`HttpError`] sends exactly this type, and the OpenAPI document describes it from the same derive.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// What went wrong, as a name (gRPC's spelling, plus `PAYLOAD_TOO_LARGE`); the HTTP status follows from it.
    #[schema(schema_with = error_code_schema)]
    pub code: &'static str,
    pub message: String,
    /// The request field the error is about (`documents[3].colour`, `k`, `body`), when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl From<ApiError> for ErrorBody {
    fn from(e: ApiError) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code: e.code.as_str(),
                message: e.message,
                field: e.field,
            },
        }
    }
}

/// `code` as the closed set of [`ErrorCode::ALL`], so the document lists every name a client may see.
fn error_code_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(ErrorCode::ALL.map(ErrorCode::as_str)))
        .build()
}

/// An [`ApiError`] answered over HTTP.
#[derive(Debug)]
pub struct HttpError(pub ApiError);

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError(e)
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let code = self.0.code;
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(ErrorBody::from(self.0))).into_response();
        if let Some(secs) = code.retry_after_secs() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A JSON body axum could not take: over the size limit (413), or not the JSON expected (400). The 400 names
/// the field serde stopped at (`documents[3].colour` for an unknown field, `nprobe` for a value of the wrong
/// type), or `body` when the error is about the whole body (not JSON, a field missing at the top).
pub fn json_rejection(e: JsonRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(ErrorCode::PayloadTooLarge, e.body_text());
    }
    let field = rejected_path(&e).unwrap_or_else(|| "body".to_string());
    ApiError::invalid(field, e.body_text())
}

/// The path of the value a JSON data error is about, as `serde_path_to_error` (which axum's `Json` uses)
/// recorded it; `None` for a syntax error or one at the top level.
fn rejected_path(e: &JsonRejection) -> Option<String> {
    use std::error::Error;
    let JsonRejection::JsonDataError(data) = e else {
        return None;
    };
    // `JsonDataError` → axum's boxed error → the path error.
    let path = data
        .source()?
        .source()?
        .downcast_ref::<serde_path_to_error::Error<serde_json::Error>>()?
        .path()
        .to_string();
    (path != ".").then_some(path)
}

/// The longest plain-text error body kept as the JSON error's message (a route's own reason, not a page).
const MAX_KEPT_TEXT: usize = 4096;

/// Middleware (`axum::middleware::map_response`): an error response without a body (an unknown route, a method
/// a route does not have, a body over the size limit refused before any handler) becomes the JSON error body.
pub async fn json_error_bodies(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    // A route's own plain-text reason (`/readyz`'s "not ready (insecure: ...)", `/metrics`' token refusal) is
    // kept as the message; only a framework's canned or empty body is replaced by a generic one.
    let own_text = axum::body::to_bytes(response.into_body(), MAX_KEPT_TEXT)
        .await
        .ok()
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    let (code, message) = match status {
        StatusCode::NOT_FOUND => (ErrorCode::NotFound, "no such route".to_string()),
        StatusCode::METHOD_NOT_ALLOWED => (
            ErrorCode::InvalidArgument,
            "method not allowed on this route".to_string(),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            ErrorCode::PayloadTooLarge,
            "request body over the size limit".to_string(),
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            ErrorCode::InvalidArgument,
            "unsupported content type (send application/json)".to_string(),
        ),
        other => (
            ErrorCode::from_http_fallback(other.as_u16()),
            own_text.unwrap_or_else(|| other.canonical_reason().unwrap_or("error").to_string()),
        ),
    };
    let mut out = HttpError(ApiError::new(code, message)).into_response();
    // The status the route gave stays (405 for a wrong method): only the body changes.
    *out.status_mut() = status;
    out
}

/// The last step of every role's HTTP app: unknown routes answer the JSON `NOT_FOUND` body, and every bodiless
/// error the framework produces gets the JSON body (see [`json_error_bodies`]).
pub fn with_json_errors(app: axum::Router) -> axum::Router {
    app.fallback(|| async { HttpError(ApiError::new(ErrorCode::NotFound, "no such route")) })
        .layer(axum::middleware::map_response(json_error_bodies))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::DefaultBodyLimit;
    use axum::http::Request;
    use axum::routing::post;
    use serde_json::Value;
    use tower::ServiceExt;

    async fn echo(b: Result<axum::Json<Value>, JsonRejection>) -> Result<String, HttpError> {
        let axum::Json(v) = b.map_err(|e| HttpError(json_rejection(e)))?;
        Ok(v.to_string())
    }

    fn app() -> axum::Router {
        with_json_errors(
            axum::Router::new()
                .route("/echo", post(echo))
                .route(
                    "/not-ready",
                    axum::routing::get(|| async {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "not ready: waiting for meta",
                        )
                    }),
                )
                .layer(DefaultBodyLimit::max(64)),
        )
    }

    async fn call(method: &str, uri: &str, body: &str) -> (u16, Value, Option<String>) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = app().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            retry,
        )
    }

    #[tokio::test]
    async fn a_routes_own_plain_text_reason_is_kept_as_the_message() {
        let (s, b, _) = call("GET", "/not-ready", "").await;
        assert_eq!(s, 503);
        assert_eq!(b["error"]["code"], "UNAVAILABLE", "{b}");
        assert_eq!(b["error"]["message"], "not ready: waiting for meta", "{b}");
    }

    #[tokio::test]
    async fn framework_refusals_answer_the_one_json_error_body() {
        let (s, b, _) = call(
            "POST",
            "/echo",
            &format!(r#"{{"q": "{}"}}"#, "a".repeat(100)),
        )
        .await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (413, Some("PAYLOAD_TOO_LARGE")),
            "{b}"
        );
        let (s, b, _) = call("POST", "/echo", "{not json").await;
        assert_eq!(
            (s, b["error"]["field"].as_str()),
            (400, Some("body")),
            "{b}"
        );
        let (s, b, _) = call("GET", "/nowhere", "").await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (404, Some("NOT_FOUND")),
            "{b}"
        );
        let (s, b, _) = call("GET", "/echo", "").await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (405, Some("INVALID_ARGUMENT")),
            "{b}"
        );
        let (s, _, _) = call("POST", "/echo", r#"{"q": 1}"#).await;
        assert_eq!(s, 200);
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        id: String,
        #[serde(default)]
        nprobe: Option<u32>,
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Docs {
        documents: Vec<Doc>,
    }

    #[test]
    fn a_data_error_names_the_field_it_is_about() {
        let refusal = |body: &str| {
            let e = axum::Json::<Docs>::from_bytes(body.as_bytes())
                .err()
                .expect("refused");
            let e = json_rejection(e);
            (e.field.unwrap_or_default(), e.message)
        };
        let (field, message) =
            refusal(r#"{"documents": [{"id": "a"}, {"id": "b", "colour": "red"}]}"#);
        assert_eq!(field, "documents[1].colour");
        assert!(message.contains("unknown field `colour`"), "{message}");
        let (field, message) = refusal(r#"{"documents": [], "top_k": 3}"#);
        assert_eq!(field, "top_k");
        assert!(message.contains("top_k"), "{message}");
        assert_eq!(
            refusal(r#"{"documents": [{"id": "a", "nprobe": 1e6}]}"#).0,
            "documents[0].nprobe"
        );
        assert_eq!(
            refusal(r#"{"documents": [{"id": "a", "nprobe": -1}]}"#).0,
            "documents[0].nprobe"
        );
        // Not JSON, or a field missing from the top: the whole body.
        assert_eq!(refusal("{not json").0, "body");
        assert_eq!(refusal("{}").0, "body");
    }

    #[tokio::test]
    async fn shed_load_is_429_with_retry_after() {
        let response =
            HttpError(ApiError::new(ErrorCode::ResourceExhausted, "busy")).into_response();
        assert_eq!(response.status().as_u16(), 429);
        assert_eq!(response.headers()["retry-after"], "1");
    }
}
