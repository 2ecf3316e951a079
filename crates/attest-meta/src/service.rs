//! `MetaServiceImpl`: the gRPC `attest.v1.MetaService` of one meta node.
//!
//! - Writes (register, create/drop/switch, caught-up, rebalance, keys, membership) run on the leader: followers
//!   forward them (see [`crate::route`]). The leader puts its clock and the set of live shard nodes into
//!   the command, so applying it stays deterministic.
//! - `Heartbeat` is leader soft state (not in the log); it proposes `ReportManifests` only when a replica's
//!   segment list changed.
//! - `GetClusterState { linearizable }`: a ReadIndex round on the leader (forwarded by followers).
//!   Non-linearizable: the leader answers from its applied state; a follower forwards to the leader when it
//!   can reach one (for the liveness flags, which only the leader knows) and otherwise answers from its own
//!   applied state with every node marked alive and `last_heartbeat_ms = 0`.
//! - `WatchClusterState`: the same state as a long poll by version (see [`crate::watch`]); followers pass it
//!   to the leader like a non-linearizable read.
//! - Snapshot jobs ([`crate::jobs`]): puts and cancellations are proposed on the leader; reads are
//!   linearizable (ReadIndex on the leader).
//! - `Status` is always local.

use std::sync::Arc;
use std::time::Duration;

use attest_proto::v1 as pb;
use pb::meta_service_server::MetaService;
use protobuf::Message as PbMessage;
use raft::prelude::Message;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::error::{MetaError, StateError};
use crate::node::Input;
use crate::placement;
use crate::route::{now_ms, Core, MAX_HOPS};
use crate::state::{self, Command, Output};
use crate::watch;

mod membership_changes;
mod snapshot_jobs;
use membership_changes::{add_meta_node, remove_meta_node};
use snapshot_jobs::{cancel_snapshot_job, get_snapshot_job, list_snapshot_jobs, put_snapshot_job};

/// The meta gRPC service of one node.
#[derive(Clone)]
pub struct MetaServiceImpl {
    core: Arc<Core>,
}

impl MetaServiceImpl {
    pub(crate) fn new(core: Arc<Core>) -> Self {
        MetaServiceImpl { core }
    }
}

fn unexpected(output: Output) -> MetaError {
    MetaError::Codec(format!("unexpected apply output {output:?}"))
}

fn membership(core: &Core) -> pb::MetaMembership {
    pb::MetaMembership {
        voters: convert::voters_to_pb(&core.shared.applied.read().state),
    }
}

/// The cluster state from this node's applied state, with the liveness it can tell.
fn local_cluster_state(core: &Core) -> pb::ClusterState {
    let liveness = core.liveness();
    let leader_id = core.shared.status.read().leader_id;
    let applied = core.shared.applied.read();
    convert::cluster_state_to_pb(&applied.state, applied.index, leader_id, liveness)
}

/// Ids of the data-plane nodes the leader currently considers alive.
fn live_nodes(core: &Core) -> Vec<u64> {
    let liveness = core.liveness();
    let applied = core.shared.applied.read();
    applied
        .state
        .nodes
        .keys()
        .copied()
        .filter(|id| liveness(*id).1)
        .collect()
}

async fn register_node(
    core: Arc<Core>,
    req: pb::RegisterNodeRequest,
    deadline: Instant,
) -> Result<pb::RegisterNodeResponse, MetaError> {
    if req.name.is_empty() || req.address.is_empty() {
        return Err(MetaError::InvalidArgument(
            "name and address are required".into(),
        ));
    }
    let cmd = Command::RegisterNode {
        name: req.name,
        address: req.address,
        role: convert::role_from_pb(req.role)?,
        zone: req.zone,
    };
    let Output::Node(node) = core.propose(cmd, deadline).await? else {
        return Err(MetaError::Codec("register returned no node".into()));
    };
    // Registering counts as a sign of life.
    core.heartbeats.lock().insert(node.id, now_ms());
    Ok(pb::RegisterNodeResponse {
        node: Some(node_info(&core, &node)),
    })
}

