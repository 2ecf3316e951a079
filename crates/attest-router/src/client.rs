//! How the router reaches a shard node: in process (`Local`) or over gRPC (`Grpc`). The fan-out, merge and
//! ingest code is written once against this enum, so it runs the same in `attest dev` and in a cluster.

use std::sync::Arc;

use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_client::ShardServiceClient;
use attest_proto::v1::shard_service_server::ShardService;
use tonic::transport::Channel;
use tonic::{Request, Status};

/// Largest gRPC message exchanged with a shard (an upsert batch with its vectors).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Clone)]
pub enum ShardClient {
    Local(Arc<dyn ShardService>),
    Grpc(ShardServiceClient<Channel>),
}

/// Calls the same method on either variant.
macro_rules! call {
    ($self:ident, $method:ident, $req:expr) => {
        match $self {
            ShardClient::Local(svc) => svc
                .$method(Request::new($req))
                .await
                .map(|r| r.into_inner()),
            ShardClient::Grpc(client) => client
                .clone()
                .$method(Request::new($req))
                .await
                .map(|r| r.into_inner()),
        }
    };
}

impl ShardClient {
    /// A lazily connecting gRPC client for `http://host:port`.
    pub fn connect_lazy(endpoint: &str) -> Result<Self, crate::error::RouterError> {
        let channel = Channel::from_shared(endpoint.to_string())
            .map_err(|e| crate::error::RouterError::invalid("endpoint", e.to_string()))?
            .connect_lazy();
        Ok(ShardClient::Grpc(
            ShardServiceClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        ))
    }

    pub async fn ensure_shard(
        &self,
        req: pb::EnsureShardRequest,
    ) -> Result<pb::EnsureShardResponse, Status> {
        call!(self, ensure_shard, req)
    }
    pub async fn drop_shard(
        &self,
        req: pb::DropShardRequest,
    ) -> Result<pb::DropShardResponse, Status> {
        call!(self, drop_shard, req)
    }
    pub async fn upsert(&self, req: pb::UpsertRequest) -> Result<pb::UpsertResponse, Status> {
        call!(self, upsert, req)
    }
    pub async fn delete(&self, req: pb::DeleteRequest) -> Result<pb::DeleteResponse, Status> {
        call!(self, delete, req)
    }
    pub async fn search(
        &self,
        req: pb::ShardSearchRequest,
    ) -> Result<pb::ShardSearchResponse, Status> {
        call!(self, search, req)
    }
    pub async fn stats(
        &self,
        req: pb::ShardStatsRequest,
    ) -> Result<pb::ShardStatsResponse, Status> {
        call!(self, stats, req)
    }
    pub async fn maintain(&self, req: pb::MaintainRequest) -> Result<pb::MaintainResponse, Status> {
        call!(self, maintain, req)
    }
}
