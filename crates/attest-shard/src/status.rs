//! Engine errors → gRPC status codes, in one place.

use attest_index::IndexError;
use tonic::{Code, Status};

/// Maps a storage error to the status a caller sees. Internal details of corrupt files stay in the logs.
pub fn to_status(e: IndexError) -> Status {
    match e {
        IndexError::InvalidArgument { field, reason } => {
            let mut s = Status::new(
                Code::InvalidArgument,
                format!("invalid argument `{field}`: {reason}"),
            );
            s.metadata_mut().insert(
                "x-attest-field",
                field
                    .parse()
                    .unwrap_or_else(|_| "unknown".parse().expect("ascii")),
            );
            s
        }
        IndexError::Corrupt { .. } => Status::data_loss(e.to_string()),
        other => Status::internal(other.to_string()),
    }
}

pub fn unknown_shard(collection: &str, shard: u32) -> Status {
    Status::not_found(format!(
        "collection `{collection}` has no shard {shard} on this node"
    ))
}
