//! The shard's errors in the one vocabulary of `attest_proto::error`, in one place: an engine error, or a request
//! the shard refuses, becomes an [`ApiError`] (its code, its message, and for a bad input the field it names) and
//! then a `tonic::Status` carrying all three, so the router passes the field and the message on as they are.

use attest_index::IndexError;
use attest_proto::{ApiError, ErrorCode};
use tonic::Status;

/// A storage error as the error vocabulary names it. Internal details of corrupt files stay in the logs.
pub fn api_error(e: &IndexError) -> ApiError {
    match e {
        IndexError::InvalidArgument { field, .. } => {
            ApiError::invalid(field.clone(), e.to_string())
        }
        IndexError::Corrupt { .. } => ApiError::new(ErrorCode::DataLoss, e.to_string()),
        IndexError::Format(_) => ApiError::new(ErrorCode::FailedPrecondition, e.to_string()),
        IndexError::Busy(_) => ApiError::new(ErrorCode::ResourceExhausted, e.to_string()),
        e if e.is_disk_full() => ApiError::new(ErrorCode::DiskFull, e.to_string()),
        _ => ApiError::new(ErrorCode::Internal, e.to_string()),
    }
}

/// The status a caller sees for a storage error.
pub fn to_status(e: IndexError) -> Status {
    api_error(&e).to_status()
}

/// A request the shard refuses because of `field`: `INVALID_ARGUMENT`, naming the field.
pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Status {
    to_status(IndexError::invalid(field, reason))
}

pub fn unknown_shard(collection: &str, shard: u32) -> Status {
    ApiError::new(
        ErrorCode::NotFound,
        format!("collection `{collection}` has no shard {shard} on this node"),
    )
    .to_status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_input_names_its_field_and_says_invalid_argument_once() {
        let status = invalid("filter.conditions[0].field", "empty");
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        let seen = ApiError::from_status(&status);
        assert_eq!(seen.code, ErrorCode::InvalidArgument);
        assert_eq!(seen.field.as_deref(), Some("filter.conditions[0].field"));
        assert_eq!(
            seen.message,
            "invalid argument `filter.conditions[0].field`: empty"
        );
        assert_eq!(seen.message.matches("invalid argument").count(), 1);
    }

    #[test]
    fn engine_errors_keep_their_code() {
        let corrupt = to_status(IndexError::corrupt("/x/MANIFEST.json", "crc"));
        assert_eq!(ApiError::from_status(&corrupt).code, ErrorCode::DataLoss);
        let io = to_status(IndexError::Io(std::io::Error::other("disk")));
        assert_eq!(ApiError::from_status(&io).code, ErrorCode::Internal);
        let full = to_status(IndexError::DiskFull("disk full: data directory /d".into()));
        assert_eq!(full.code(), tonic::Code::ResourceExhausted);
        assert_eq!(ApiError::from_status(&full).code, ErrorCode::DiskFull);
        let enospc = to_status(IndexError::RocksDb(
            "IO error: No space left on device: While appending to file: /d/wal/000009.log".into(),
        ));
        assert_eq!(ApiError::from_status(&enospc).code, ErrorCode::DiskFull);
        let missing = ApiError::from_status(&unknown_shard("c", 3));
        assert_eq!(missing.code, ErrorCode::NotFound);
        assert_eq!(missing.field, None);
    }
}
