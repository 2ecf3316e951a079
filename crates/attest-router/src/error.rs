//! Router errors, and the one place where they become gRPC status codes and HTTP responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tonic::Code;

#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("invalid argument `{field}`: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl RouterError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        RouterError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn code(&self) -> Code {
        match self {
            RouterError::InvalidArgument { .. } => Code::InvalidArgument,
            RouterError::NotFound(_) => Code::NotFound,
            RouterError::AlreadyExists(_) => Code::AlreadyExists,
            RouterError::PayloadTooLarge(_) => Code::ResourceExhausted,
            RouterError::Unavailable(_) => Code::Unavailable,
            RouterError::Internal(_) => Code::Internal,
        }
    }

    /// A shard's status, seen from the router: argument and lookup errors keep their code.
    pub fn from_status(s: tonic::Status) -> Self {
        match s.code() {
            Code::InvalidArgument => {
                let field = s
                    .metadata()
                    .get("x-attest-field")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("request")
                    .to_string();
                RouterError::InvalidArgument {
                    field,
                    reason: s.message().to_string(),
                }
            }
            Code::NotFound => RouterError::NotFound(s.message().to_string()),
            Code::AlreadyExists => RouterError::AlreadyExists(s.message().to_string()),
            // A call that ran out of time (tonic reports a server-side deadline as `Cancelled`) is the callee
            // being unavailable now, something to retry, not a fault of the router.
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => {
                RouterError::Unavailable(s.message().to_string())
            }
            _ => RouterError::Internal(s.message().to_string()),
        }
    }
}

/// gRPC code → HTTP status, as SPEC's HTTP API v1 lists them.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition => {
            StatusCode::BAD_REQUEST
        }
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::PAYLOAD_TOO_LARGE,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<RouterError> for tonic::Status {
    fn from(e: RouterError) -> Self {
        tonic::Status::new(e.code(), e.to_string())
    }
}

impl IntoResponse for RouterError {
    fn into_response(self) -> Response {
        let code = self.code();
        let mut body = json!({"error": {"code": format!("{code:?}").to_uppercase(), "message": self.to_string()}});
        if let RouterError::InvalidArgument { field, .. } = &self {
            body["error"]["field"] = json!(field);
        }
        (http_status(code), axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callee_statuses_keep_their_meaning_over_http() {
        let http = |s: tonic::Status| http_status(RouterError::from_status(s).code());
        assert_eq!(
            http(tonic::Status::already_exists("c")),
            StatusCode::CONFLICT
        );
        assert_eq!(
            http(tonic::Status::cancelled("Timeout expired")),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            http(tonic::Status::deadline_exceeded("late")),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(http(tonic::Status::not_found("c")), StatusCode::NOT_FOUND);
        assert_eq!(
            http(tonic::Status::data_loss("x")),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
