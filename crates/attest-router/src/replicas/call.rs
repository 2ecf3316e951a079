//! One shard RPC as a value: [`ShardCall`] (the request and the request id it carries), [`ShardResponse`] (the
//! answer, same variant) and [`ShardCallService`], the `tower::Service` at the bottom of every replica stack
//! that sends a call through a [`ShardClient`]. The three are generated from one table, one row per RPC of
//! `ShardService`, so adding an RPC is one line.

use std::task::{Context, Poll};

use attest_proto::v1 as pb;
use attest_telemetry::request_id::grpc_request;
use futures::future::BoxFuture;
use tonic::Status;

use crate::client::ShardClient;

macro_rules! shard_calls {
    ($($variant:ident => $method:ident($req:ident) -> $resp:ident;)*) => {
        /// One request to a shard replica, with the request id sent in its gRPC metadata.
        #[derive(Debug, Clone)]
        pub enum ShardCall {
            $($variant { request_id: String, req: pb::$req },)*
        }

        /// The answer to a [`ShardCall`], in the variant of the same name.
        #[derive(Debug, Clone)]
        pub enum ShardResponse {
            $($variant(pb::$resp),)*
        }

        impl ShardCall {
            pub fn request_id(&self) -> &str {
                match self {
                    $(ShardCall::$variant { request_id, .. } => request_id,)*
                }
            }

            /// The RPC's name, as in metrics labels and logs.
            pub fn name(&self) -> &'static str {
                match self {
                    $(ShardCall::$variant { .. } => stringify!($method),)*
                }
            }
        }

        impl ShardResponse {
            /// The RPC's name, as in metrics labels and logs.
            pub fn name(&self) -> &'static str {
                match self {
                    $(ShardResponse::$variant(_) => stringify!($method),)*
                }
            }

            /// The response's size on the wire (protobuf encoding; what a gRPC replica sends).
            pub fn encoded_len(&self) -> usize {
                match self {
                    $(ShardResponse::$variant(r) => prost::Message::encoded_len(r),)*
                }
            }
        }

        $(
            /// Takes the typed response out; a response of another RPC is an internal error.
            impl TryFrom<ShardResponse> for pb::$resp {
                type Error = Status;
                fn try_from(response: ShardResponse) -> Result<Self, Status> {
                    match response {
                        ShardResponse::$variant(r) => Ok(r),
                        other => Err(Status::internal(format!(
                            "expected a {} response, got {}",
                            stringify!($method),
                            other.name()
                        ))),
                    }
                }
            }
        )*

        /// Sends `call` through `client`, either variant, with the request id in the metadata.
        async fn dispatch(client: ShardClient, call: ShardCall) -> Result<ShardResponse, Status> {
            match call {
                $(ShardCall::$variant { request_id, req } => {
                    let req = grpc_request(req, &request_id);
                    let response = match client {
                        ShardClient::Local(svc) => svc.$method(req).await,
                        ShardClient::Grpc(mut grpc) => grpc.$method(req).await,
                    };
                    response.map(|r| ShardResponse::$variant(r.into_inner()))
                })*
            }
        }
    };
}

shard_calls! {
    Search => search(ShardSearchRequest) -> ShardSearchResponse;
    SearchBatch => search_batch(ShardSearchBatchRequest) -> ShardSearchBatchResponse;
    Upsert => upsert(UpsertRequest) -> UpsertResponse;
    Delete => delete(DeleteRequest) -> DeleteResponse;
    EnsureShard => ensure_shard(EnsureShardRequest) -> EnsureShardResponse;
    DropShard => drop_shard(DropShardRequest) -> DropShardResponse;
    Stats => stats(ShardStatsRequest) -> ShardStatsResponse;
    Maintain => maintain(MaintainRequest) -> MaintainResponse;
    DocVersions => doc_versions(DocVersionsRequest) -> DocVersionsResponse;
    FetchDocuments => fetch_documents(FetchDocumentsRequest) -> FetchDocumentsResponse;
    FetchChunks => fetch_chunks(FetchChunksRequest) -> FetchChunksResponse;
    NearDuplicates => near_duplicates(NearDuplicatesRequest) -> NearDuplicatesResponse;
    SnapshotShard => snapshot_shard(SnapshotShardRequest) -> SnapshotShardResponse;
    StageRestore => stage_restore(StageRestoreRequest) -> StageRestoreResponse;
    DiscardRestore => discard_restore(DiscardRestoreRequest) -> DiscardRestoreResponse;
    TransferProgress => transfer_progress(TransferProgressRequest) -> TransferProgressResponse;
}

/// The innermost service of a replica stack: one [`ShardCall`] to one node, no policy of its own. Always
/// ready; a gRPC client waits for its channel inside the call, under the stack's timeout.
#[derive(Clone)]
pub struct ShardCallService {
    client: ShardClient,
}

impl ShardCallService {
    pub fn new(client: ShardClient) -> Self {
        ShardCallService { client }
    }
}

impl tower::Service<ShardCall> for ShardCallService {
    type Response = ShardResponse;
    type Error = Status;
    type Future = BoxFuture<'static, Result<ShardResponse, Status>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ShardCall) -> Self::Future {
        Box::pin(dispatch(self.client.clone(), call))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_of_another_rpc_is_an_internal_error() {
        let r = ShardResponse::Stats(pb::ShardStatsResponse::default());
        let err = pb::ShardSearchResponse::try_from(r).unwrap_err();
        assert_eq!(err.code(), tonic::Code::Internal);
        assert!(err
            .message()
            .contains("expected a search response, got stats"));
        let r = ShardResponse::Search(pb::ShardSearchResponse::default());
        assert!(pb::ShardSearchResponse::try_from(r).is_ok());
    }

    #[test]
    fn calls_name_their_rpc_and_carry_the_request_id() {
        let call = ShardCall::DocVersions {
            request_id: "req-1".into(),
            req: pb::DocVersionsRequest::default(),
        };
        assert_eq!((call.name(), call.request_id()), ("doc_versions", "req-1"));
    }
}
