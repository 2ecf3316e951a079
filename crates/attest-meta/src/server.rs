//! `MetaNode`: one running meta node (Raft loop thread + tonic server), and how it starts.
//!
//! Start-up, by what the data directory holds:
//! - empty, `join: None`: bootstrap as an initial voter. Every initial node writes the same snapshot at
//!   index 1 (voters = `peers`, state = the voter addresses), so they all start from one identical state.
//! - empty, `bootstrap_if_empty`: [`crate::guard`] picks one of the other two: join through a peer that holds
//!   the group, or (lowest id, no peer answered in time) bootstrap as the only initial voter.
//! - empty, `join: Some(addr)`: start with an empty configuration and call `AddMetaNode { self }` on `addr`
//!   until it succeeds; the leader adds this node and catches it up, by snapshot first (the log of the
//!   group starts after index 1).
//! - not empty: resume from RocksDB (hard state, conf state, log, snapshot, applied state machine);
//!   `peers` and `join` are ignored, except that a joiner that stopped before it received its first
//!   snapshot (its state still names no voter) calls `AddMetaNode` again (idempotent) to learn the voter
//!   addresses it needs to answer the leader.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use attest_auth::cluster::ClusterGuard;
use attest_proto::credential::ClusterCredential;
use attest_proto::meta_client::meta_service_client as meta_client;
use attest_proto::v1 as pb;
use attest_proto::MAX_MESSAGE_BYTES;
use pb::meta_service_server::MetaServiceServer;
use raft::prelude::ConfState;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;

use crate::config::MetaConfig;
use crate::convert;
use crate::guard::Start;
use crate::node::{Applied, Input, RaftLoop, Shared};
use crate::route::Core;
use crate::service::MetaServiceImpl;
use crate::state::StateMachine;
use crate::storage::RocksStorage;
use crate::transport::{Filter, Filtered, GrpcTransport, PeerReport};

/// The Raft status of a node, as `Status` returns it.
pub(crate) fn status_of(shared: &Shared) -> pb::MetaStatus {
    let status = shared.status.read().clone();
    let applied = shared.applied.read();
    pb::MetaStatus {
        id: shared.id,
        leader_id: status.leader_id,
        term: status.term,
        commit_index: status.commit,
        applied_index: applied.index,
        raft_role: status.role.to_string(),
        voters: convert::voters_to_pb(&applied.state),
    }
}

/// `attest.v1.MetaService` behind the cluster credential check.
pub type GuardedMetaService = InterceptedService<MetaServiceServer<MetaServiceImpl>, ClusterGuard>;

/// Ready while a leader is known (to this node: a follower that lost its leader says so within an election
/// timeout).
fn leader_readiness(shared: &Arc<Shared>) -> attest_telemetry::ops::ReadinessCheck {
    let shared = Arc::clone(shared);
    Arc::new(move || {
        let (leader, term) = {
            let status = shared.status.read();
            (status.leader_id, status.term)
        };
        if leader != 0 {
            return Ok(());
        }
        let voters = shared.applied.read().state.voters.len();
        Err(format!(
            "waiting for a Raft leader (meta node {}, term {term}, {voters} voters known)",
            shared.id
        ))
    })
}

fn meta_service(core: &Arc<Core>, guard: &ClusterGuard) -> GuardedMetaService {
    let service = MetaServiceServer::new(MetaServiceImpl::new(core.clone()))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    InterceptedService::new(service, guard.clone())
}

/// A running meta node. Dropping it without [`MetaNode::shutdown`] stops it too (the server without waiting,
/// the Raft loop and RocksDB waited for).
pub struct MetaNode {
    id: u64,
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    core: Arc<Core>,
    guard: ClusterGuard,
    raft_thread: Option<std::thread::JoinHandle<()>>,
    server: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
    stop_server: Option<oneshot::Sender<()>>,
    joiner: Option<JoinHandle<()>>,
}

