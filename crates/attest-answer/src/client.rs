//! How the answer tier reaches the router: in process (`Local`, in `attest dev`) or over gRPC (`Grpc`), always
//! through the `attest.v1.RouterService` proto, with the request id in the metadata and, for every search made
//! for a caller, the caller's tenant and credential ([`Caller`]): the router checks the same key again and its
//! shards filter by that tenant, so nothing the answer tier reads for a turn is another tenant's text.

use std::sync::Arc;

use attest_auth::Principal;
use attest_proto::v1 as pb;
use attest_proto::v1::router_service_client::RouterServiceClient;
use attest_proto::v1::router_service_server::RouterService;
use attest_telemetry::request_id::grpc_request;
use tonic::transport::Channel;
use tonic::Status;

use crate::error::AnswerError;

/// Who a turn is for: the tenant its key resolved to (empty: the router's default) and the `Authorization`
/// value to forward (none when authentication is off).
#[derive(Clone, Default)]
pub struct Caller {
    pub tenant: String,
    pub credential: Option<String>,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl Caller {
    /// The caller an authenticated request stands for: its collection must be a collection name (INVALID_ARGUMENT
    /// `name` otherwise, even for a question answered without retrieval) and one the key lists, its tenant one
    /// the key allows (PERMISSION_DENIED otherwise, before anything is read).
    pub fn of(
        principal: &Principal,
        collection: &str,
        tenant: Option<&str>,
    ) -> Result<Caller, AnswerError> {
        if let Some(problem) = attest_core::limits::collection_name_problem(collection) {
            return Err(AnswerError::invalid("name", problem));
        }
        principal
            .collection(collection)
            .map_err(AnswerError::Callee)?;
        let tenant = principal.tenant(tenant, "").map_err(AnswerError::Callee)?;
        Ok(Caller {
            tenant,
            credential: principal.credential().map(str::to_string),
        })
    }
}

#[derive(Clone)]
pub enum RouterClient {
    Local(Arc<dyn RouterService>),
    Grpc(RouterServiceClient<Channel>),
}

impl RouterClient {
    /// A lazily connecting gRPC client for `http://host:port`, over TLS trusting `tls`'s CA when given.
    pub fn connect_lazy(
        endpoint: &str,
        tls: Option<&attest_proto::tls::ClientTls>,
    ) -> Result<Self, AnswerError> {
        let channel = attest_proto::tls::channel(endpoint, tls, std::time::Duration::from_secs(5))
            .map_err(|e| AnswerError::invalid("router", e.to_string()))?;
        Ok(RouterClient::Grpc(RouterServiceClient::new(channel)))
    }

    /// A search made for `caller`: the request acts as the caller's tenant, with the caller's credential.
    pub async fn search(
        &self,
        mut req: pb::SearchRequest,
        request_id: &str,
        caller: &Caller,
    ) -> Result<pb::SearchResponse, Status> {
        req.tenant = caller.tenant.clone();
        let mut request = grpc_request(req, request_id);
        attest_auth::grpc::forward(caller.credential.as_deref(), &mut request);
        match self {
            RouterClient::Local(svc) => svc.search(request).await,
            RouterClient::Grpc(client) => client.clone().search(request).await,
        }
        .map(|r| r.into_inner())
    }

    /// Several searches made for `caller` in one call (one round trip per shard behind the router); answers in
    /// request order.
    pub async fn search_batch(
        &self,
        mut searches: Vec<pb::SearchRequest>,
        request_id: &str,
        caller: &Caller,
    ) -> Result<Vec<pb::SearchResponse>, Status> {
        for req in &mut searches {
            req.tenant = caller.tenant.clone();
        }
        let wanted = searches.len();
        let mut request = grpc_request(pb::SearchBatchRequest { searches }, request_id);
        attest_auth::grpc::forward(caller.credential.as_deref(), &mut request);
        let results = match self {
            RouterClient::Local(svc) => svc.search_batch(request).await,
            RouterClient::Grpc(client) => client.clone().search_batch(request).await,
        }?
        .into_inner()
        .results;
        if results.len() != wanted {
            return Err(Status::internal(format!(
                "the router answered {} of {wanted} searches",
                results.len()
            )));
        }
        Ok(results)
    }
}
