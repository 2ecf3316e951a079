//! `GET /v1/cluster` (admin scope): the shape of the cluster as meta says — the meta voters with the Raft leader
//! and term (each voter asked directly, so an unreachable one shows), every registered node with its liveness and
//! zone, each collection's replica sets with their health, and whether a rebalance is moving replicas. It is the
//! report `attest status --json` prints too ([`cluster_json`] is shared), over HTTP, for the web console and for
//! anyone without the cluster credential.

use std::collections::HashMap;
use std::sync::Arc;

use attest_auth::Principal;
use attest_proto::v1 as pb;
use attest_router::collection::record_from_meta;
use attest_router::error::RouterError;
use attest_router::router::Router;
use attest_telemetry::request_id::RequestId;
use axum::extract::State;
use axum::{Extension, Json};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// The cluster as meta says: voters, nodes, placement and health, moves under way.
#[utoipa::path(get, path = "/v1/cluster", tag = "cluster", operation_id = "cluster",
    security(("bearer_auth" = ["admin"])),
    responses((status = 200, description = "The cluster report.", body = ClusterReport)))]
pub async fn cluster(
    State(r): State<Arc<Router>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    Extension(p): Extension<Principal>,
) -> Result<Json<ClusterReport>, RouterError> {
    // One linearizable read: the console shows what meta has committed, not a lagging follower's copy.
    let mut state = r.view().refresh(true).await?;
    // A key limited in collections or tenants sees only the collections it could administer (issue 69).
    if !p.unrestricted() {
        let mut shown = Vec::with_capacity(state.collections.len());
        for c in std::mem::take(&mut state.collections) {
            let rec = record_from_meta(&c);
            if attest_router::tenant_scope::administers(r.collections(), &p, &rec, &rid).await {
                shown.push(c);
            }
        }
        state.collections = shown;
    }
    let each = r.view().meta().status_of_each().await;
    Ok(Json(cluster_report(&state, &each)))
}

/// The report of `GET /v1/cluster` and `attest status --json`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterReport {
    /// The Raft leader's meta id, as the voter with the highest term says (else the state's).
    pub leader: u64,
    pub term: u64,
    pub commit_index: u64,
    /// The Raft index of the state read.
    pub state_version: u64,
    /// Each meta voter's own status (each asked directly, so an unreachable one shows).
    pub meta: Vec<MetaMember>,
    pub voters: Vec<Voter>,
    pub nodes: Vec<NodeReport>,
    pub collections: Vec<CollectionPlacement>,
    /// The replica moves under way: a joining copy or a leaving one.
    pub rebalancing: Vec<ReplicaMove>,
}