impl MetaNode {
    /// Opens the storage, starts the Raft loop and serves `MetaService` (and gRPC health) on `listener`.
    pub async fn start(
        config: MetaConfig,
        listener: impl Into<attest_telemetry::listener::Listener>,
    ) -> anyhow::Result<MetaNode> {
        let listener = listener.into();
        config.validate()?;
        let mut config = config;
        let local_addr = listener.local_addr()?;
        let storage = RocksStorage::open(&config.data_dir)?;
        let fresh = storage.is_empty();
        let mut hints = BTreeMap::new();
        if fresh && config.bootstrap_if_empty && config.join.is_none() {
            hints.extend(config.peers.iter().cloned());
            match crate::guard::decide(&config).await? {
                Start::Join(address) => config.join = Some(address),
                Start::Bootstrap => {
                    config.peers = vec![(config.id, config.advertise_address.clone())];
                }
            }
        }
        if fresh {
            hints.extend(config.peers.iter().cloned());
            if config.join.is_none() {
                anyhow::ensure!(
                    config.peers.iter().any(|(id, _)| *id == config.id),
                    "initial peers must include this node ({})",
                    config.id
                );
                let voters: Vec<u64> = config.peers.iter().map(|(id, _)| *id).collect();
                let state = StateMachine::with_voters(config.peers.iter().cloned());
                storage.bootstrap(ConfState::from((voters, Vec::<u64>::new())), state.encode())?;
                tracing::info!(meta_id = config.id, peers = ?config.peers, "bootstrapped raft group");
            }
        }
        let persisted = storage.applied_state()?;
        let state = persisted.state.unwrap_or_default();
        let filter = Arc::new(Filter::default());
        let shared = Arc::new(Shared::new(
            config.id,
            Applied {
                index: persisted.index,
                state,
            },
            filter.clone(),
        ));
        let (inbox, rx) = crate::inbox::inbox(config.id, crate::inbox::INBOX_CAPACITY);
        let report_to = inbox.clone();
        let report: crate::transport::Reporter = Arc::new(move |r: PeerReport| {
            let _ = report_to.send(Input::Report(r));
        });
        let transport = Filtered::new(
            GrpcTransport::new(
                tokio::runtime::Handle::current(),
                report.clone(),
                config.cluster_credential.clone(),
            ),
            filter,
            report,
        );
        let raft_loop = RaftLoop::new(
            &config,
            storage,
            shared.clone(),
            Box::new(transport),
            rx,
            hints,
        )?;
        let raft_thread = std::thread::Builder::new()
            .name(format!("meta-raft-{}", config.id))
            .spawn(move || raft_loop.run())?;

        let core = Arc::new(
            Core::new(
                shared.clone(),
                inbox.clone(),
                config.write_timeout(),
                config.node_timeout(),
                config.cluster_credential.clone(),
            )
            .with_disk(attest_telemetry::disk::DiskGuard::new(
                &config.data_dir,
                &config.disk,
            )),
        );
        // gRPC health is readiness (a leader known), as `/readyz` is.
        let health_service = attest_telemetry::readiness::ReadinessHealth::new(
            leader_readiness(&shared),
            vec![<MetaServiceServer<MetaServiceImpl> as tonic::server::NamedService>::NAME.into()],
        )
        .server();
        let guard = ClusterGuard::for_listener(&config.cluster_credential, &listener);
        let service = meta_service(&core, &guard);
        let (stop_server, stopped) = oneshot::channel::<()>();
        let incoming = listener.incoming();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health_service)
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                }),
        );
        let caught_up = !shared.applied.read().state.voters.is_empty();
        let joiner = match (&config.join, caught_up) {
            (Some(address), false) => Some(tokio::spawn(join(
                address.clone(),
                pb::MetaPeer {
                    id: config.id,
                    address: config.advertise_address.clone(),
                },
                inbox,
                config.cluster_credential.clone(),
            ))),
            _ => None,
        };
        tracing::info!(meta_id = config.id, %local_addr, "meta node serving");
        Ok(MetaNode {
            id: config.id,
            local_addr,
            shared,
            core,
            guard,
            raft_thread: Some(raft_thread),
            server: Some(server),
            stop_server: Some(stop_server),
            joiner,
        })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The `attest.v1.MetaService` of this node, to be served on another server too (`attest dev` serves it
    /// beside the router's services, so `attest status --meta <dev grpc address>` works).
    pub fn service(&self) -> GuardedMetaService {
        meta_service(&self.core, &self.guard)
    }

    /// The socket the gRPC server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Raft status as this node sees it (what `Status` returns).
    pub fn status(&self) -> pb::MetaStatus {
        status_of(&self.shared)
    }

    pub fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    /// Ready once this node knows a leader; a node of a group without one says what it sees.
    pub fn readiness(&self) -> attest_telemetry::ops::ReadinessCheck {
        leader_readiness(&self.shared)
    }

    /// This node's applied state (non-linearizable, liveness as this node can tell).
    pub fn cluster_state(&self) -> pb::ClusterState {
        let liveness = self.core.liveness();
        let leader_id = self.shared.status.read().leader_id;
        let applied = self.shared.applied.read();
        convert::cluster_state_to_pb(&applied.state, applied.index, leader_id, liveness)
    }

    /// Every term in which this node has been leader since it started (split-brain checks).
    pub fn terms_led(&self) -> Vec<u64> {
        self.shared.terms_led.lock().clone()
    }

    /// Snapshots this node received from a leader and installed since it started.
    pub fn snapshots_installed(&self) -> u64 {
        self.shared
            .snapshots_installed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The fault-injection filter in front of this node's meta-to-meta traffic.
    pub fn filter(&self) -> Arc<Filter> {
        self.shared.filter.clone()
    }

    /// Stops the server (gracefully, up to 3 s), then the Raft loop, and closes RocksDB.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(joiner) = self.joiner.take() {
            joiner.abort();
        }
        if let Some(stop) = self.stop_server.take() {
            let _ = stop.send(());
        }
        if let Some(mut server) = self.server.take() {
            match tokio::time::timeout(Duration::from_secs(3), &mut server).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    tracing::warn!(meta_id = self.id, error = %e, "meta server failed")
                }
                Ok(Err(e)) => {
                    tracing::warn!(meta_id = self.id, error = %e, "meta server task failed")
                }
                Err(_) => server.abort(),
            }
        }
        let _ = self.core.send(Input::Shutdown);
        if let Some(thread) = self.raft_thread.take() {
            tokio::task::spawn_blocking(move || thread.join())
                .await?
                .map_err(|_| anyhow::anyhow!("raft loop panicked"))?;
        }
        tracing::info!(meta_id = self.id, "meta node stopped");
        Ok(())
    }
}

