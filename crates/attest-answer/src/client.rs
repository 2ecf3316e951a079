//! How the answer tier reaches the router: in process (`Local`, in `attest dev`) or over gRPC (`Grpc`), always
//! through the `attest.v1.RouterService` proto, with the request id in the metadata.

use std::sync::Arc;

use attest_proto::v1 as pb;
use attest_proto::v1::router_service_client::RouterServiceClient;
use attest_proto::v1::router_service_server::RouterService;
use attest_telemetry::request_id::grpc_request;
use tonic::transport::Channel;
use tonic::Status;

use crate::error::AnswerError;

#[derive(Clone)]
pub enum RouterClient {
    Local(Arc<dyn RouterService>),
    Grpc(RouterServiceClient<Channel>),
}

impl RouterClient {
    /// A lazily connecting gRPC client for `http://host:port`.
    pub fn connect_lazy(endpoint: &str) -> Result<Self, AnswerError> {
        let channel = Channel::from_shared(endpoint.to_string())
            .map_err(|e| AnswerError::invalid("router", e.to_string()))?
            .connect_lazy();
        Ok(RouterClient::Grpc(RouterServiceClient::new(channel)))
    }

    pub async fn search(
        &self,
        req: pb::SearchRequest,
        request_id: &str,
    ) -> Result<pb::SearchResponse, Status> {
        match self {
            RouterClient::Local(svc) => svc.search(grpc_request(req, request_id)).await,
            RouterClient::Grpc(client) => {
                client.clone().search(grpc_request(req, request_id)).await
            }
        }
        .map(|r| r.into_inner())
    }
}
