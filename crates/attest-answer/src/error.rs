//! Errors of the answer tier and their gRPC and HTTP forms, through the shared vocabulary of
//! `attest_proto::error` (`{error: {code, message, field?}}`, SPEC "HTTP API v1"): a router's (or a shard's)
//! code keeps its meaning and its field at the answer tier's callers.

use attest_proto::{ApiError, ErrorCode};
use attest_telemetry::http_error::HttpError;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("{0}")]
    NotFound(String),
    #[error("router unavailable: {0}")]
    Unavailable(String),
    /// An error the router (or a hop behind it) raised, with the code it raised it with.
    #[error("{0}")]
    Callee(ApiError),
}

impl AnswerError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        AnswerError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// A router status, kept as the same kind of error with the field the router named.
    pub fn from_status(status: tonic::Status) -> Self {
        AnswerError::Callee(ApiError::from_status(&status))
    }

    /// The error as it crosses the next hop.
    pub fn api(&self) -> ApiError {
        let message = self.to_string();
        match self {
            AnswerError::InvalidArgument { field, .. } => ApiError::invalid(field.clone(), message),
            AnswerError::NotFound(_) => ApiError::new(ErrorCode::NotFound, message),
            AnswerError::Unavailable(_) => ApiError::new(ErrorCode::Unavailable, message),
            AnswerError::Callee(e) => e.clone(),
        }
    }
}

impl From<AnswerError> for tonic::Status {
    fn from(e: AnswerError) -> Self {
        e.api().to_status()
    }
}

impl IntoResponse for AnswerError {
    fn into_response(self) -> Response {
        HttpError(self.api()).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_error_keeps_its_code_and_field() {
        let from_router = ApiError::invalid("k", "must be between 1 and 100");
        let e = AnswerError::from_status(from_router.to_status());
        assert_eq!(e.api(), from_router);
        let shed = AnswerError::from_status(tonic::Status::resource_exhausted("busy"));
        assert_eq!(shed.into_response().status().as_u16(), 429);
        let missing = AnswerError::from_status(tonic::Status::not_found("no collection"));
        assert_eq!(missing.into_response().status().as_u16(), 404);
    }
}