/// A meta voter as it answered (`reachable`), or the error asking it gave.
#[derive(Debug, Serialize, ToSchema)]
pub struct MetaMember {
    pub address: String,
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// `leader`, `follower`, `candidate`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raft_role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub term: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voters: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Voter {
    pub id: u64,
    pub address: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeReport {
    pub id: u64,
    pub name: String,
    pub address: String,
    /// `shard`, `router`, `answer`, `unknown`.
    pub role: &'static str,
    pub zone: String,
    pub alive: bool,
    pub last_heartbeat_ms: u64,
    /// `none`, `restart`, `decommission`.
    pub draining: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CollectionPlacement {
    pub name: String,
    pub shards: u32,
    pub replication: u32,
    pub placement: Vec<ShardHealth>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ShardHealth {
    pub shard: u32,
    /// `ok`, `degraded` (fewer serving replicas than the replication) or `down` (none).
    pub health: &'static str,
    pub serving_replicas: usize,
    pub replicas: Vec<ReplicaReport>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReplicaReport {
    pub node: u64,
    /// `active`, `joining`, `leaving`, `unknown`.
    pub state: &'static str,
    pub alive: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReplicaMove {
    pub collection: String,
    pub shard: u32,
    pub node: u64,
    /// `joining` or `leaving`.
    pub state: &'static str,
}

fn role_name(role: i32) -> &'static str {
    match pb::NodeRole::try_from(role).unwrap_or(pb::NodeRole::Unspecified) {
        pb::NodeRole::Shard => "shard",
        pb::NodeRole::Router => "router",
        pb::NodeRole::Answer => "answer",
        pb::NodeRole::Unspecified => "unknown",
    }
}

/// A node's drain as reports name it (`none`, `restart`, `decommission`).
pub fn drain_name(drain: i32) -> &'static str {
    match pb::NodeDrain::try_from(drain).unwrap_or(pb::NodeDrain::None) {
        pb::NodeDrain::None => "none",
        pb::NodeDrain::Restart => "restart",
        pb::NodeDrain::Decommission => "decommission",
    }
}

fn replica_state_name(state: i32) -> &'static str {
    match pb::ReplicaState::try_from(state).unwrap_or(pb::ReplicaState::Unspecified) {
        pb::ReplicaState::Active => "active",
        pb::ReplicaState::Joining => "joining",
        pb::ReplicaState::Leaving => "leaving",
        pb::ReplicaState::Unspecified => "unknown",
    }
}

/// [`cluster_report`] as JSON (what `attest status` reads its fields from).
pub fn cluster_json(
    state: &pb::ClusterState,
    meta: &[(String, Result<pb::MetaStatus, tonic::Status>)],
) -> Value {
    serde_json::to_value(cluster_report(state, meta)).unwrap_or(Value::Null)
}

/// The report of the cluster `state` and each meta voter's answer (`meta`).
pub fn cluster_report(
    state: &pb::ClusterState,
    meta: &[(String, Result<pb::MetaStatus, tonic::Status>)],
) -> ClusterReport {
    let leader_status = meta
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .filter(|s| s.leader_id != 0)
        .max_by_key(|s| s.term);
    let alive: HashMap<u64, bool> = state.nodes.iter().map(|n| (n.id, n.alive)).collect();
    let is_alive = |node: u64| alive.get(&node).copied().unwrap_or(false);
    let mut rebalancing = Vec::new();
    let collections = state
        .collections
        .iter()
        .map(|c| {
            let placement = c
                .placement
                .iter()
                .map(|p| {
                    let serving = p
                        .replicas
                        .iter()
                        .filter(|r| {
                            r.state != pb::ReplicaState::Joining as i32 && is_alive(r.node_id)
                        })
                        .count();
                    let health = match serving {
                        0 => "down",
                        n if n < c.replication as usize => "degraded",
                        _ => "ok",
                    };
                    for r in p.replicas.iter().filter(|r| {
                        r.state == pb::ReplicaState::Joining as i32
                            || r.state == pb::ReplicaState::Leaving as i32
                    }) {
                        rebalancing.push(ReplicaMove {
                            collection: c.name.clone(),
                            shard: p.shard,
                            node: r.node_id,
                            state: replica_state_name(r.state),
                        });
                    }
                    ShardHealth {
                        shard: p.shard,
                        health,
                        serving_replicas: serving,
                        replicas: p
                            .replicas
                            .iter()
                            .map(|r| ReplicaReport {
                                node: r.node_id,
                                state: replica_state_name(r.state),
                                alive: is_alive(r.node_id),
                            })
                            .collect(),
                    }
                })
                .collect();
            CollectionPlacement {
                name: c.name.clone(),
                shards: c.shards,
                replication: c.replication,
                placement,
            }
        })
        .collect();
    let member = |(address, status): &(String, Result<pb::MetaStatus, tonic::Status>)| {
        let mut m = MetaMember {
            address: address.clone(),
            reachable: status.is_ok(),
            id: None,
            raft_role: None,
            term: None,
            leader: None,
            commit_index: None,
            applied_index: None,
            voters: None,
            error: None,
        };
        match status {
            Ok(s) => {
                m.id = Some(s.id);
                m.raft_role = Some(s.raft_role.clone());
                m.term = Some(s.term);
                m.leader = Some(s.leader_id);
                m.commit_index = Some(s.commit_index);
                m.applied_index = Some(s.applied_index);
                m.voters = Some(s.voters.iter().map(|v| v.id).collect());
            }
            Err(e) => m.error = Some(e.message().to_string()),
        }
        m
    };
    ClusterReport {
        leader: leader_status.map_or(state.leader_id, |s| s.leader_id),
        term: leader_status.map_or(0, |s| s.term),
        commit_index: leader_status.map_or(0, |s| s.commit_index),
        state_version: state.version,
        meta: meta.iter().map(member).collect(),
        voters: state
            .meta_voters
            .iter()
            .map(|v| Voter {
                id: v.id,
                address: v.address.clone(),
            })
            .collect(),
        nodes: state
            .nodes
            .iter()
            .map(|n| NodeReport {
                id: n.id,
                name: n.name.clone(),
                address: n.address.clone(),
                role: role_name(n.role),
                zone: n.zone.clone(),
                alive: n.alive,
                last_heartbeat_ms: n.last_heartbeat_ms,
                draining: drain_name(n.draining),
            })
            .collect(),
        collections,
        rebalancing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joining_replica_is_a_move_under_way_and_a_dead_node_degrades_its_shard() {
        let replica = |node_id, state: pb::ReplicaState| pb::ReplicaPlacement {
            node_id,
            state: state as i32,
        };
        let node = |id, alive| pb::NodeInfo {
            id,
            alive,
            role: pb::NodeRole::Shard as i32,
            zone: format!("z{id}"),
            ..Default::default()
        };
        let state = pb::ClusterState {
            version: 7,
            nodes: vec![node(1, true), node(2, false), node(3, true)],
            collections: vec![pb::CollectionMeta {
                name: "docs".into(),
                shards: 1,
                replication: 2,
                placement: vec![pb::ShardPlacement {
                    shard: 0,
                    replicas: vec![
                        replica(1, pb::ReplicaState::Active),
                        replica(2, pb::ReplicaState::Active),
                        replica(3, pb::ReplicaState::Joining),
                    ],
                }],
                ..Default::default()
            }],
            leader_id: 1,
            ..Default::default()
        };
        let status = pb::MetaStatus {
            id: 1,
            leader_id: 1,
            term: 4,
            raft_role: "leader".into(),
            ..Default::default()
        };
        let out = cluster_json(
            &state,
            &[
                ("http://m1".into(), Ok(status)),
                ("http://m2".into(), Err(tonic::Status::unavailable("down"))),
            ],
        );
        assert_eq!(
            (out["leader"].as_u64(), out["term"].as_u64()),
            (Some(1), Some(4))
        );
        assert_eq!(out["meta"][1]["reachable"], false);
        let shard = &out["collections"][0]["placement"][0];
        assert_eq!(
            (shard["health"].as_str(), shard["serving_replicas"].as_u64()),
            (Some("degraded"), Some(1))
        );
        assert_eq!(out["rebalancing"][0]["node"], 3);
        assert_eq!(out["nodes"][1]["zone"], "z2");
        assert_eq!(out["nodes"][1]["draining"], "none");
    }
}
