//! The service's handle on the local Raft node: propose and wait for apply, ReadIndex, find the leader,
//! forward a request to it, and compute liveness from heartbeats.
//!
//! Writes run on the leader. A follower forwards the request over gRPC to the leader's address (from the
//! replicated voter map), marking it with its own id (`x-attest-meta-from`, checked against the [`Filter`]
//! on arrival, like Raft traffic) and a hop count (`x-attest-meta-hops`, at most [`MAX_HOPS`], so two nodes
//! with stale views cannot bounce a request forever). With no leader known, it retries until the write
//! deadline and then answers `Unavailable("no raft leader")`. A proposal that cannot commit (minority
//! partition) times out at the same deadline, also `Unavailable`: never a false success.
//!
//! [`Filter`]: crate::transport::Filter

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use attest_proto::credential::{ClusterCredential, Stamped};
use attest_proto::v1 as pb;
use parking_lot::Mutex;
use pb::meta_service_client::MetaServiceClient;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status};

use crate::error::MetaError;
use crate::inbox::Inbox;
use crate::node::{Input, Shared};
use crate::state::{Command, Output};
use attest_proto::meta_client::meta_service_client as meta_client;

/// Metadata key naming the meta node that forwarded a request.
pub const FROM_HEADER: &str = "x-attest-meta-from";
/// Metadata key counting how many times a request was forwarded.
pub const HOPS_HEADER: &str = "x-attest-meta-hops";
/// Forwards allowed per request.
pub const MAX_HOPS: u32 = 2;

const POLL: Duration = Duration::from_millis(50);

/// Milliseconds since the epoch (heartbeat times, `created_ms`).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where a request is served.
pub(crate) enum Route {
    Local,
    /// Boxed: a client with its credential is large beside `Local`.
    Forward(Box<MetaServiceClient<Stamped>>),
}

/// Shared by every RPC handler of one node.
pub(crate) struct Core {
    pub shared: Arc<Shared>,
    pub inbox: Inbox,
    pub write_timeout: Duration,
    pub node_timeout: Duration,
    /// Leader-only soft state: last heartbeat (ms since epoch) per data-plane node.
    pub heartbeats: Mutex<HashMap<u64, u64>>,
    /// gRPC clients of the other meta nodes, by address.
    clients: Mutex<HashMap<String, MetaServiceClient<Stamped>>>,
    /// What this node presents to the others (forwarded writes).
    credential: ClusterCredential,
    /// The free-space reserve of the data directory: a proposal is refused below it (reads go on).
    disk: Option<Arc<attest_telemetry::disk::DiskGuard>>,
}

impl Core {
    pub fn new(
        shared: Arc<Shared>,
        inbox: Inbox,
        write_timeout: Duration,
        node_timeout: Duration,
        credential: ClusterCredential,
    ) -> Self {
        Core {
            shared,
            inbox,
            write_timeout,
            node_timeout,
            heartbeats: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
            credential,
            disk: None,
        }
    }

    /// Refuses proposals while `guard`'s data directory is below its reserve.
    pub fn with_disk(mut self, guard: Arc<attest_telemetry::disk::DiskGuard>) -> Self {
        self.disk = Some(guard);
        self
    }

    /// Hands `input` to the Raft loop; [`MetaError::InboxFull`] when its inbox is full (see [`crate::inbox`]).
    pub fn send(&self, input: Input) -> Result<(), MetaError> {
        self.inbox.send(input)
    }

    /// Proposes a command and waits until it is applied (its result) or the deadline passes.
    pub async fn propose(&self, cmd: Command, deadline: Instant) -> Result<Output, MetaError> {
        if let Some(disk) = &self.disk {
            disk.check_write()
                .map_err(|e| MetaError::DiskFull(e.to_string()))?;
        }
        let (reply, rx) = oneshot::channel();
        self.send(Input::Propose { cmd, reply })?;
        self.wait(rx, deadline).await
    }

    /// Proposes a conf change and waits until it is applied.
    pub async fn propose_conf_change(
        &self,
        change: raft::prelude::ConfChange,
        deadline: Instant,
    ) -> Result<(), MetaError> {
        let (reply, rx) = oneshot::channel();
        self.send(Input::ConfChange { change, reply })?;
        self.wait(rx, deadline).await
    }

    /// A ReadIndex round: returns once the local state machine reflects everything committed before the
    /// call (linearizable read). Leader only.
    pub async fn read_index(&self, deadline: Instant) -> Result<u64, MetaError> {
        let (reply, rx) = oneshot::channel();
        self.send(Input::ReadIndex { reply })?;
        self.wait(rx, deadline).await
    }

