//! gRPC protocol of Attest (package `attest.v1`), compiled once here for every role.
//!
//! - `shard.proto`: the shard service (ensure/drop shard, upsert, delete, search, stats, maintain).
//! - `router.proto`: the router service (collections, ingest, search) for internal callers.
//! - `meta.proto`: the meta service (Raft transport, nodes, collections and shard map, keys, status).
//! - `answer.proto`: the answer tier (ask, streamed).
//! - `common.proto`: collection spec, index parameters and metadata filters.
//!
//! [`credential`] is what nodes present to each other's internal services; [`tls`] the client side of TLS.
//! [`error`] is the one error vocabulary of every role ([`ErrorCode`], its gRPC and HTTP forms).

#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("attest.v1");
}

/// Largest gRPC message any role sends or accepts (a cluster state of many collections, a page of documents).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

pub mod credential;
pub mod error;
pub mod meta_client;
pub mod state_delta;
pub mod state_follow;
pub mod tls;

pub use credential::ClusterCredential;
pub use error::{ApiError, ErrorCode};
pub use meta_client::MetaClient;
pub use state_follow::{FollowMode, StateFollower};
pub use v1::*;
