//! `GET /v1/cluster` (admin scope): the shape of the cluster as meta says — the meta voters with the Raft leader
//! and term (each voter asked directly, so an unreachable one shows), every registered node with its liveness and
//! zone, each collection's replica sets with their health, and whether a rebalance is moving replicas. It is the
//! report `attest status --json` prints too ([`cluster_json`] is shared), over HTTP, for the web console and for
//! anyone without the cluster credential.

use std::collections::HashMap;
use std::sync::Arc;

use attest_proto::v1 as pb;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::RouterError;
use crate::router::Router;

pub async fn cluster(State(r): State<Arc<Router>>) -> Result<Json<Value>, RouterError> {
    // One linearizable read: the console shows what meta has committed, not a lagging follower's copy.
    let state = r.view.refresh(true).await?;
    let each = r.view.meta().status_of_each().await;
    Ok(Json(cluster_json(&state, &each)))
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

/// The report: `leader`, `term`, `commit_index`, `state_version`, `meta` (each voter's own status), `voters`,
/// `nodes`, `collections` (each shard's replicas, serving count and `health` ok / degraded / down) and
/// `rebalancing` (the replica moves under way: a joining copy or a leaving one).
pub fn cluster_json(
    state: &pb::ClusterState,
    meta: &[(String, Result<pb::MetaStatus, tonic::Status>)],
) -> Value {
    let leader_status = meta
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .filter(|s| s.leader_id != 0)
        .max_by_key(|s| s.term);
    let alive: HashMap<u64, bool> = state.nodes.iter().map(|n| (n.id, n.alive)).collect();
    let is_alive = |node: u64| alive.get(&node).copied().unwrap_or(false);
    let mut moving = Vec::new();
    let collections: Vec<Value> = state
        .collections
        .iter()
        .map(|c| {
            let shards: Vec<Value> = c
                .placement
                .iter()
                .map(|p| {
                    let serving = p
                        .replicas
                        .iter()
                        .filter(|r| r.state != pb::ReplicaState::Joining as i32 && is_alive(r.node_id))
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
                        moving.push(json!({"collection": c.name, "shard": p.shard, "node": r.node_id,
                            "state": replica_state_name(r.state)}));
                    }
                    json!({
                        "shard": p.shard, "health": health, "serving_replicas": serving,
                        "replicas": p.replicas.iter().map(|r| json!({
                            "node": r.node_id, "state": replica_state_name(r.state), "alive": is_alive(r.node_id),
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({"name": c.name, "shards": c.shards, "replication": c.replication, "placement": shards})
        })
        .collect();
    json!({
        "leader": leader_status.map(|s| s.leader_id).unwrap_or(state.leader_id),
        "term": leader_status.map(|s| s.term).unwrap_or(0),
        "commit_index": leader_status.map(|s| s.commit_index).unwrap_or(0),
        "state_version": state.version,
        "meta": meta.iter().map(|(addr, s)| match s {
            Ok(s) => json!({"address": addr, "id": s.id, "raft_role": s.raft_role, "term": s.term,
                "leader": s.leader_id, "commit_index": s.commit_index, "applied_index": s.applied_index,
                "voters": s.voters.iter().map(|v| v.id).collect::<Vec<_>>(), "reachable": true}),
            Err(e) => json!({"address": addr, "reachable": false, "error": e.message()}),
        }).collect::<Vec<_>>(),
        "voters": state.meta_voters.iter().map(|v| json!({"id": v.id, "address": v.address})).collect::<Vec<_>>(),
        "nodes": state.nodes.iter().map(|n| json!({
            "id": n.id, "name": n.name, "address": n.address, "role": role_name(n.role), "zone": n.zone,
            "alive": n.alive, "last_heartbeat_ms": n.last_heartbeat_ms, "draining": drain_name(n.draining),
        })).collect::<Vec<_>>(),
        "collections": collections,
        "rebalancing": moving,
    })
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