impl Drop for MetaNode {
    fn drop(&mut self) {
        if let Some(joiner) = self.joiner.take() {
            joiner.abort();
        }
        if let Some(stop) = self.stop_server.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.raft_thread.take() {
            let _ = self.core.send(Input::Shutdown);
            // Wait for the loop to close RocksDB: a process that exits while that thread still holds the
            // database aborts in RocksDB's destructors ("pthread lock: Invalid argument"). The loop stops at
            // its next input, so this is short.
            let _ = thread.join();
        }
    }
}

/// Asks an existing member to add this node, until it succeeds; then tells the loop the voter addresses.
async fn join(
    address: String,
    me: pb::MetaPeer,
    inbox: crate::inbox::Inbox,
    credential: ClusterCredential,
) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let result = match meta_client(&address, &credential) {
            Ok(mut client) => {
                let mut request = tonic::Request::new(pb::AddMetaNodeRequest {
                    peer: Some(me.clone()),
                });
                request.set_timeout(Duration::from_secs(10));
                client.add_meta_node(request).await.map(|r| r.into_inner())
            }
            Err(e) => Err(tonic::Status::invalid_argument(e.to_string())),
        };
        match result {
            Ok(membership) => {
                let hints = membership
                    .voters
                    .into_iter()
                    .map(|p| (p.id, p.address))
                    .collect();
                let _ = inbox.send(Input::PeerHints(hints));
                tracing::info!(meta_id = me.id, via = %address, "joined the meta raft group");
                return;
            }
            Err(status) => {
                tracing::info!(meta_id = me.id, via = %address, error = %status, "join not accepted yet; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}
