//! Errors of the answer tier, their HTTP form (`{error: {code, message, field?}}`, SPEC "HTTP API v1") and
//! their gRPC status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("{0}")]
    NotFound(String),
    #[error("router unavailable: {0}")]
    Unavailable(String),
}

impl AnswerError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        AnswerError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// A router status, kept as the same kind of error.
    pub fn from_status(status: tonic::Status) -> Self {
        match status.code() {
            tonic::Code::InvalidArgument => AnswerError::invalid("question", status.message()),
            tonic::Code::NotFound => AnswerError::NotFound(status.message().to_string()),
            _ => AnswerError::Unavailable(status.message().to_string()),
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            AnswerError::InvalidArgument { .. } => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            AnswerError::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            AnswerError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
        }
    }
}

/// The one place answer-tier errors become gRPC statuses.
impl From<AnswerError> for tonic::Status {
    fn from(e: AnswerError) -> Self {
        let message = e.to_string();
        match e {
            AnswerError::InvalidArgument { .. } => tonic::Status::invalid_argument(message),
            AnswerError::NotFound(_) => tonic::Status::not_found(message),
            AnswerError::Unavailable(_) => tonic::Status::unavailable(message),
        }
    }
}

impl IntoResponse for AnswerError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let mut body = json!({"error": {"code": code, "message": self.to_string()}});
        if let AnswerError::InvalidArgument { field, .. } = &self {
            body["error"]["field"] = json!(field);
        }
        (status, axum::Json(body)).into_response()
    }
}