    async fn wait<T>(
        &self,
        rx: oneshot::Receiver<Result<T, MetaError>>,
        deadline: Instant,
    ) -> Result<T, MetaError> {
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(MetaError::Shutdown),
            Err(_) => Err(MetaError::Timeout(self.write_timeout)),
        }
    }

    /// The leader's id and address as this node sees them (`None`: no leader, or this node).
    pub fn remote_leader(&self) -> Option<(u64, String)> {
        let leader = self.shared.status.read().leader_id;
        if leader == 0 || leader == self.shared.id {
            return None;
        }
        let address = self
            .shared
            .applied
            .read()
            .state
            .voters
            .get(&leader)
            .cloned()?;
        Some((leader, address))
    }

    pub fn client(&self, address: &str) -> Result<MetaServiceClient<Stamped>, MetaError> {
        let mut clients = self.clients.lock();
        if let Some(c) = clients.get(address) {
            return Ok(c.clone());
        }
        let c = meta_client(address, &self.credential)
            .map_err(|e| MetaError::Unreachable(format!("{address}: {e}")))?;
        clients.insert(address.to_string(), c.clone());
        Ok(c)
    }

    /// Waits until this node is leader (serve locally) or knows a reachable leader (forward), up to the
    /// deadline.
    pub async fn route(&self, deadline: Instant, hops: u32) -> Result<Route, MetaError> {
        loop {
            if self.shared.is_leader() {
                return Ok(Route::Local);
            }
            if hops < MAX_HOPS {
                if let Some((leader, address)) = self.remote_leader() {
                    if self.shared.filter.allows(leader) {
                        return Ok(Route::Forward(Box::new(self.client(&address)?)));
                    }
                }
            }
            if Instant::now() + POLL >= deadline {
                return Err(MetaError::NoLeader);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A request to forward: the caller's id, one more hop, the remaining time as the gRPC deadline.
    pub fn forward_request<T>(&self, message: T, hops: u32, deadline: Instant) -> Request<T> {
        let mut request = Request::new(message);
        request.set_timeout(deadline.saturating_duration_since(Instant::now()));
        let md = request.metadata_mut();
        md.insert(FROM_HEADER, self.shared.id.into());
        md.insert(HOPS_HEADER, (hops + 1).into());
        request
    }

    /// Refuses a request forwarded by a meta node the filter cuts this node off from.
    pub fn check_sender<T>(&self, request: &Request<T>) -> Result<u32, Status> {
        let md = request.metadata();
        let from = md
            .get(FROM_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(from) = from {
            if !self.shared.filter.allows(from) {
                return Err(Status::unavailable(format!(
                    "meta node {from} is unreachable"
                )));
            }
        }
        Ok(md
            .get(HOPS_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// Serves `request` on the leader: `local` when this node leads, else forwarded with `remote`. Retries
    /// (re-routing) while the deadline allows when the leader changes or cannot be reached.
    pub async fn on_leader<Req, Resp, L, LF, R, RF>(
        self: &Arc<Self>,
        request: Request<Req>,
        local: L,
        remote: R,
    ) -> Result<Response<Resp>, Status>
    where
        Req: Clone,
        L: Fn(Arc<Core>, Req, Instant) -> LF,
        LF: Future<Output = Result<Resp, MetaError>>,
        R: Fn(MetaServiceClient<Stamped>, Request<Req>) -> RF,
        RF: Future<Output = Result<Response<Resp>, Status>>,
    {
        let hops = self.check_sender(&request)?;
        let deadline = Instant::now() + self.write_timeout;
        let message = request.into_inner();
        loop {
            match self.route(deadline, hops).await? {
                Route::Local => match local(self.clone(), message.clone(), deadline).await {
                    Err(MetaError::NotLeader { .. }) if Instant::now() + POLL < deadline => {
                        tokio::time::sleep(POLL).await;
                    }
                    Err(MetaError::NotLeader { .. }) => return Err(MetaError::NoLeader.into()),
                    result => return result.map(Response::new).map_err(Status::from),
                },
                Route::Forward(client) => {
                    let forwarded = self.forward_request(message.clone(), hops, deadline);
                    match remote(*client, forwarded).await {
                        Ok(response) => return Ok(response),
                        Err(status) if retryable(&status) && Instant::now() + POLL < deadline => {
                            tokio::time::sleep(POLL).await;
                        }
                        Err(status) => return Err(status),
                    }
                }
            }
        }
    }

    /// `(last heartbeat ms, alive)` per node id, as this node can tell. Only the leader sees heartbeats; it
    /// counts every node alive during the grace period after it became leader (liveness is re-learnt then).
    /// A follower answering from its local state reports every node alive with no heartbeat time.
    pub fn liveness(&self) -> impl Fn(u64) -> (u64, bool) {
        let status = self.shared.status.read().clone();
        let is_leader = status.role == "leader";
        let grace = status
            .leader_since
            .is_some_and(|t| t.elapsed() < self.node_timeout);
        let heartbeats = self.heartbeats.lock().clone();
        let timeout_ms = self.node_timeout.as_millis() as u64;
        let now = now_ms();
        move |id| {
            let hb = heartbeats.get(&id).copied().unwrap_or(0);
            let recent = hb > 0 && now.saturating_sub(hb) < timeout_ms;
            (hb, !is_leader || grace || recent)
        }
    }
}

/// Whether a failed forward is worth retrying (the leader moved or is unreachable right now).
pub fn retryable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled
    )
}
