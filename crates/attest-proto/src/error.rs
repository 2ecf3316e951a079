//! One error vocabulary for every role: [`ErrorCode`], its gRPC code and HTTP status, and [`ApiError`], what
//! crosses a hop. A code keeps its meaning from the shard or meta that raised it to the HTTP caller: over gRPC
//! the code travels as the status code plus `x-attest-code` metadata (which tells a payload that is too large
//! from a node that sheds load, both `RESOURCE_EXHAUSTED` in gRPC) and the offending field as `x-attest-field`.
//! Over HTTP every role answers `{"error": {"code": "NOT_FOUND", "message": "...", "field": "..."}}` (rendered
//! by `attest_telemetry::http_error`).

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// What went wrong, as every role names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgument,
    /// The request is well formed but the system is not in a state to do it (e.g. fewer live nodes than the
    /// replication asked for).
    FailedPrecondition,
    OutOfRange,
    Unauthenticated,
    PermissionDenied,
    NotFound,
    AlreadyExists,
    Aborted,
    /// The request itself is over a size limit (HTTP 413).
    PayloadTooLarge,
    /// A node sheds load or a concurrency limit is reached: retry later (HTTP 429 with `Retry-After`).
    ResourceExhausted,
    /// A node's data directory is below its free-space reserve (`disk.min_free_bytes`): writes are refused until
    /// space returns, reads go on (HTTP 507 Insufficient Storage; gRPC `RESOURCE_EXHAUSTED` + `x-attest-code`).
    DiskFull,
    Unavailable,
    DeadlineExceeded,
    Cancelled,
    Unimplemented,
    DataLoss,
    Internal,
    Unknown,
}

impl ErrorCode {
    /// Every code, for table tests.
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::InvalidArgument,
        ErrorCode::FailedPrecondition,
        ErrorCode::OutOfRange,
        ErrorCode::Unauthenticated,
        ErrorCode::PermissionDenied,
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::Aborted,
        ErrorCode::PayloadTooLarge,
        ErrorCode::ResourceExhausted,
        ErrorCode::DiskFull,
        ErrorCode::Unavailable,
        ErrorCode::DeadlineExceeded,
        ErrorCode::Cancelled,
        ErrorCode::Unimplemented,
        ErrorCode::DataLoss,
        ErrorCode::Internal,
        ErrorCode::Unknown,
    ];

    /// The name in HTTP bodies and `x-attest-code` (gRPC's spelling, plus `PAYLOAD_TOO_LARGE` and `DISK_FULL`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::FailedPrecondition => "FAILED_PRECONDITION",
            ErrorCode::OutOfRange => "OUT_OF_RANGE",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorCode::DiskFull => "DISK_FULL",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::Unimplemented => "UNIMPLEMENTED",
            ErrorCode::DataLoss => "DATA_LOSS",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::Unknown => "UNKNOWN",
        }
    }

    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == name)
    }

    pub fn grpc(self) -> Code {
        match self {
            ErrorCode::InvalidArgument => Code::InvalidArgument,
            ErrorCode::FailedPrecondition => Code::FailedPrecondition,
            ErrorCode::OutOfRange => Code::OutOfRange,
            ErrorCode::Unauthenticated => Code::Unauthenticated,
            ErrorCode::PermissionDenied => Code::PermissionDenied,
            ErrorCode::NotFound => Code::NotFound,
            ErrorCode::AlreadyExists => Code::AlreadyExists,
            ErrorCode::Aborted => Code::Aborted,
            ErrorCode::PayloadTooLarge | ErrorCode::ResourceExhausted | ErrorCode::DiskFull => {
                Code::ResourceExhausted
            }
            ErrorCode::Unavailable => Code::Unavailable,
            ErrorCode::DeadlineExceeded => Code::DeadlineExceeded,
            ErrorCode::Cancelled => Code::Cancelled,
            ErrorCode::Unimplemented => Code::Unimplemented,
            ErrorCode::DataLoss => Code::DataLoss,
            ErrorCode::Internal => Code::Internal,
            ErrorCode::Unknown => Code::Unknown,
        }
    }

    /// A gRPC code seen without `x-attest-code` (a peer that is not Attest, or tonic's own transport errors).
    pub fn from_grpc(code: Code) -> ErrorCode {
        match code {
            Code::InvalidArgument => ErrorCode::InvalidArgument,
            Code::FailedPrecondition => ErrorCode::FailedPrecondition,
            Code::OutOfRange => ErrorCode::OutOfRange,
            Code::Unauthenticated => ErrorCode::Unauthenticated,
            Code::PermissionDenied => ErrorCode::PermissionDenied,
            Code::NotFound => ErrorCode::NotFound,
            Code::AlreadyExists => ErrorCode::AlreadyExists,
            Code::Aborted => ErrorCode::Aborted,
            Code::ResourceExhausted => ErrorCode::ResourceExhausted,
            Code::Unavailable => ErrorCode::Unavailable,
            Code::DeadlineExceeded => ErrorCode::DeadlineExceeded,
            Code::Cancelled => ErrorCode::Cancelled,
            Code::Unimplemented => ErrorCode::Unimplemented,
            Code::DataLoss => ErrorCode::DataLoss,
            Code::Internal => ErrorCode::Internal,
            Code::Unknown | Code::Ok => ErrorCode::Unknown,
        }
    }

    /// The HTTP status of SPEC's API v1.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::FailedPrecondition | ErrorCode::OutOfRange => {
                400
            }
            ErrorCode::Unauthenticated => 401,
            ErrorCode::PermissionDenied => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::AlreadyExists | ErrorCode::Aborted => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::ResourceExhausted => 429,
            ErrorCode::DiskFull => 507,
            ErrorCode::Unimplemented => 501,
            ErrorCode::Unavailable | ErrorCode::Cancelled => 503,
            ErrorCode::DeadlineExceeded => 504,
            ErrorCode::DataLoss | ErrorCode::Internal | ErrorCode::Unknown => 500,
        }
    }

    /// The code of an HTTP error status nothing else explains (a framework's own refusal).
    pub fn from_http_fallback(status: u16) -> ErrorCode {
        match status {
            401 => ErrorCode::Unauthenticated,
            403 => ErrorCode::PermissionDenied,
            404 => ErrorCode::NotFound,
            409 => ErrorCode::AlreadyExists,
            413 => ErrorCode::PayloadTooLarge,
            429 => ErrorCode::ResourceExhausted,
            507 => ErrorCode::DiskFull,
            503 => ErrorCode::Unavailable,
            504 => ErrorCode::DeadlineExceeded,
            400..=499 => ErrorCode::InvalidArgument,
            _ => ErrorCode::Internal,
        }
    }

    /// Seconds a caller should wait before retrying (the HTTP `Retry-After` header), for load that was shed.
    pub fn retry_after_secs(self) -> Option<u32> {
        match self {
            ErrorCode::ResourceExhausted | ErrorCode::Unavailable => Some(1),
            _ => None,
        }
    }
}

