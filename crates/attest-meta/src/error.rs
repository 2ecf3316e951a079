//! The errors of the meta role, and their one mapping to `tonic::Status`.
//!
//! Everything the crate can fail with is a [`MetaError`]; the gRPC layer converts it with `Status::from`, so
//! the status code a caller sees for a given failure is decided here and nowhere else.

use std::time::Duration;

use tonic::{Code, Status};

/// Why a state-machine command was refused. These are deterministic: every replica applying the same entry
/// refuses it the same way, and the state is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
}

/// Every failure of the meta role.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The command was applied and refused by the state machine.
    #[error(transparent)]
    State(#[from] StateError),
    /// A request the service refuses before proposing anything.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No leader is known (or reachable) within the deadline.
    #[error("no raft leader")]
    NoLeader,
    /// This node is not the leader; the caller re-routes. Internal: never leaves the service.
    #[error("not the raft leader (leader is {leader_id})")]
    NotLeader { leader_id: u64 },
    /// The proposal or read did not complete in time: in a minority partition it never can. A proposal may
    /// still be committed later (its outcome is unknown).
    #[error("not committed within {0:?} (no quorum reachable?); a change may still be applied")]
    Timeout(Duration),
    /// Raft dropped the proposal (leadership changed, a conf change already in progress, ...).
    #[error("proposal dropped: {0}")]
    Dropped(String),
    /// A peer meta node could not be reached (forwarding).
    #[error("meta peer unreachable: {0}")]
    Unreachable(String),
    /// The node is shutting down.
    #[error("meta node is shutting down")]
    Shutdown,
    /// The Raft loop's inbox is full (see `crate::inbox`): retry.
    #[error("meta node is busy (raft inbox full)")]
    InboxFull,
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// The store's RocksDB directory did not open (with what a directory of a newer format means).
    #[error("rocksdb: {0}")]
    Open(String),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// A stored or received value that does not decode.
    #[error("codec: {0}")]
    Codec(String),
    /// The data directory is below its free-space reserve (`attest_core::disk`): the write is refused, reads
    /// go on.
    #[error("{0}")]
    DiskFull(String),
}

impl From<bincode::Error> for MetaError {
    fn from(e: bincode::Error) -> Self {
        MetaError::Codec(e.to_string())
    }
}

impl From<protobuf::ProtobufError> for MetaError {
    fn from(e: protobuf::ProtobufError) -> Self {
        MetaError::Codec(e.to_string())
    }
}

impl From<MetaError> for Status {
    fn from(e: MetaError) -> Self {
        if let MetaError::DiskFull(message) = &e {
            // `RESOURCE_EXHAUSTED` with `x-attest-code: DISK_FULL`: HTTP 507 at the router, not a shed load.
            return attest_proto::ApiError::new(attest_proto::ErrorCode::DiskFull, message.clone())
                .to_status();
        }
        let code = match &e {
            MetaError::State(StateError::InvalidArgument(_)) | MetaError::InvalidArgument(_) => {
                Code::InvalidArgument
            }
            MetaError::State(StateError::NotFound(_)) => Code::NotFound,
            MetaError::State(StateError::AlreadyExists(_)) => Code::AlreadyExists,
            MetaError::State(StateError::FailedPrecondition(_)) => Code::FailedPrecondition,
            // Proposed (or read) and not confirmed in time: a write may still be committed, so it is not
            // "unavailable" (nothing done) but gRPC's "may have completed"; clients retry it too.
            MetaError::Timeout(_) => Code::DeadlineExceeded,
            // Everything a client should retry (possibly against another meta node).
            MetaError::NoLeader
            | MetaError::NotLeader { .. }
            | MetaError::Dropped(_)
            | MetaError::Unreachable(_)
            | MetaError::Shutdown
            | MetaError::InboxFull => Code::Unavailable,
            MetaError::Rocks(_)
            | MetaError::Open(_)
            | MetaError::Raft(_)
            | MetaError::Codec(_)
            | MetaError::DiskFull(_) => Code::Internal,
        };
        Status::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_failure_kind() {
        let s = Status::from(MetaError::from(StateError::AlreadyExists("c".into())));
        assert_eq!(s.code(), Code::AlreadyExists);
        let s = Status::from(MetaError::NoLeader);
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(s.message(), "no raft leader");
        let s = Status::from(MetaError::Timeout(Duration::from_secs(3)));
        assert_eq!(s.code(), Code::DeadlineExceeded);
        let s = Status::from(MetaError::State(StateError::FailedPrecondition("x".into())));
        assert_eq!(s.code(), Code::FailedPrecondition);
    }
}
