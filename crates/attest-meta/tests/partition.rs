//! Partitions over real sockets with the transport filter: an isolated follower, an isolated leader, and a
//! follower that lags behind a compacted log and must install a snapshot.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use attest_proto::v1 as pb;
use common::{collection, replicated, shard_node, timed, Opts, Sandbox};
use tonic::Code;

fn has_collection(state: &pb::ClusterState, name: &str) -> bool {
    state.collections.iter().any(|c| c.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_follower_refuses_writes_while_the_majority_continues() {
    let opts = Opts::default();
    let write_timeout = Duration::from_millis(opts.write_timeout_ms);
    let sb = Sandbox::start(3, opts).await;
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let followers: Vec<u64> = sb
        .running()
        .into_iter()
        .filter(|id| *id != leader)
        .collect();
    let (isolated, other) = (followers[0], followers[1]);
    let mut on_leader = sb.grpc(leader);
    on_leader.register_node(shard_node("s1", "")).await.unwrap();
    on_leader.register_node(shard_node("s2", "")).await.unwrap();
    let leader_term = sb.node(leader).status().term;
    let isolated_term = sb.node(isolated).status().term;

    sb.node(isolated).filter().isolate();

    // The majority keeps accepting writes, on the leader and forwarded by the other follower.
    for i in 0..5 {
        on_leader
            .create_collection(collection(&format!("maj{i}"), 1, 2))
            .await
            .unwrap();
    }
    sb.grpc(other)
        .create_collection(collection("via-other", 1, 2))
        .await
        .unwrap();

    // The isolated node refuses, within the deadline, and never reports success.
    let mut on_isolated = sb.grpc(isolated);
    let (result, took) = timed(on_isolated.create_collection(collection("minority", 1, 2))).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(
        took <= write_timeout + Duration::from_millis(1500),
        "took {took:?}"
    );
    let err = on_isolated
        .get_cluster_state(pb::GetClusterStateRequest { linearizable: true })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");

    // It never becomes a leader, and pre-vote keeps its term where it was.
    for _ in 0..50 {
        assert!(!sb.node(isolated).is_leader());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sb.node(isolated).status().term, isolated_term);

    sb.node(isolated).filter().heal();
    sb.wait_until(
        Duration::from_secs(10),
        "the healed follower catches up",
        |sb| has_collection(&sb.node(isolated).cluster_state(), "via-other"),
    )
    .await;
    for n in sb.nodes.values() {
        assert!(!has_collection(&n.cluster_state(), "minority"));
    }
    // Healing did not disturb the leader (no term bump from the isolated node).
    assert_eq!(sb.agreed_leader(), Some(leader));
    assert_eq!(sb.node(leader).status().term, leader_term);
    sb.assert_no_split_brain();
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_leader_steps_down_and_the_majority_elects_a_new_one() {
    let opts = Opts::default();
    let write_timeout = Duration::from_millis(opts.write_timeout_ms);
    let sb = Sandbox::start(3, opts).await;
    let old = sb.wait_leader(Duration::from_secs(10)).await;
    let old_term = sb.node(old).status().term;
    let mut on_old = sb.grpc(old);
    on_old.register_node(shard_node("s1", "")).await.unwrap();
    on_old.register_node(shard_node("s2", "")).await.unwrap();

    sb.node(old).filter().isolate();
    // A write on the isolated leader is appended but can never commit.
    let mut client = on_old.clone();
    let minority_write =
        tokio::spawn(
            async move { timed(client.create_collection(collection("minority", 1, 2))).await },
        );

    sb.wait_until(
        Duration::from_secs(10),
        "the majority elects a new leader",
        |sb| sb.agreed_leader().is_some_and(|l| l != old),
    )
    .await;
    let new = sb.agreed_leader().unwrap();
    assert!(sb.node(new).status().term > old_term);
    sb.grpc(new)
        .create_collection(collection("majority", 1, 2))
        .await
        .unwrap();

    let (result, took) = minority_write.await.unwrap();
    let err = result.unwrap_err();
    // Not committed in time (DEADLINE_EXCEEDED: it may still be applied, as far as the caller can tell), or
    // dropped when the leader stepped down (UNAVAILABLE); never a success.
    assert!(
        matches!(err.code(), Code::DeadlineExceeded | Code::Unavailable),
        "{err}"
    );
    assert!(
        took <= write_timeout + Duration::from_millis(1500),
        "took {took:?}"
    );

    // check_quorum: the isolated old leader steps down on its own.
    sb.wait_until(
        Duration::from_secs(5),
        "the isolated leader steps down",
        |sb| !sb.node(old).is_leader(),
    )
    .await;
    let err = on_old
        .create_collection(collection("minority2", 1, 2))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");

    sb.node(old).filter().heal();
    sb.wait_until(
        Duration::from_secs(10),
        "the old leader follows the new one",
        |sb| {
            let s = sb.node(old).status();
            s.leader_id == new && has_collection(&sb.node(old).cluster_state(), "majority")
        },
    )
    .await;
    // Its uncommitted entry was replaced: the minority write exists nowhere.
    for n in sb.nodes.values() {
        let names: BTreeSet<String> = n
            .cluster_state()
            .collections
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert!(
            !names.contains("minority") && !names.contains("minority2"),
            "{names:?}"
        );
    }
    sb.assert_no_split_brain();
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_follower_catches_up_by_installing_a_snapshot() {
    let opts = Opts {
        snapshot_threshold: 20,
        ..Opts::default()
    };
    let sb = Sandbox::start(3, opts).await;
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let lagging = sb.running().into_iter().find(|id| *id != leader).unwrap();
    let mut on_leader = sb.grpc(leader);
    on_leader.register_node(shard_node("s1", "")).await.unwrap();
    on_leader.register_node(shard_node("s2", "")).await.unwrap();
    sb.wait_until(Duration::from_secs(5), "the follower is caught up", |sb| {
        sb.node(lagging).cluster_state().nodes.len() == 2
    })
    .await;
    let snapshots_before = sb.node(lagging).snapshots_installed();
    let applied_before = sb.node(lagging).status().applied_index;

    sb.node(lagging).filter().isolate();
    for i in 0..60 {
        on_leader
            .register_node(shard_node(&format!("n{i}"), ""))
            .await
            .unwrap();
    }
    on_leader
        .create_collection(collection("docs", 4, 2))
        .await
        .unwrap();
    assert_eq!(sb.node(lagging).status().applied_index, applied_before);

    sb.node(lagging).filter().heal();
    sb.wait_until(
        Duration::from_secs(10),
        "the lagging follower converges",
        |sb| {
            replicated(&sb.node(lagging).cluster_state())
                == replicated(&sb.node(leader).cluster_state())
        },
    )
    .await;
    assert!(
        sb.node(lagging).snapshots_installed() > snapshots_before,
        "the entries it missed were compacted: it must have installed a snapshot"
    );
    // And it follows the log again after the snapshot.
    on_leader
        .create_collection(collection("after", 1, 2))
        .await
        .unwrap();
    sb.wait_until(Duration::from_secs(5), "the next write reaches it", |sb| {
        has_collection(&sb.node(lagging).cluster_state(), "after")
    })
    .await;
    sb.assert_no_split_brain();
    sb.shutdown().await;
}
