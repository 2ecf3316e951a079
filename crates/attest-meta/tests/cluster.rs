//! A 3-node meta cluster in one process: election, forwarded writes, linearizable reads on followers,
//! heartbeats and liveness, leader failover, and a full restart from the same data directories.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use common::{collection, replicated, shard_node, timed, Opts, Sandbox};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_forward_writes_and_read_linearizably() {
    let sb = Sandbox::start(3, Opts::default()).await;
    let leader = sb.wait_leader(Duration::from_secs(10)).await;
    let followers: Vec<u64> = sb
        .running()
        .into_iter()
        .filter(|id| *id != leader)
        .collect();
    let (writer, reader) = (followers[0], followers[1]);

    // Every write below goes to a follower, which forwards it to the leader.
    let mut via_follower = sb.grpc(writer);
    let mut ids = Vec::new();
    for (name, zone) in [("s1", "a"), ("s2", "b"), ("s3", "a"), ("s4", "b")] {
        let node = via_follower
            .register_node(shard_node(name, zone))
            .await
            .unwrap()
            .into_inner()
            .node
            .unwrap();
        ids.push(node.id);
    }
    assert_eq!(ids, vec![1, 2, 3, 4], "ids are allocated monotonically");
    let again = via_follower
        .register_node(shard_node("s1", "a"))
        .await
        .unwrap()
        .into_inner()
        .node
        .unwrap();
    assert_eq!(again.id, 1, "the same name keeps its id");

    let created = via_follower
        .create_collection(collection("docs", 4, 2))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.placement.len(), 4);
    for shard in &created.placement {
        let nodes: BTreeSet<u64> = shard.replicas.iter().map(|r| r.node_id).collect();
        assert_eq!(nodes.len(), 2, "two replicas on distinct nodes: {shard:?}");
        // s1/s3 are in zone a, s2/s4 in zone b: one replica per zone.
        let zones: BTreeSet<u64> = nodes.iter().map(|id| id % 2).collect();
        assert_eq!(zones.len(), 2, "replicas spread over zones: {shard:?}");
    }
    sb.wait_until(Duration::from_secs(5), "docs applied on every node", |sb| {
        sb.nodes.values().all(|n| {
            n.cluster_state()
                .collections
                .iter()
                .any(|c| c.name == "docs")
        })
    })
    .await;

    // A linearizable read on the other follower sees the write acknowledged just before, every time.
    let mut on_reader = sb.grpc(reader);
    for i in 0..5 {
        let name = format!("lin{i}");
        via_follower
            .create_collection(collection(&name, 1, 2))
            .await
            .unwrap();
        let state = on_reader
            .get_cluster_state(pb::GetClusterStateRequest { linearizable: true })
            .await
            .unwrap()
            .into_inner();
        assert!(
            state.collections.iter().any(|c| c.name == name),
            "linearizable read missed {name}"
        );
        assert_eq!(state.leader_id, leader);
    }

    for id in sb.running() {
        let status = sb
            .grpc(id)
            .status(pb::MetaStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.id, id);
        assert_eq!(status.leader_id, leader);
        assert_eq!(status.voters.len(), 3);
        let role = if id == leader { "leader" } else { "follower" };
        assert_eq!(status.raft_role, role);
        assert!(status.commit_index >= status.applied_index.min(status.commit_index));
    }

    // Refusals come back with their own codes through the forwarding follower.
    let err = via_follower
        .create_collection(collection("docs", 1, 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists, "{err}");
    let err = via_follower
        .create_collection(collection("bad name!", 1, 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let err = via_follower
        .create_collection(collection("wide", 1, 5))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");

    sb.assert_no_split_brain();
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_drive_liveness_manifests_and_placement() {
    let opts = Opts {
        node_timeout_ms: 1000,
        ..Opts::default()
    };
    let sb = Sandbox::start(1, opts).await;
    sb.wait_leader(Duration::from_secs(5)).await;
    let client = sb.client(&[1]);
    let a = client.register_node(shard_node("a", "")).await.unwrap();
    let b = client.register_node(shard_node("b", "")).await.unwrap();
    client
        .create_collection(collection("docs", 2, 2))
        .await
        .unwrap();

    let mut report = pb::ReplicaReport {
        collection: "docs".into(),
        shard: 0,
        live_documents: 5,
        segments: vec!["seg-1".into()],
        last_seq: 9,
    };
    let v1 = client.heartbeat(a.id, vec![report.clone()]).await.unwrap();
    let v2 = client.heartbeat(a.id, vec![report.clone()]).await.unwrap();
    assert_eq!(
        v1.state_version, v2.state_version,
        "an unchanged manifest is not proposed again"
    );
    // `a` keeps heartbeating past the node timeout (and the leader's grace period); `b` stays silent.
    let until = Instant::now() + Duration::from_millis(1600);
    while Instant::now() < until {
        client.heartbeat(a.id, vec![report.clone()]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let state = client.cluster_state(true).await.unwrap();
    let info = |id| state.nodes.iter().find(|n| n.id == id).unwrap().clone();
    assert!(info(a.id).alive && info(a.id).last_heartbeat_ms > 0);
    assert!(
        !info(b.id).alive,
        "b missed its heartbeats: {:?}",
        info(b.id)
    );
    assert_eq!(state.manifests.len(), 1);
    assert_eq!(state.manifests[0].segments, vec!["seg-1".to_string()]);

    report.segments.push("seg-2".into());
    let v3 = client.heartbeat(a.id, vec![report]).await.unwrap();
    assert!(
        v3.state_version > v2.state_version,
        "a changed manifest is proposed"
    );
    let state = client.cluster_state(false).await.unwrap();
    assert_eq!(state.manifests[0].segments.len(), 2);

    // Placement uses live shard nodes only.
    let err = client
        .create_collection(collection("two", 1, 2))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    let one = client
        .create_collection(collection("one", 3, 1))
        .await
        .unwrap();
    assert!(one
        .placement
        .iter()
        .all(|s| s.replicas.len() == 1 && s.replicas[0].node_id == a.id));

    let err = client.heartbeat(999, vec![]).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let hash = "ab".repeat(32);
    client
        .put_api_key(pb::ApiKeyInfo {
            key_sha256: hash.clone(),
            id: "0123456789ab".into(),
            scopes: vec![pb::Scope::Read as i32],
            tenants: vec!["t1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let state = client.cluster_state(true).await.unwrap();
    assert_eq!(state.api_keys.len(), 1);
    assert_eq!(state.api_keys[0].key_sha256, hash);
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_elects_a_new_leader_and_writes_resume() {
    // Production timings: 100 ms ticks, election after 10-20 ticks.
    let opts = Opts {
        tick_ms: 100,
        ..Opts::default()
    };
    let mut sb = Sandbox::start(3, opts).await;
    let old = sb.wait_leader(Duration::from_secs(15)).await;
    let client = sb.client(&sb.running());
    client.register_node(shard_node("s1", "")).await.unwrap();
    client.register_node(shard_node("s2", "")).await.unwrap();
    client
        .create_collection(collection("before", 1, 2))
        .await
        .unwrap();
    let old_term = sb.node(old).status().term;

    sb.stop(old).await;
    let stopped = Instant::now();
    let new = sb.wait_leader(Duration::from_secs(15)).await;
    let failover = stopped.elapsed();
    assert_ne!(new, old);
    assert!(sb.node(new).status().term > old_term);
    let (created, write_took) = timed(client.create_collection(collection("after", 1, 2))).await;
    created.unwrap();
    let resumed = stopped.elapsed();
    eprintln!(
        "meta failover: leader {old} stopped -> leader {new} elected after {failover:?}; \
         first write after the failover took {write_took:?}; writes resumed {resumed:?} after the stop \
         (tick 100 ms, election_tick 10, heartbeat_tick 3)"
    );
    assert!(
        failover < Duration::from_secs(10),
        "failover took {failover:?}"
    );

    sb.wait_until(
        Duration::from_secs(5),
        "both survivors applied the write",
        |sb| {
            sb.nodes.values().all(|n| {
                let names: BTreeSet<String> = n
                    .cluster_state()
                    .collections
                    .into_iter()
                    .map(|c| c.name)
                    .collect();
                names.contains("before") && names.contains("after")
            })
        },
    )
    .await;
    sb.assert_no_split_brain();
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_all_nodes_keeps_the_state() {
    // A small threshold, so the restart reads a snapshot plus the entries after it.
    let opts = Opts {
        snapshot_threshold: 8,
        ..Opts::default()
    };
    let mut sb = Sandbox::start(3, opts).await;
    sb.wait_leader(Duration::from_secs(10)).await;
    let client = sb.client(&sb.running());
    for name in ["s1", "s2", "s3", "s4"] {
        client.register_node(shard_node(name, "")).await.unwrap();
    }
    for name in ["c1", "c2", "c3"] {
        client
            .create_collection(collection(name, 2, 2))
            .await
            .unwrap();
    }
    for h in ["ab", "cd"] {
        client
            .put_api_key(pb::ApiKeyInfo {
                key_sha256: h.repeat(32),
                id: h.repeat(6),
                scopes: vec![pb::Scope::Write as i32],
                tenants: vec!["t".into()],
                ..Default::default()
            })
            .await
            .unwrap();
    }
    client.drop_collection("c2").await.unwrap();
    let before = client.cluster_state(true).await.unwrap();
    sb.wait_until(
        Duration::from_secs(5),
        "every node applied everything",
        |sb| {
            sb.nodes
                .values()
                .all(|n| n.status().applied_index >= before.version)
        },
    )
    .await;

    for id in sb.running() {
        sb.stop(id).await;
    }
    for id in [1, 2, 3] {
        sb.restart(id).await;
    }
    sb.wait_leader(Duration::from_secs(15)).await;
    let after = client.cluster_state(true).await.unwrap();
    assert_eq!(replicated(&before), replicated(&after));
    assert_eq!(after.collections.len(), 2);
    assert_eq!(after.nodes.len(), 4);
    assert_eq!(after.api_keys.len(), 2);
    assert_eq!(after.meta_voters.len(), 3);
    assert!(after.version >= before.version);

    // Node ids keep growing after the restart, and every node converges again.
    let late = client.register_node(shard_node("late", "")).await.unwrap();
    assert_eq!(late.id, 5);
    let expected = replicated(&client.cluster_state(true).await.unwrap());
    sb.wait_until(
        Duration::from_secs(5),
        "every node holds the same state",
        |sb| {
            sb.nodes
                .values()
                .all(|n| replicated(&n.cluster_state()) == expected)
        },
    )
    .await;
    sb.assert_no_split_brain();
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_until_shutdown_and_releases_the_store() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        // A one-node group sends no Raft messages, so a new port on the second round is fine.
        let mut config = attest_meta::MetaConfig::new(1, address.clone(), dir.path());
        config.tick_ms = 50;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(attest_meta::serve(config, listener, async {
            let _ = stopped.await;
        }));
        let client = attest_meta::MetaClient::new([address.clone()]).unwrap();
        let mut health = tonic_health::pb::health_client::HealthClient::new(
            tonic::transport::Endpoint::from_shared(address.clone())
                .unwrap()
                .connect_lazy(),
        );
        let mut serving = false;
        for _ in 0..50 {
            if let Ok(r) = health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: "attest.v1.MetaService".into(),
                })
                .await
            {
                serving = r.into_inner().status
                    == tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(serving, "health reports attest.v1.MetaService serving");
        if round == 0 {
            client.register_node(shard_node("s1", "")).await.unwrap();
        } else {
            // Local state survives the restart even before any election.
            let state = client.cluster_state(false).await.unwrap();
            assert_eq!(state.nodes.len(), 1);
        }
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("serve stops after the shutdown signal")
            .unwrap()
            .unwrap();
    }
}

/// A meta address that accepts connections and then never answers (a hung process, a peer whose packets are
/// dropped after the handshake) costs one bounded attempt; the call is answered by the next address, and
/// the next call does not start at the silent one again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_address_that_never_answers_costs_one_bounded_attempt() {
    let sb = Sandbox::start(3, Opts::default()).await;
    sb.wait_leader(Duration::from_secs(10)).await;
    // Bound and never accepted: the kernel completes the TCP handshake, nobody speaks HTTP/2.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = common::url(silent.local_addr().unwrap());
    let client = attest_proto::meta_client::MetaClient::new(
        std::iter::once(silent_url).chain((1..=3).map(|id| sb.url(id))),
    )
    .unwrap()
    .with_timeout(Duration::from_secs(10))
    .with_attempt_timeout(Duration::from_millis(500));

    let (first, took) = timed(client.cluster_state(false)).await;
    first.expect("answered by a live address after the silent one");
    assert!(
        took < Duration::from_secs(3),
        "the silent address took {took:?}, more than one bounded attempt"
    );
    let (second, took) = timed(client.cluster_state(false)).await;
    second.unwrap();
    assert!(
        took < Duration::from_millis(400),
        "the next call started at the silent address again ({took:?})"
    );
    drop(silent);
    sb.shutdown().await;
}
