//! How the router reaches a shard node: in process (`Local`) or over gRPC (`Grpc`). The fan-out, merge and
//! ingest code is written once against this enum, so it runs the same in `attest dev` and in a cluster.

use std::sync::Arc;

use attest_proto::credential::{ClusterCredential, Stamped};
use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use attest_proto::v1::shard_service_server::ShardService;
use attest_telemetry::request_id::grpc_request;
use tonic::Status;

use attest_proto::MAX_MESSAGE_BYTES;

#[derive(Clone)]
pub enum ShardClient {
    Local(Arc<dyn ShardService>),
    /// Every request carries the cluster credential (shard nodes accept nothing else once it is configured).
    Grpc(ShardServiceClient<Stamped>),
}

/// Calls the same method on either variant, with the request id in the gRPC metadata (both variants, so the
/// shard logs it the same way in and out of process).
macro_rules! call {
    ($self:ident, $method:ident, $req:expr, $request_id:expr) => {
        match $self {
            ShardClient::Local(svc) => svc
                .$method(grpc_request($req, $request_id))
                .await
                .map(|r| r.into_inner()),
            ShardClient::Grpc(client) => client
                .clone()
                .$method(grpc_request($req, $request_id))
                .await
                .map(|r| r.into_inner()),
        }
    };
}

impl ShardClient {
    /// A lazily connecting gRPC client for `http://host:port`, presenting `credential`.
    pub fn connect_lazy(
        endpoint: &str,
        credential: ClusterCredential,
    ) -> Result<Self, crate::error::RouterError> {
        // The connect timeout of tonic's own connector (none); calls carry their own deadlines.
        let channel = credential
            .channel(endpoint, std::time::Duration::from_secs(5))
            .map_err(|e| crate::error::RouterError::invalid("endpoint", e.to_string()))?;
        Ok(ShardClient::Grpc(
            ShardServiceClient::with_interceptor(channel, credential)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        ))
    }

    pub async fn ensure_shard(
        &self,
        req: pb::EnsureShardRequest,
        request_id: &str,
    ) -> Result<pb::EnsureShardResponse, Status> {
        call!(self, ensure_shard, req, request_id)
    }
    pub async fn drop_shard(
        &self,
        req: pb::DropShardRequest,
        request_id: &str,
    ) -> Result<pb::DropShardResponse, Status> {
        call!(self, drop_shard, req, request_id)
    }
    pub async fn upsert(
        &self,
        req: pb::UpsertRequest,
        request_id: &str,
    ) -> Result<pb::UpsertResponse, Status> {
        call!(self, upsert, req, request_id)
    }
    pub async fn delete(
        &self,
        req: pb::DeleteRequest,
        request_id: &str,
    ) -> Result<pb::DeleteResponse, Status> {
        call!(self, delete, req, request_id)
    }
    pub async fn search(
        &self,
        req: pb::ShardSearchRequest,
        request_id: &str,
    ) -> Result<pb::ShardSearchResponse, Status> {
        call!(self, search, req, request_id)
    }
    pub async fn stats(
        &self,
        req: pb::ShardStatsRequest,
        request_id: &str,
    ) -> Result<pb::ShardStatsResponse, Status> {
        call!(self, stats, req, request_id)
    }
    pub async fn maintain(
        &self,
        req: pb::MaintainRequest,
        request_id: &str,
    ) -> Result<pb::MaintainResponse, Status> {
        call!(self, maintain, req, request_id)
    }
}