async fn heartbeat(
    core: Arc<Core>,
    req: pb::HeartbeatRequest,
    deadline: Instant,
) -> Result<pb::HeartbeatResponse, MetaError> {
    let changed: Vec<state::ManifestRecord> = {
        let applied = core.shared.applied.read();
        if !applied.state.nodes.contains_key(&req.node_id) {
            return Err(StateError::NotFound(format!(
                "node {} is not registered (register again)",
                req.node_id
            ))
            .into());
        }
        core.heartbeats.lock().insert(req.node_id, now_ms());
        req.replicas
            .into_iter()
            .filter(|r| {
                let key = (r.collection.clone(), r.shard, req.node_id);
                applied.state.collections.contains_key(&r.collection)
                    && applied
                        .state
                        .manifests
                        .get(&key)
                        .is_none_or(|m| m.segments != r.segments)
            })
            .map(|r| state::ManifestRecord {
                collection: r.collection,
                shard: r.shard,
                node_id: req.node_id,
                segments: r.segments,
                live_documents: r.live_documents,
            })
            .collect()
    };
    if !changed.is_empty() {
        core.propose(Command::ReportManifests { manifests: changed }, deadline)
            .await?;
    }
    Ok(pb::HeartbeatResponse {
        state_version: core.shared.applied.read().index,
    })
}

async fn create_collection(
    core: Arc<Core>,
    req: pb::MetaCreateCollectionRequest,
    deadline: Instant,
) -> Result<pb::CollectionMeta, MetaError> {
    state::validate_collection_name(&req.name)?;
    if let Some(problem) = attest_core::limits::shards_problem(req.shards) {
        return Err(MetaError::InvalidArgument(format!("shards {problem}")));
    }
    // 0 asks for meta's default replication.
    if req.replication != 0 {
        if let Some(problem) = attest_core::limits::replication_problem(req.replication) {
            return Err(MetaError::InvalidArgument(format!("replication {problem}")));
        }
    }
    let placement = convert::placement_from_pb(&req.placement);
    let dry_run = req.dry_run;
    let def = convert::collection_def_from_pb(req);
    if dry_run {
        let live = live_nodes(&core);
        let applied = core.shared.applied.read();
        let planned = applied.state.plan_collection(&def, &live, now_ms())?;
        return Ok(convert::collection_to_pb(&planned));
    }
    let cmd = if placement.is_empty() {
        Command::CreateCollection {
            def,
            live_nodes: live_nodes(&core),
            created_ms: now_ms(),
        }
    } else {
        Command::CreateCollectionPlaced {
            def,
            placement,
            created_ms: now_ms(),
        }
    };
    match core.propose(cmd, deadline).await? {
        Output::Collection(c) => Ok(convert::collection_to_pb(&c)),
        other => Err(unexpected(other)),
    }
}

async fn rebalance(
    core: Arc<Core>,
    req: pb::RebalanceRequest,
    deadline: Instant,
) -> Result<pb::RebalanceResponse, MetaError> {
    let live = live_nodes(&core);
    let moves = {
        let applied = core.shared.applied.read();
        let targets = applied.state.placement_targets(&live.into_iter().collect());
        placement::plan_rebalance(
            applied.state.all_shards(),
            &targets,
            &applied.state.decommissioning(),
        )
    };
    let moves = if req.dry_run || moves.is_empty() {
        moves
    } else {
        match core
            .propose(Command::ApplyRebalance { moves }, deadline)
            .await?
        {
            Output::Moves(applied) => applied,
            other => return Err(unexpected(other)),
        }
    };
    Ok(pb::RebalanceResponse {
        moves: moves.iter().map(convert::move_to_pb).collect(),
    })
}

