//! Membership: a one-node group that grows by `AddMetaNode` joins, and a three-node group that grows to
//! five and then removes a follower and its leader with `RemoveMetaNode`.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use attest_proto::v1 as pb;
use common::{collection, replicated, shard_node, Opts, Sandbox};

fn voters(sb: &Sandbox, id: u64) -> BTreeSet<u64> {
    sb.node(id).status().voters.iter().map(|v| v.id).collect()
}

/// Every running node reports `expected` as voters and holds the same replicated state.
fn converged(sb: &Sandbox, expected: &BTreeSet<u64>) -> bool {
    let states: BTreeSet<String> = sb
        .nodes
        .values()
        .map(|n| replicated(&n.cluster_state()))
        .collect();
    states.len() == 1 && sb.running().iter().all(|id| voters(sb, *id) == *expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_cluster_serves_and_grows_by_join() {
    let mut sb = Sandbox::start(1, Opts::default()).await;
    assert_eq!(sb.wait_leader(Duration::from_secs(5)).await, 1);
    let mut on_one = sb.grpc(1);
    on_one.register_node(shard_node("s1", "")).await.unwrap();
    on_one
        .create_collection(collection("solo", 2, 1))
        .await
        .unwrap();
    let state = on_one
        .get_cluster_state(pb::GetClusterStateRequest { linearizable: true })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.collections.len(), 1);
    assert_eq!(state.leader_id, 1);

    sb.join(2, 1).await;
    sb.wait_until(
        Duration::from_secs(10),
        "node 2 joined and caught up",
        |sb| converged(sb, &BTreeSet::from([1, 2])),
    )
    .await;
    assert!(
        sb.node(2).snapshots_installed() >= 1,
        "a joining node is caught up by snapshot first"
    );

    // Node 3 joins through follower 2, which forwards AddMetaNode to the leader.
    sb.join(3, 2).await;
    sb.wait_until(
        Duration::from_secs(10),
        "node 3 joined and caught up",
        |sb| converged(sb, &BTreeSet::from([1, 2, 3])),
    )
    .await;
    // A joined node restarts from its own store like any other.
    sb.stop(2).await;
    sb.restart(2).await;
    sb.grpc(3)
        .create_collection(collection("grown", 1, 1))
        .await
        .unwrap();
    sb.wait_until(
        Duration::from_secs(5),
        "the write through node 3 is everywhere",
        |sb| {
            sb.nodes.values().all(|n| {
                n.cluster_state()
                    .collections
                    .iter()
                    .any(|c| c.name == "grown")
            })
        },
    )
    .await;
    sb.assert_no_split_brain();
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_voters_by_join_then_remove_a_follower_and_the_leader() {
    let mut sb = Sandbox::start(3, Opts::default()).await;
    sb.wait_leader(Duration::from_secs(10)).await;
    let client = sb.client(&[1, 2, 3]);
    client.register_node(shard_node("s1", "")).await.unwrap();
    client
        .create_collection(collection("c", 1, 1))
        .await
        .unwrap();

    sb.join(4, 1).await;
    sb.join(5, 3).await;
    let all = BTreeSet::from([1, 2, 3, 4, 5]);
    sb.wait_until(Duration::from_secs(15), "five voters in agreement", |sb| {
        converged(sb, &all)
    })
    .await;
    client
        .create_collection(collection("with-five", 1, 1))
        .await
        .unwrap();

    // Remove a follower.
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let victim = sb.running().into_iter().find(|id| *id != leader).unwrap();
    let after: BTreeSet<u64> = client
        .remove_meta_node(victim)
        .await
        .unwrap()
        .iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(after.len(), 4);
    assert!(!after.contains(&victim));
    sb.stop(victim).await;

    // Remove the leader itself: it hands leadership over, then the new leader removes it.
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let remaining = sb
        .grpc(leader)
        .remove_meta_node(pb::RemoveMetaNodeRequest { id: leader })
        .await
        .unwrap()
        .into_inner();
    let remaining: BTreeSet<u64> = remaining.voters.iter().map(|p| p.id).collect();
    assert_eq!(remaining.len(), 3);
    assert!(!remaining.contains(&leader));
    sb.stop(leader).await;

    let new_leader = sb.wait_leader(Duration::from_secs(10)).await;
    assert!(remaining.contains(&new_leader));
    let survivors: Vec<u64> = remaining.iter().copied().collect();
    sb.client(&survivors)
        .create_collection(collection("after-removal", 1, 1))
        .await
        .unwrap();
    sb.wait_until(Duration::from_secs(10), "the three survivors agree", |sb| {
        converged(sb, &remaining)
            && sb.nodes.values().all(|n| {
                n.cluster_state()
                    .collections
                    .iter()
                    .any(|c| c.name == "after-removal")
            })
    })
    .await;
    sb.assert_no_split_brain();
    sb.shutdown().await;
}
