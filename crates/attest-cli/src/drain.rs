//! `attest cluster drain`: takes a shard node out of service through meta (see `attest_meta::drain` for what
//! a drain means to placement and routers).
//!
//! In Kubernetes the shard pod's preStop hook runs `attest cluster drain --node $POD_NAME --wait`: routers turn
//! to the node's peers before the process gets SIGTERM, and the hook returns once every shard the node holds is
//! served by a live peer (a peer still restarting from the previous step of a rolling update is waited for; a
//! shard with no other replica at all is reported, not waited for: nothing would change). Before a scale-in,
//! `--move --wait` returns once the node holds no replica.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use serde_json::{json, Value};

use attest_api::router::cluster_http::drain_name;

use crate::cli::DrainArgs;
use attest_node::plumbing::meta_client;

/// How often the wait re-reads the cluster state.
const POLL: Duration = Duration::from_millis(500);

/// Where a drained node's replicas stand in one cluster state.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DrainProgress {
    /// Replicas the node holds (any state).
    pub held: usize,
    /// Its ACTIVE replicas of shards with no move in flight: what a rebalance can still move away.
    pub movable: usize,
    /// `collection/shard` whose other replicas exist but none serves yet (down, joining or draining).
    pub unserved: Vec<String>,
    /// `collection/shard` with no other replica at all (replication 1): unavailable while the node is down.
    pub no_peer: Vec<String>,
}

impl DrainProgress {
    pub fn of(state: &pb::ClusterState, node: u64) -> DrainProgress {
        let serving_nodes: BTreeSet<u64> = state
            .nodes
            .iter()
            .filter(|n| n.alive && n.draining == pb::NodeDrain::None as i32)
            .map(|n| n.id)
            .collect();
        let mut progress = DrainProgress::default();
        for c in &state.collections {
            for shard in &c.placement {
                let Some(own) = shard.replicas.iter().find(|r| r.node_id == node) else {
                    continue;
                };
                let name = format!("{}/{}", c.name, shard.shard);
                progress.held += 1;
                let in_flight = shard
                    .replicas
                    .iter()
                    .any(|r| r.state != pb::ReplicaState::Active as i32);
                if own.state == pb::ReplicaState::Active as i32 && !in_flight {
                    progress.movable += 1;
                }
                let others: Vec<&pb::ReplicaPlacement> = shard
                    .replicas
                    .iter()
                    .filter(|r| r.node_id != node)
                    .collect();
                let served = others.iter().any(|r| {
                    r.state != pb::ReplicaState::Joining as i32
                        && serving_nodes.contains(&r.node_id)
                });
                if others.is_empty() {
                    progress.no_peer.push(name);
                } else if !served {
                    progress.unserved.push(name);
                }
            }
        }
        progress
    }
}

/// `attest cluster drain`.
pub async fn drain(args: DrainArgs) -> anyhow::Result<()> {
    let meta = meta_client(
        &args.meta,
        attest_node::plumbing::security::node_credential(&crate::node_args::credentials(
            &args.node_credential,
        ))?,
    )?;
    let kind = if args.undo {
        pb::NodeDrain::None
    } else if args.move_replicas {
        pb::NodeDrain::Decommission
    } else {
        pb::NodeDrain::Restart
    };
    let started = Instant::now();
    let node = meta
        .drain_node(&args.node, kind)
        .await
        .map_err(|e| anyhow::anyhow!("drain of {:?} refused: {}", args.node, e.message()))?;
    let mut progress = DrainProgress::of(&meta.cluster_state(true).await?, node.id);
    if args.wait {
        let deadline = started + Duration::from_secs(args.timeout_secs);
        loop {
            let done = if args.move_replicas {
                progress.held == 0
            } else {
                progress.unserved.is_empty()
            };
            if done {
                break;
            }
            if args.move_replicas && progress.movable > 0 {
                let moves = meta
                    .rebalance(false)
                    .await
                    .map_err(|e| anyhow::anyhow!("rebalance refused: {}", e.message()))?;
                let moving_off = moves.iter().any(|m| m.from_node == node.id);
                if !moving_off && progress.movable == progress.held {
                    anyhow::bail!(
                        "no shard node can take the replicas of {:?} (each shard needs a live node without a copy \
                         of it that is not draining); add a node or lower the replication first",
                        args.node
                    );
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "timed out after {}s: {:?} still holds {} replicas; unserved: {:?} (the drain stays in place)",
                args.timeout_secs,
                args.node,
                progress.held,
                progress.unserved
            );
            tokio::time::sleep(POLL).await;
            progress = DrainProgress::of(&meta.cluster_state(true).await?, node.id);
        }
        tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
    }
    let report = json!({
        "node": node.name,
        "id": node.id,
        "draining": drain_name(kind as i32),
        "replicas": progress.held,
        "unserved": progress.unserved,
        "no_peer": progress.no_peer,
        "waited_ms": if args.wait { started.elapsed().as_millis() as u64 } else { 0 },
    });
    print_report(&report, args.json)
}

fn print_report(report: &Value, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    let name = report["node"].as_str().unwrap_or("");
    match report["draining"].as_str() {
        Some("none") => {
            println!("{name}: drain ended; it serves reads and receives replicas again")
        }
        Some(kind) => println!(
            "{name}: draining ({kind}); holds {} replicas",
            report["replicas"]
        ),
        None => {}
    }
    for shard in report["no_peer"].as_array().into_iter().flatten() {
        println!(
            "  warning: {} has no other replica: unavailable while {name} is down",
            shard.as_str().unwrap_or("")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u64, alive: bool, drain: pb::NodeDrain) -> pb::NodeInfo {
        pb::NodeInfo {
            id,
            alive,
            draining: drain as i32,
            role: pb::NodeRole::Shard as i32,
            ..Default::default()
        }
    }

    fn shard(n: u32, replicas: &[(u64, pb::ReplicaState)]) -> pb::ShardPlacement {
        pb::ShardPlacement {
            shard: n,
            replicas: replicas
                .iter()
                .map(|(id, s)| pb::ReplicaPlacement {
                    node_id: *id,
                    state: *s as i32,
                })
                .collect(),
        }
    }

    #[test]
    fn progress_tells_served_unserved_and_peerless_shards_apart() {
        use pb::ReplicaState::{Active, Joining, Leaving};
        let state = pb::ClusterState {
            nodes: vec![
                node(1, true, pb::NodeDrain::Restart),
                node(2, true, pb::NodeDrain::None),
                node(3, false, pb::NodeDrain::None),
                node(4, true, pb::NodeDrain::Decommission),
            ],
            collections: vec![pb::CollectionMeta {
                name: "c".into(),
                placement: vec![
                    shard(0, &[(1, Active), (2, Active)]),
                    shard(1, &[(1, Active), (3, Active)]),
                    shard(2, &[(1, Active)]),
                    shard(3, &[(1, Leaving), (2, Joining)]),
                    shard(4, &[(1, Active), (4, Active)]),
                    shard(5, &[(2, Active), (3, Active)]),
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let p = DrainProgress::of(&state, 1);
        assert_eq!(p.held, 5);
        assert_eq!(p.movable, 4, "shard 3 has a move in flight");
        assert_eq!(p.unserved, vec!["c/1", "c/3", "c/4"]);
        assert_eq!(p.no_peer, vec!["c/2"]);
        assert_eq!(DrainProgress::of(&state, 9), DrainProgress::default());
    }
}