async fn drain_node(
    core: Arc<Core>,
    req: pb::DrainNodeRequest,
    deadline: Instant,
) -> Result<pb::NodeInfo, MetaError> {
    let cmd = Command::SetNodeDraining {
        name: req.name,
        drain: convert::drain_from_pb(req.drain)?,
    };
    let Output::Node(node) = core.propose(cmd, deadline).await? else {
        return Err(MetaError::Codec("drain returned no node".into()));
    };
    Ok(node_info(&core, &node))
}

/// A node as the leader sees it now: its record, drain and liveness.
fn node_info(core: &Core, node: &state::NodeRecord) -> pb::NodeInfo {
    let drain = core
        .shared
        .applied
        .read()
        .state
        .draining
        .get(&node.id)
        .copied();
    let (last_heartbeat_ms, alive) = core.liveness()(node.id);
    convert::node_to_pb(node, drain, last_heartbeat_ms, alive)
}

#[tonic::async_trait]
impl MetaService for MetaServiceImpl {
    async fn raft(
        &self,
        request: Request<pb::RaftEnvelope>,
    ) -> Result<Response<pb::RaftAck>, Status> {
        let msg = Message::parse_from_bytes(&request.into_inner().message)
            .map_err(|e| Status::invalid_argument(format!("raft message: {e}")))?;
        if !self.core.shared.filter.allows(msg.from) {
            return Err(Status::unavailable(format!(
                "meta node {} is unreachable",
                msg.from
            )));
        }
        match self.core.send(Input::Raft(Box::new(msg))) {
            // Dropped and counted: Raft recovers a lost message (see `crate::inbox`), so the peer is not told.
            Ok(()) | Err(MetaError::InboxFull) => Ok(Response::new(pb::RaftAck {})),
            Err(e) => Err(e.into()),
        }
    }

    async fn add_meta_node(
        &self,
        request: Request<pb::AddMetaNodeRequest>,
    ) -> Result<Response<pb::MetaMembership>, Status> {
        self.core
            .on_leader(request, add_meta_node, |mut c, r| async move {
                c.add_meta_node(r).await
            })
            .await
    }

    async fn remove_meta_node(
        &self,
        request: Request<pb::RemoveMetaNodeRequest>,
    ) -> Result<Response<pb::MetaMembership>, Status> {
        self.core
            .on_leader(request, remove_meta_node, |mut c, r| async move {
                c.remove_meta_node(r).await
            })
            .await
    }

    async fn register_node(
        &self,
        request: Request<pb::RegisterNodeRequest>,
    ) -> Result<Response<pb::RegisterNodeResponse>, Status> {
        self.core
            .on_leader(request, register_node, |mut c, r| async move {
                c.register_node(r).await
            })
            .await
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        self.core
            .on_leader(request, heartbeat, |mut c, r| async move {
                c.heartbeat(r).await
            })
            .await
    }

    async fn create_collection(
        &self,
        request: Request<pb::MetaCreateCollectionRequest>,
    ) -> Result<Response<pb::CollectionMeta>, Status> {
        self.core
            .on_leader(request, create_collection, |mut c, r| async move {
                c.create_collection(r).await
            })
            .await
    }

    async fn drop_collection(
        &self,
        request: Request<pb::MetaDropCollectionRequest>,
    ) -> Result<Response<pb::MetaDropCollectionResponse>, Status> {
        let local = |core: Arc<Core>, req: pb::MetaDropCollectionRequest, deadline: Instant| async move {
            match core
                .propose(Command::DropCollection { name: req.name }, deadline)
                .await?
            {
                Output::Dropped(dropped) => Ok(pb::MetaDropCollectionResponse { dropped }),
                other => Err(unexpected(other)),
            }
        };
        self.core
            .on_leader(request, local, |mut c, r| async move {
                c.drop_collection(r).await
            })
            .await
    }

