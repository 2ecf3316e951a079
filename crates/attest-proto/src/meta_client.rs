//! `MetaClient`: what routers, shard nodes, meta nodes' tests and the CLI use to talk to the meta group — the
//! generated gRPC client with fail-over across meta addresses (kept here, beside the proto, so that no role
//! needs the meta crate to reach meta).
//!
//! It holds a client per meta address and tries them in turn: the last address that answered first, then
//! the others. `Unavailable`, `Unknown`, `Cancelled` and `DeadlineExceeded` (a node down, no leader yet, a
//! minority partition) move on to the next address; after a full round it waits briefly and starts over,
//! until the call's overall timeout (default 10 s). Any other status is the answer and is returned as is.
//!
//! One address may use at most `attempt_timeout` (default 4 s, above meta's own 3 s write timeout) of that:
//! a node that accepts connections but never answers (powered off behind a firewall that drops packets, a
//! hung process) must not eat the whole budget, and a call that failed on the preferred address moves the
//! preference on, so the next call does not start there again.
//!
//! A write that timed out may still have been committed; retrying it can then answer `AlreadyExists`
//! (create) or be a no-op (register, put key, caught-up, drop, a switch to the copy the name resolves to). A write that fails after any attempt whose
//! outcome is unknown (no answer in time, a cancelled call, meta's own `DEADLINE_EXCEEDED` for a proposal not
//! committed in time) fails with `DEADLINE_EXCEEDED` saying it may have been applied, never with the
//! `UNAVAILABLE` of a later attempt that reached no node.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::{Code, Status};

use crate::credential::{ClusterCredential, Stamped};
use crate::v1 as pb;
use crate::MAX_MESSAGE_BYTES;
use pb::meta_service_client::MetaServiceClient;

