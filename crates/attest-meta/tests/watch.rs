//! `WatchClusterState` on a real 3-node group, asked through a follower (which passes it to the leader): the
//! first call answers at once, an unchanged state is held and answered without a state, a write wakes a held
//! call, and so does a node turning dead with nothing written.

use crate::common;

use std::time::Duration;

use attest_proto::v1 as pb;
use attest_proto::{FollowMode, StateFollower};
use common::{collection, shard_node, Opts, Sandbox};

/// Longer than anything below waits for, so a call that returns with a state was woken by a change.
const HELD: Duration = Duration::from_secs(20);

fn alive(state: &pb::ClusterState, id: u64) -> bool {
    state.nodes.iter().find(|n| n.id == id).unwrap().alive
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_answers_changes_and_holds_the_rest() {
    let opts = Opts {
        node_timeout_ms: 1000,
        ..Opts::default()
    };
    let sb = Sandbox::start(3, opts).await;
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let follower = sb.running().into_iter().find(|id| *id != leader).unwrap();
    let watcher = sb.client(&[follower]);
    let writer = sb.client(&[leader]);
    let a = writer.register_node(shard_node("a", "")).await.unwrap();

    // A caller holding nothing gets the whole state at once, even with the longest wait.
    let first = watcher
        .watch_cluster_state((0, 0), HELD, false)
        .await
        .unwrap();
    let state = first.state.expect("the first call carries the state");
    assert_eq!(state.version, first.version);
    assert!(state.nodes.iter().any(|n| n.id == a.id));
    let mut since = (first.version, first.liveness);

    // The leader's grace period after its election keeps every node alive: wait it out with `a` heartbeating,
    // taking whatever changes it brings, until a short watch comes back empty.
    loop {
        writer.heartbeat(a.id, vec![]).await.unwrap();
        let change = watcher
            .watch_cluster_state(since, Duration::from_millis(300), false)
            .await
            .unwrap();
        match change.state {
            Some(state) => since = (state.version, change.liveness),
            None => {
                assert_eq!(
                    (change.version, change.liveness),
                    since,
                    "unchanged: no state, the same position"
                );
                break;
            }
        }
    }

    // A write wakes a held call, which then carries the new state.
    let held = {
        let watcher = watcher.clone();
        tokio::spawn(async move { watcher.watch_cluster_state(since, HELD, false).await })
    };
    let b = writer.register_node(shard_node("b", "")).await.unwrap();
    let woken = held.await.unwrap().unwrap();
    let state = woken.state.expect("a write wakes the watch");
    assert!(state.version > since.0);
    assert!(state.nodes.iter().any(|n| n.id == b.id));
    since = (state.version, woken.liveness);

    // `a` stops heartbeating: nothing is written, yet a held call is answered once the leader counts it dead.
    // (`b` counts as alive for a node timeout after registering; its own death may wake a call first.)
    loop {
        let change = watcher
            .watch_cluster_state(since, HELD, false)
            .await
            .unwrap();
        let state = change.state.expect("only a change ends a held watch here");
        since = (state.version, change.liveness);
        if !alive(&state, a.id) {
            break;
        }
    }
    sb.shutdown().await;
}

/// A write the delta test makes.
enum Step {
    Create(pb::MetaCreateCollectionRequest),
    Key(pb::ApiKeyInfo),
    Heartbeat(u64, pb::ReplicaReport),
    Drop(&'static str),
}

/// The state without what changes with time alone (heartbeat times), for comparing two reads.
fn settled(mut state: pb::ClusterState) -> pb::ClusterState {
    for n in &mut state.nodes {
        n.last_heartbeat_ms = 0;
    }
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_kept_by_deltas_holds_what_meta_would_send_whole() {
    let sb = Sandbox::start(3, Opts::default()).await;
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let follower = sb.running().into_iter().find(|id| *id != leader).unwrap();
    let writer = sb.client(&[leader]);
    let a = writer.register_node(shard_node("a", "")).await.unwrap();
    let b = writer.register_node(shard_node("b", "")).await.unwrap();
    let mut watch = StateFollower::new(sb.client(&[follower]), FollowMode::Watch, HELD)
        .with_wait(Duration::from_millis(200));
    watch.next().await.unwrap().expect("the first state");

    // Every kind of record a delta carries, put and removed.
    let report = |segments: &[&str]| pb::ReplicaReport {
        collection: "docs".into(),
        shard: 0,
        segments: segments.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let key = |n: u8| pb::ApiKeyInfo {
        key_sha256: format!("{n:02x}").repeat(32),
        scopes: vec![pb::Scope::Read as i32],
        tenants: vec!["*".into()],
        id: format!("{n:02x}").repeat(6),
        ..Default::default()
    };
    let mut revoked = key(1);
    revoked.revoked = true;
    let steps = [
        Step::Create(collection("docs", 2, 2)),
        Step::Create(collection("gone", 1, 1)),
        Step::Key(key(1)),
        Step::Key(key(2)),
        Step::Heartbeat(a.id, report(&["s1"])),
        Step::Heartbeat(b.id, report(&["s1", "s2"])),
        Step::Drop("gone"),
        Step::Key(revoked),
        Step::Drop("docs"),
    ];
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Create(c) => drop(writer.create_collection(c.clone()).await.unwrap()),
            Step::Key(k) => writer.put_api_key(k.clone()).await.unwrap(),
            Step::Heartbeat(id, r) => drop(writer.heartbeat(*id, vec![r.clone()]).await.unwrap()),
            Step::Drop(name) => drop(writer.drop_collection(name).await.unwrap()),
        }
        let whole = settled(writer.cluster_state(true).await.unwrap());
        // The follower catches up change by change (a short wait may come back empty while it does).
        let mut held = None;
        for _ in 0..50 {
            if let Some(state) = watch.next().await.unwrap() {
                let done = state.version >= whole.version;
                held = Some(settled(state));
                if done {
                    break;
                }
            }
        }
        let held = held.unwrap_or_else(|| panic!("step {i}: no change reached the follower"));
        assert_eq!(held, whole, "step {i}: the delta-kept state differs");
    }
    assert!(
        watch.deltas_applied() >= steps.len() as u64,
        "every change after the first came as a delta ({} did)",
        watch.deltas_applied()
    );
    sb.shutdown().await;
}