    async fn replica_caught_up(
        &self,
        request: Request<pb::ReplicaCaughtUpRequest>,
    ) -> Result<Response<pb::CollectionMeta>, Status> {
        let local = |core: Arc<Core>, req: pb::ReplicaCaughtUpRequest, deadline: Instant| async move {
            let cmd = Command::ReplicaCaughtUp {
                collection: req.collection,
                shard: req.shard,
                node_id: req.node_id,
            };
            match core.propose(cmd, deadline).await? {
                Output::Collection(c) => Ok(convert::collection_to_pb(&c)),
                other => Err(unexpected(other)),
            }
        };
        self.core
            .on_leader(request, local, |mut c, r| async move {
                c.replica_caught_up(r).await
            })
            .await
    }

    async fn set_collection_thresholds(
        &self,
        request: Request<pb::SetCollectionThresholdsRequest>,
    ) -> Result<Response<pb::CollectionMeta>, Status> {
        let local = |core: Arc<Core>,
                     req: pb::SetCollectionThresholdsRequest,
                     deadline: Instant| async move {
            // Meta keeps the answer tier's shape opaque, but never stores what is not a JSON object.
            if !req.thresholds_json.is_empty()
                && !serde_json::from_str::<serde_json::Value>(&req.thresholds_json)
                    .is_ok_and(|v| v.is_object())
            {
                return Err(MetaError::InvalidArgument(
                    "thresholds_json must be a JSON object".into(),
                ));
            }
            let cmd = Command::SetThresholds {
                collection: req.name,
                thresholds_json: req.thresholds_json,
            };
            match core.propose(cmd, deadline).await? {
                Output::Collection(c) => Ok(convert::collection_to_pb(&c)),
                other => Err(unexpected(other)),
            }
        };
        self.core
            .on_leader(request, local, |mut c, r| async move {
                c.set_collection_thresholds(r).await
            })
            .await
    }

    async fn switch_collection(
        &self,
        request: Request<pb::SwitchCollectionRequest>,
    ) -> Result<Response<pb::CollectionMeta>, Status> {
        let local = |core: Arc<Core>, req: pb::SwitchCollectionRequest, deadline: Instant| async move {
            let cmd = Command::SwitchCollection {
                name: req.name,
                to: req.to,
            };
            match core.propose(cmd, deadline).await? {
                Output::Collection(c) => Ok(convert::collection_to_pb(&c)),
                other => Err(unexpected(other)),
            }
        };
        self.core
            .on_leader(request, local, |mut c, r| async move {
                c.switch_collection(r).await
            })
            .await
    }

    async fn rebalance(
        &self,
        request: Request<pb::RebalanceRequest>,
    ) -> Result<Response<pb::RebalanceResponse>, Status> {
        self.core
            .on_leader(request, rebalance, |mut c, r| async move {
                c.rebalance(r).await
            })
            .await
    }

    async fn drain_node(
        &self,
        request: Request<pb::DrainNodeRequest>,
    ) -> Result<Response<pb::NodeInfo>, Status> {
        self.core
            .on_leader(request, drain_node, |mut c, r| async move {
                c.drain_node(r).await
            })
            .await
    }

    async fn put_snapshot_job(
        &self,
        request: Request<pb::PutSnapshotJobRequest>,
    ) -> Result<Response<pb::SnapshotJobInfo>, Status> {
        self.core
            .on_leader(request, put_snapshot_job, |mut c, r| async move {
                c.put_snapshot_job(r).await
            })
            .await
    }

    async fn get_snapshot_job(
        &self,
        request: Request<pb::GetSnapshotJobRequest>,
    ) -> Result<Response<pb::SnapshotJobInfo>, Status> {
        self.core
            .on_leader(request, get_snapshot_job, |mut c, r| async move {
                c.get_snapshot_job(r).await
            })
            .await
    }

    async fn list_snapshot_jobs(
        &self,
        request: Request<pb::ListSnapshotJobsRequest>,
    ) -> Result<Response<pb::ListSnapshotJobsResponse>, Status> {
        self.core
            .on_leader(request, list_snapshot_jobs, |mut c, r| async move {
                c.list_snapshot_jobs(r).await
            })
            .await
    }

