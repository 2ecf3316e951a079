//! Router errors, and the one place where they become gRPC statuses and HTTP responses (through the shared
//! vocabulary of `attest_proto::error`: a shard's or meta's code keeps its meaning at the router's callers).

use attest_proto::{ApiError, ErrorCode};
use attest_telemetry::http_error::HttpError;
use axum::response::{IntoResponse, Response};

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
    /// Well formed, but not possible in this state (a collection embedded by another model than this router's).
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    Unavailable(String),
    /// A change sent to meta that it did not confirm in time: it may have been applied (504,
    /// `DEADLINE_EXCEEDED`), unlike [`RouterError::Unavailable`] (nothing done).
    #[error("{0}")]
    OutcomeUnknown(String),
    #[error("{0}")]
    Internal(String),
    /// An error another hop (a shard, meta) raised, with the code it raised it with.
    #[error("{0}")]
    Callee(ApiError),
}

impl RouterError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        RouterError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The error as it crosses the next hop.
    pub fn api(&self) -> ApiError {
        let message = self.to_string();
        match self {
            RouterError::InvalidArgument { field, .. } => ApiError::invalid(field.clone(), message),
            RouterError::NotFound(_) => ApiError::new(ErrorCode::NotFound, message),
            RouterError::AlreadyExists(_) => ApiError::new(ErrorCode::AlreadyExists, message),
            RouterError::PayloadTooLarge(_) => ApiError::new(ErrorCode::PayloadTooLarge, message),
            RouterError::FailedPrecondition(_) => {
                ApiError::new(ErrorCode::FailedPrecondition, message)
            }
            RouterError::Unavailable(_) => ApiError::new(ErrorCode::Unavailable, message),
            RouterError::OutcomeUnknown(_) => ApiError::new(ErrorCode::DeadlineExceeded, message),
            RouterError::Internal(_) => ApiError::new(ErrorCode::Internal, message),
            RouterError::Callee(e) => e.clone(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        self.api().code
    }

    /// A shard's or meta's status, seen from the router: every code keeps its meaning, and its message and field
    /// are passed on as the callee wrote them (its message already says what was invalid: wrapping it would say
    /// so twice). The exception: a call that ran out of time (tonic reports a server-side deadline as
    /// `Cancelled`) is the callee being unavailable now, something to retry, not a fault of the router.
    pub fn from_status(s: tonic::Status) -> Self {
        let e = ApiError::from_status(&s);
        match e.code {
            ErrorCode::DeadlineExceeded | ErrorCode::Cancelled => {
                RouterError::Unavailable(e.message)
            }
            _ => RouterError::Callee(e),
        }
    }

    /// The status of a change sent to meta (`MetaClient` answers `DEADLINE_EXCEEDED` for a write that may have
    /// been applied): an unknown outcome says so and how to find out; anything else as [`Self::from_status`].
    pub fn from_meta_write(s: tonic::Status) -> Self {
        match s.code() {
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => RouterError::OutcomeUnknown(
                format!(
                    "the change may have been applied: meta did not confirm it in time ({}); read the \
                     state back, or repeat the same request (creating a collection with the same spec is \
                     idempotent)",
                    s.message()
                ),
            ),
            _ => Self::from_status(s),
        }
    }
}

impl From<RouterError> for tonic::Status {
    fn from(e: RouterError) -> Self {
        e.api().to_status()
    }
}

impl IntoResponse for RouterError {
    fn into_response(self) -> Response {
        HttpError(self.api()).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    /// Every code a shard or meta can raise, through the router to both of its fronts.
    #[test]
    fn every_callee_code_keeps_its_meaning_over_http_and_grpc() {
        for code in ErrorCode::ALL {
            let mut raised = ApiError::new(code, format!("{code:?} at the shard"));
            if code == ErrorCode::InvalidArgument {
                raised.field = Some("query_vector".into());
            }
            let routed = RouterError::from_status(raised.to_status());
            let expected = match code {
                ErrorCode::DeadlineExceeded | ErrorCode::Cancelled => ErrorCode::Unavailable,
                other => other,
            };
            let grpc = ApiError::from_status(&tonic::Status::from(RouterError::from_status(
                raised.to_status(),
            )));
            assert_eq!(grpc.code, expected, "{code:?} over gRPC");
            let response = routed.into_response();
            assert_eq!(
                response.status(),
                StatusCode::from_u16(expected.http_status()).unwrap(),
                "{code:?} over HTTP"
            );
            assert_eq!(
                response.headers().contains_key("retry-after"),
                expected.retry_after_secs().is_some(),
                "{code:?}"
            );
            if code == ErrorCode::InvalidArgument {
                assert_eq!(grpc.field.as_deref(), Some("query_vector"));
            }
        }
        assert_eq!(
            RouterError::from_status(tonic::Status::failed_precondition("2 live nodes"))
                .into_response()
                .status(),
            StatusCode::BAD_REQUEST,
            "a meta precondition is not a 500"
        );
        assert_eq!(
            RouterError::from_status(tonic::Status::resource_exhausted("shed"))
                .into_response()
                .status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }

    /// A meta write that was not confirmed in time is a 504 `DEADLINE_EXCEEDED` that says it may have been
    /// applied; the same status on a read stays a 503.
    #[test]
    fn an_unconfirmed_meta_write_is_a_504_that_may_have_been_applied() {
        let status = tonic::Status::deadline_exceeded("meta did not confirm the change within 10s");
        let write = RouterError::from_meta_write(status.clone());
        assert_eq!(write.code(), ErrorCode::DeadlineExceeded);
        assert!(
            write.to_string().contains("may have been applied"),
            "{write}"
        );
        assert_eq!(
            tonic::Status::from(RouterError::from_meta_write(status.clone())).code(),
            tonic::Code::DeadlineExceeded
        );
        assert_eq!(write.into_response().status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            RouterError::from_status(status).into_response().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        let refused = RouterError::from_meta_write(tonic::Status::unavailable("no raft leader"));
        assert_eq!(refused.code(), ErrorCode::Unavailable);
    }

    /// A shard refuses a bad input with `invalid argument `FIELD`: ...` and the field in `x-attest-field`; the
    /// router's callers get the same message, once, and the same field, over gRPC and HTTP.
    #[test]
    fn a_callee_s_bad_input_keeps_its_field_and_is_not_prefixed_twice() {
        let field = "documents[0].chunks[0].vector";
        let raised = ApiError::invalid(
            field,
            format!("invalid argument `{field}`: dimension 3, expected 384"),
        );
        let routed = RouterError::from_status(raised.to_status());
        assert_eq!(routed.to_string(), raised.message);
        assert_eq!(routed.code(), ErrorCode::InvalidArgument);
        let grpc = ApiError::from_status(&tonic::Status::from(RouterError::from_status(
            raised.to_status(),
        )));
        assert_eq!(grpc, raised);
        assert_eq!(grpc.message.matches("invalid argument").count(), 1);

        let response = routed.into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), 1 << 16))
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["field"], field, "{body}");
        assert_eq!(body["error"]["message"], raised.message, "{body}");

        // A callee that names no field (meta's `invalid argument: ...`): its message, once, and no field made up.
        let bare = RouterError::from_status(tonic::Status::invalid_argument(
            "invalid argument: replication 9 is more than 5",
        ));
        assert_eq!(
            bare.to_string(),
            "invalid argument: replication 9 is more than 5"
        );
        assert_eq!(bare.api().field, None);
    }
}
