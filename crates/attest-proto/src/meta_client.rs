//! `MetaClient`: how shard nodes, routers and the CLI reach the meta group — the generated gRPC client with
//! fail-over across the meta addresses it was given. Any meta node answers (followers forward writes to the
//! leader), so a call simply moves on to the next address when one is unreachable.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::v1 as pb;
use crate::v1::meta_service_client::MetaServiceClient;

/// How long one call to one meta node may take before the next address is tried.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct MetaClient {
    /// One lazily connecting client per meta address, tried in turn starting from the last one that answered.
    clients: Vec<(String, MetaServiceClient<Channel>)>,
    preferred: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// Whether another meta node may succeed where this one failed.
fn try_next(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled | Code::Internal
    )
}

macro_rules! failover {
    ($self:ident, $method:ident, $req:expr) => {'call: {
        let n = $self.clients.len();
        let start = $self.preferred.load(std::sync::atomic::Ordering::Relaxed);
        let mut last = Status::unavailable("no meta address configured");
        for i in 0..n {
            let at = (start + i) % n;
            let mut client = $self.clients[at].1.clone();
            let mut request = tonic::Request::new($req.clone());
            request.set_timeout(CALL_TIMEOUT);
            match client.$method(request).await {
                Ok(resp) => {
                    $self.preferred.store(at, std::sync::atomic::Ordering::Relaxed);
                    break 'call Ok(resp.into_inner());
                }
                Err(status) if try_next(&status) => last = status,
                Err(status) => break 'call Err(status),
            }
        }
        Err(last)
    }};
}

impl MetaClient {
    /// Clients for comma-separated or listed addresses (`http://host:port`); nothing connects until a call.
    pub fn new<S: AsRef<str>>(addresses: &[S]) -> Result<Self, Status> {
        let mut clients = Vec::new();
        for a in addresses {
            let a = a.as_ref().trim();
            if a.is_empty() {
                continue;
            }
            let url = if a.contains("://") {
                a.to_string()
            } else {
                format!("http://{a}")
            };
            let channel = Endpoint::from_shared(url.clone())
                .map_err(|e| Status::invalid_argument(format!("meta address `{a}`: {e}")))?
                .connect_timeout(Duration::from_secs(2))
                .connect_lazy();
            clients.push((url, MetaServiceClient::new(channel)));
        }
        if clients.is_empty() {
            return Err(Status::invalid_argument("no meta address given"));
        }
        Ok(MetaClient {
            clients,
            preferred: Default::default(),
        })
    }

    pub fn addresses(&self) -> Vec<String> {
        self.clients.iter().map(|(a, _)| a.clone()).collect()
    }

    pub async fn cluster_state(&self, linearizable: bool) -> Result<pb::ClusterState, Status> {
        failover!(self, get_cluster_state, pb::GetClusterStateRequest { linearizable })
    }
    pub async fn register_node(&self, req: pb::RegisterNodeRequest) -> Result<pb::NodeInfo, Status> {
        let resp: pb::RegisterNodeResponse = failover!(self, register_node, req)?;
        resp.node
            .ok_or_else(|| Status::internal("meta registered the node but returned no node"))
    }
    pub async fn heartbeat(&self, req: pb::HeartbeatRequest) -> Result<pb::HeartbeatResponse, Status> {
        failover!(self, heartbeat, req)
    }
    pub async fn create_collection(
        &self,
        req: pb::MetaCreateCollectionRequest,
    ) -> Result<pb::CollectionMeta, Status> {
        failover!(self, create_collection, req)
    }
    pub async fn drop_collection(&self, name: &str) -> Result<bool, Status> {
        let req = pb::MetaDropCollectionRequest {
            name: name.to_string(),
        };
        let resp: pb::MetaDropCollectionResponse = failover!(self, drop_collection, req)?;
        Ok(resp.dropped)
    }
    pub async fn replica_caught_up(
        &self,
        req: pb::ReplicaCaughtUpRequest,
    ) -> Result<pb::CollectionMeta, Status> {
        failover!(self, replica_caught_up, req)
    }
    pub async fn rebalance(&self, dry_run: bool) -> Result<pb::RebalanceResponse, Status> {
        failover!(self, rebalance, pb::RebalanceRequest { dry_run })
    }
    pub async fn status(&self) -> Result<pb::MetaStatus, Status> {
        failover!(self, status, pb::MetaStatusRequest {})
    }
    /// The status of every listed meta node that answers (for `attest status`): (address, status or error).
    pub async fn status_of_each(&self) -> Vec<(String, Result<pb::MetaStatus, Status>)> {
        let mut out = Vec::new();
        for (addr, client) in &self.clients {
            let mut request = tonic::Request::new(pb::MetaStatusRequest {});
            request.set_timeout(Duration::from_secs(2));
            let r = client.clone().status(request).await.map(|r| r.into_inner());
            out.push((addr.clone(), r));
        }
        out
    }
}