/// A lazily connecting client of one meta node at `http://host:port` (a bare `host:port` gets `http://`),
/// presenting `credential` on every call.
pub fn meta_service_client(
    address: &str,
    credential: &ClusterCredential,
) -> Result<MetaServiceClient<Stamped>, tonic::transport::Error> {
    let channel = credential.channel(address, Duration::from_millis(500))?;
    Ok(
        MetaServiceClient::with_interceptor(channel, credential.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

/// `host:port` → `http://host:port`; an address with a scheme is kept as it is.
pub fn with_scheme(address: &str) -> String {
    let a = address.trim();
    if a.contains("://") {
        a.to_string()
    } else {
        format!("http://{a}")
    }
}

/// A client of the meta group. Cheap to clone; clones share the preferred address.
#[derive(Debug, Clone)]
pub struct MetaClient {
    addresses: Vec<String>,
    clients: Vec<MetaServiceClient<Stamped>>,
    /// Index of the address that answered last.
    preferred: Arc<AtomicUsize>,
    /// Overall time one call may take, retries included.
    timeout: Duration,
    /// The most one address may take of it.
    attempt_timeout: Duration,
    /// What every call presents (meta accepts only the cluster credential when one is configured).
    credential: ClusterCredential,
}

fn retry_next(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}

/// Whether a failed attempt may still have reached meta and been proposed: no answer in time, a call cut off,
/// or meta's own "not committed in time". `UNAVAILABLE` is a node that refused or was never reached.
fn outcome_unknown(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}

impl MetaClient {
    /// A client over `addresses` (`http://host:port`) presenting no credential; connections are made lazily.
    pub fn new<S: Into<String>>(
        addresses: impl IntoIterator<Item = S>,
    ) -> Result<MetaClient, tonic::transport::Error> {
        Self::with_credential(addresses, ClusterCredential::none())
    }

    /// A client over `addresses` presenting `credential` on every call.
    pub fn with_credential<S: Into<String>>(
        addresses: impl IntoIterator<Item = S>,
        credential: ClusterCredential,
    ) -> Result<MetaClient, tonic::transport::Error> {
        let addresses: Vec<String> = addresses
            .into_iter()
            .map(Into::into)
            .filter(|a: &String| !a.trim().is_empty())
            .map(|a| with_scheme(&a))
            .collect();
        let clients = addresses
            .iter()
            .map(|a| meta_service_client(a, &credential))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MetaClient {
            addresses,
            clients,
            preferred: Arc::new(AtomicUsize::new(0)),
            timeout: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(4),
            credential,
        })
    }

    /// Sets the overall time a call may take (retries included).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the most one address may take of a call's time before the next address is tried.
    pub fn with_attempt_timeout(mut self, attempt_timeout: Duration) -> Self {
        self.attempt_timeout = attempt_timeout;
        self
    }

    /// The credential this client presents (the one its owner presents to every internal service).
    pub fn credential(&self) -> &ClusterCredential {
        &self.credential
    }

    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// Sends `message` through `f` to one address after another (see the module header), each time as a
    /// request carrying the attempt's deadline.
    async fn call<M, T, F, Fut>(&self, message: M, f: F) -> Result<T, Status>
    where
        M: Clone,
        F: Fn(MetaServiceClient<Stamped>, tonic::Request<M>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        self.attempts(message, f)
            .await
            .map_err(|(status, _)| status)
    }

    /// [`Self::call`] for a change to meta's state: when an attempt may have reached meta and been proposed,
    /// the failure says so (`DEADLINE_EXCEEDED`, see the module header).
    async fn write<M, T, F, Fut>(&self, message: M, f: F) -> Result<T, Status>
    where
        M: Clone,
        F: Fn(MetaServiceClient<Stamped>, tonic::Request<M>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        self.attempts(message, f)
            .await
            .map_err(|(last, unknown)| match unknown {
                Some(unknown) => Status::deadline_exceeded(format!(
                    "meta did not confirm the change within {:?}, and may still apply it ({})",
                    self.timeout,
                    unknown.message()
                )),
                None => last,
            })
    }

    /// The rounds of [`Self::call`]; a failure comes with the last attempt whose outcome is unknown, if any.
    async fn attempts<M, T, F, Fut>(&self, message: M, f: F) -> Result<T, (Status, Option<Status>)>
    where
        M: Clone,
        F: Fn(MetaServiceClient<Stamped>, tonic::Request<M>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        if self.clients.is_empty() {
            return Err((
                Status::invalid_argument("no meta addresses configured"),
                None,
            ));
        }
        let mut unknown: Option<Status> = None;
        let deadline = Instant::now() + self.timeout;
        let start = self.preferred.load(Ordering::Relaxed);
        let n = self.clients.len();
        loop {
            let mut last = Status::unavailable("no meta node answered");
            for i in 0..n {
                let idx = (start + i) % n;
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Err((last, unknown));
                }
                let budget = remaining.min(self.attempt_timeout);
                // The gRPC deadline travels to the server; the local timeout also covers a peer that never
                // answers at all (not even the HTTP/2 handshake).
                let mut request = tonic::Request::new(message.clone());
                request.set_timeout(budget);
                let attempt = tokio::time::timeout(budget, f(self.clients[idx].clone(), request));
                let outcome = attempt.await.unwrap_or_else(|_| {
                    Err(Status::deadline_exceeded(format!(
                        "meta node {} did not answer within {budget:?}",
                        self.addresses[idx]
                    )))
                });
                match outcome {
                    Ok(v) => {
                        self.preferred.store(idx, Ordering::Relaxed);
                        return Ok(v);
                    }
                    Err(status) if retry_next(&status) => {
                        if outcome_unknown(&status) {
                            unknown = Some(status.clone());
                        }
                        let _ = self.preferred.compare_exchange(
                            idx,
                            (idx + 1) % n,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                        last = status;
                    }
                    Err(status) => return Err((status, unknown)),
                }
            }
            if Instant::now() + Duration::from_millis(200) >= deadline {
                return Err((last, unknown));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The cluster state; `linearizable` makes it a ReadIndex read on the leader.
    pub async fn cluster_state(&self, linearizable: bool) -> Result<pb::ClusterState, Status> {
        let message = pb::GetClusterStateRequest { linearizable };
        self.call(message, |mut c, r| async move {
            Ok(c.get_cluster_state(r).await?.into_inner())
        })
        .await
    }

    /// One long poll of the cluster state (see `WatchClusterState`): the state (or, with `accept_delta`, maybe
    /// a delta on the one at `since`) when meta's differs from the one at `since` (`(version, liveness)` of the
    /// last change applied; `(0, 0)` for none), else, after `wait`, an answer without either. Each address may
    /// hold the call for the wait and a few seconds more.
    pub async fn watch_cluster_state(
        &self,
        since: (u64, u64),
        wait: Duration,
        accept_delta: bool,
    ) -> Result<pb::ClusterStateChange, Status> {
        let message = pb::WatchClusterStateRequest {
            since_version: since.0,
            since_liveness: since.1,
            wait_ms: u32::try_from(wait.as_millis()).unwrap_or(u32::MAX),
            accept_delta,
        };
        let held = self
            .clone()
            .with_attempt_timeout(wait + self.attempt_timeout)
            .with_timeout(wait + self.timeout);
        held.call(message, |mut c, r| async move {
            Ok(c.watch_cluster_state(r).await?.into_inner())
        })
        .await
    }

    /// Registers a data-plane node (same name → same id).
    pub async fn register_node(
        &self,
        request: pb::RegisterNodeRequest,
    ) -> Result<pb::NodeInfo, Status> {
        self.call(request, |mut c, r| async move {
            c.register_node(r)
                .await?
                .into_inner()
                .node
                .ok_or_else(|| Status::internal("register returned no node"))
        })
        .await
    }

    /// A heartbeat with the node's replica reports; returns the state version the leader holds.
    pub async fn heartbeat(
        &self,
        node_id: u64,
        replicas: Vec<pb::ReplicaReport>,
    ) -> Result<pb::HeartbeatResponse, Status> {
        let message = pb::HeartbeatRequest { node_id, replicas };
        self.call(message, |mut c, r| async move {
            Ok(c.heartbeat(r).await?.into_inner())
        })
        .await
    }

    pub async fn create_collection(
        &self,
        request: pb::MetaCreateCollectionRequest,
    ) -> Result<pb::CollectionMeta, Status> {
        self.write(request, |mut c, r| async move {
            Ok(c.create_collection(r).await?.into_inner())
        })
        .await
    }

    /// Returns whether the collection existed.
    pub async fn drop_collection(&self, name: &str) -> Result<bool, Status> {
        let message = pb::MetaDropCollectionRequest {
            name: name.to_string(),
        };
        self.write(message, |mut c, r| async move {
            Ok(c.drop_collection(r).await?.into_inner().dropped)
        })
        .await
    }

    pub async fn replica_caught_up(
        &self,
        collection: &str,
        shard: u32,
        node_id: u64,
    ) -> Result<pb::CollectionMeta, Status> {
        let message = pb::ReplicaCaughtUpRequest {
            collection: collection.to_string(),
            shard,
            node_id,
        };
        self.call(message, |mut c, r| async move {
            Ok(c.replica_caught_up(r).await?.into_inner())
        })
        .await
    }

    /// Replaces a collection's answer thresholds (a JSON object; empty clears them).
    pub async fn set_collection_thresholds(
        &self,
        name: &str,
        thresholds_json: &str,
    ) -> Result<pb::CollectionMeta, Status> {
        let message = pb::SetCollectionThresholdsRequest {
            name: name.to_string(),
            thresholds_json: thresholds_json.to_string(),
        };
        self.write(message, |mut c, r| async move {
            Ok(c.set_collection_thresholds(r).await?.into_inner())
        })
        .await
    }

    /// Points collection `name` at its copy `to` (`name~tag`) and drops the collection `name` resolved to, in
    /// one meta command; returns the copy (which took the collection's thresholds).
    pub async fn switch_collection(
        &self,
        name: &str,
        to: &str,
    ) -> Result<pb::CollectionMeta, Status> {
        let message = pb::SwitchCollectionRequest {
            name: name.to_string(),
            to: to.to_string(),
        };
        self.write(message, |mut c, r| async move {
            Ok(c.switch_collection(r).await?.into_inner())
        })
        .await
    }

    /// Plans (and unless `dry_run`, applies) replica moves; returns them.
    pub async fn rebalance(&self, dry_run: bool) -> Result<Vec<pb::ReplicaMove>, Status> {
        let message = pb::RebalanceRequest { dry_run };
        self.write(message, |mut c, r| async move {
            Ok(c.rebalance(r).await?.into_inner().moves)
        })
        .await
    }

    /// Starts or ends the drain of the shard node registered as `name`; returns the node as meta now sees it.
    pub async fn drain_node(
        &self,
        name: &str,
        drain: pb::NodeDrain,
    ) -> Result<pb::NodeInfo, Status> {
        let message = pb::DrainNodeRequest {
            name: name.to_string(),
            drain: drain as i32,
        };
        self.write(message, |mut c, r| async move {
            Ok(c.drain_node(r).await?.into_inner())
        })
        .await
    }

    pub async fn put_api_key(&self, key: pb::ApiKeyInfo) -> Result<(), Status> {
        let message = pb::PutApiKeyRequest { key: Some(key) };
        self.write(message, |mut c, r| async move {
            c.put_api_key(r).await?;
            Ok(())
        })
        .await
    }

    /// Creates (`create`) or updates a snapshot job; returns it as stored (with a cancellation, if asked for).
    pub async fn put_snapshot_job(
        &self,
        job: pb::SnapshotJobInfo,
        create: bool,
        take_over_after_ms: u64,
    ) -> Result<pb::SnapshotJobInfo, Status> {
        let message = pb::PutSnapshotJobRequest {
            job: Some(job),
            create,
            take_over_after_ms,
        };
        self.write(message, |mut c, r| async move {
            Ok(c.put_snapshot_job(r).await?.into_inner())
        })
        .await
    }

    pub async fn snapshot_job(&self, id: &str) -> Result<pb::SnapshotJobInfo, Status> {
        let message = pb::GetSnapshotJobRequest { id: id.to_string() };
        self.call(message, |mut c, r| async move {
            Ok(c.get_snapshot_job(r).await?.into_inner())
        })
        .await
    }

    /// Every snapshot job meta keeps, oldest first.
    pub async fn snapshot_jobs(&self) -> Result<Vec<pb::SnapshotJobInfo>, Status> {
        self.call(pb::ListSnapshotJobsRequest {}, |mut c, r| async move {
            Ok(c.list_snapshot_jobs(r).await?.into_inner().jobs)
        })
        .await
    }

    pub async fn cancel_snapshot_job(&self, id: &str) -> Result<pb::SnapshotJobInfo, Status> {
        let message = pb::GetSnapshotJobRequest { id: id.to_string() };
        self.write(message, |mut c, r| async move {
            Ok(c.cancel_snapshot_job(r).await?.into_inner())
        })
        .await
    }

    /// Adds a meta voter; returns the voters after the change.
    pub async fn add_meta_node(&self, id: u64, address: &str) -> Result<Vec<pb::MetaPeer>, Status> {
        let peer = pb::MetaPeer {
            id,
            address: address.to_string(),
        };
        let message = pb::AddMetaNodeRequest { peer: Some(peer) };
        self.write(message, |mut c, r| async move {
            Ok(c.add_meta_node(r).await?.into_inner().voters)
        })
        .await
    }

    /// Removes a meta voter; returns the voters after the change.
    pub async fn remove_meta_node(&self, id: u64) -> Result<Vec<pb::MetaPeer>, Status> {
        let message = pb::RemoveMetaNodeRequest { id };
        self.write(message, |mut c, r| async move {
            Ok(c.remove_meta_node(r).await?.into_inner().voters)
        })
        .await
    }

    /// The Raft status of the first meta node that answers.
    pub async fn status(&self) -> Result<pb::MetaStatus, Status> {
        self.call(pb::MetaStatusRequest {}, |mut c, r| async move {
            Ok(c.status(r).await?.into_inner())
        })
        .await
    }

    /// The status of every listed meta node, each asked directly (for `attest status`).
    pub async fn status_of_each(&self) -> Vec<(String, Result<pb::MetaStatus, Status>)> {
        let mut out = Vec::new();
        for (address, client) in self.addresses.iter().zip(&self.clients) {
            let mut r = tonic::Request::new(pb::MetaStatusRequest {});
            r.set_timeout(Duration::from_secs(2));
            let s = client.clone().status(r).await.map(|r| r.into_inner());
            out.push((address.clone(), s));
        }
        out
    }
}