    async fn cancel_snapshot_job(
        &self,
        request: Request<pb::GetSnapshotJobRequest>,
    ) -> Result<Response<pb::SnapshotJobInfo>, Status> {
        self.core
            .on_leader(request, cancel_snapshot_job, |mut c, r| async move {
                c.cancel_snapshot_job(r).await
            })
            .await
    }

    async fn put_api_key(
        &self,
        request: Request<pb::PutApiKeyRequest>,
    ) -> Result<Response<pb::PutApiKeyResponse>, Status> {
        let local = |core: Arc<Core>, req: pb::PutApiKeyRequest, deadline: Instant| async move {
            let key = req
                .key
                .map(convert::key_from_pb)
                .ok_or_else(|| MetaError::InvalidArgument("key is required".into()))?;
            state::validate_key(&key)?;
            let command = if key.parent_id.is_empty() {
                Command::PutApiKey { key }
            } else {
                let parent_id = key.parent_id.clone();
                Command::PutChildApiKey { key, parent_id }
            };
            core.propose(command, deadline).await?;
            Ok(pb::PutApiKeyResponse {})
        };
        self.core
            .on_leader(
                request,
                local,
                |mut c, r| async move { c.put_api_key(r).await },
            )
            .await
    }

    async fn get_cluster_state(
        &self,
        request: Request<pb::GetClusterStateRequest>,
    ) -> Result<Response<pb::ClusterState>, Status> {
        if request.get_ref().linearizable {
            let local = |core: Arc<Core>, _req: pb::GetClusterStateRequest, deadline: Instant| async move {
                core.read_index(deadline).await?;
                Ok(local_cluster_state(&core))
            };
            return self
                .core
                .on_leader(request, local, |mut c, r| async move {
                    c.get_cluster_state(r).await
                })
                .await;
        }
        let hops = self.core.check_sender(&request)?;
        if !self.core.shared.is_leader() && hops < MAX_HOPS {
            if let Some((leader, address)) = self.core.remote_leader() {
                if self.core.shared.filter.allows(leader) {
                    if let Ok(mut client) = self.core.client(&address) {
                        let deadline = Instant::now() + Duration::from_secs(1);
                        let forwarded =
                            self.core
                                .forward_request(request.into_inner(), hops, deadline);
                        if let Ok(response) = client.get_cluster_state(forwarded).await {
                            return Ok(response);
                        }
                    }
                }
            }
        }
        Ok(Response::new(local_cluster_state(&self.core)))
    }

    async fn watch_cluster_state(
        &self,
        request: Request<pb::WatchClusterStateRequest>,
    ) -> Result<Response<pb::ClusterStateChange>, Status> {
        let hops = self.core.check_sender(&request)?;
        let wait = watch::requested_wait(request.get_ref());
        let until = Instant::now() + wait;
        // Only the leader knows liveness: a follower passes the watch on when it can reach the leader, as
        // `GetClusterState` does, and otherwise answers from its own state.
        if !self.core.shared.is_leader() && hops < MAX_HOPS {
            if let Some((leader, address)) = self.core.remote_leader() {
                if self.core.shared.filter.allows(leader) {
                    if let Ok(mut client) = self.core.client(&address) {
                        let deadline = Instant::now() + wait + Duration::from_secs(1);
                        let forwarded =
                            self.core
                                .forward_request(*request.get_ref(), hops, deadline);
                        if let Ok(response) = client.watch_cluster_state(forwarded).await {
                            return Ok(response);
                        }
                    }
                }
            }
        }
        // A forward that failed late leaves only the rest of the caller's wait.
        let rest = until.saturating_duration_since(Instant::now());
        let change =
            watch::watch_local(&self.core, request.get_ref(), rest, local_cluster_state).await;
        Ok(Response::new(change))
    }

    async fn status(
        &self,
        _request: Request<pb::MetaStatusRequest>,
    ) -> Result<Response<pb::MetaStatus>, Status> {
        Ok(Response::new(crate::server::status_of(&self.core.shared)))
    }
}