/// An error as it crosses a hop: its code, a message for people and, for invalid arguments, the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            code: ErrorCode::InvalidArgument,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// The gRPC form: the code, the message, and `x-attest-code` / `x-attest-field` metadata.
    pub fn to_status(&self) -> Status {
        let mut status = Status::new(self.code.grpc(), self.message.clone());
        status.metadata_mut().insert(
            "x-attest-code",
            MetadataValue::from_static(self.code.as_str()),
        );
        if let Some(field) = &self.field {
            if let Ok(v) = field.parse() {
                status.metadata_mut().insert("x-attest-field", v);
            }
        }
        status
    }

    /// A status from another hop, with the meaning it was raised with.
    pub fn from_status(status: &Status) -> Self {
        let header = |name: &str| {
            status
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let code = header("x-attest-code")
            .and_then(|c| ErrorCode::parse(&c))
            .filter(|c| c.grpc() == status.code())
            .unwrap_or_else(|| ErrorCode::from_grpc(status.code()));
        ApiError {
            code,
            message: status.message().to_string(),
            field: header("x-attest-field"),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_survives_a_grpc_hop_with_its_field() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let mut e = ApiError::new(code, format!("{code:?} happened"));
            e.field = Some("documents[3].text".into());
            let back = ApiError::from_status(&e.to_status());
            assert_eq!(back, e, "{code:?}");
        }
    }

    #[test]
    fn a_bare_grpc_code_keeps_its_meaning() {
        assert_eq!(
            ApiError::from_status(&Status::failed_precondition("2 live nodes")).code,
            ErrorCode::FailedPrecondition
        );
        assert_eq!(
            ApiError::from_status(&Status::resource_exhausted("shed")).code,
            ErrorCode::ResourceExhausted
        );
        assert_eq!(ErrorCode::FailedPrecondition.http_status(), 400);
        assert_eq!(ErrorCode::ResourceExhausted.http_status(), 429);
        assert_eq!(ErrorCode::PayloadTooLarge.http_status(), 413);
        assert_eq!(ErrorCode::DataLoss.http_status(), 500);
    }
}
