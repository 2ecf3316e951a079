//! A shard node's heartbeats go on while a reconcile pass is stuck: a catch-up from a peer that accepts the
//! connection and never answers (a stalled node) takes `peer_timeout_ms`, four times meta's node timeout, and
//! the node must stay alive in meta's eyes all along (a real meta, a real shard node and agent, in process).

use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use attest_proto::MetaClient;
use attest_shard::{ClusterAgentConfig, ShardNode, ShardNodeConfig};

use crate::common::meta::{create_c_on, start_meta};

const NODE_TIMEOUT_MS: u64 = 1500;

async fn alive(meta: &MetaClient, id: u64) -> bool {
    let state = meta.cluster_state(false).await.unwrap();
    state.nodes.iter().any(|n| n.id == id && n.alive)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_longer_than_the_node_timeout_does_not_get_the_node_marked_dead() {
    let dir = tempfile::tempdir().unwrap();
    let (meta_node, meta) = start_meta(&dir.path().join("meta"), |c| {
        c.node_timeout_ms = NODE_TIMEOUT_MS
    })
    .await;

    let node = ShardNode::open(ShardNodeConfig {
        data_dir: dir.path().join("node"),
        engine_defaults: attest_index::EngineConfig::default(),
    })
    .unwrap();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(attest_shard::run_cluster_agent(
        Arc::clone(&node),
        meta.clone(),
        ClusterAgentConfig {
            name: "patient".into(),
            advertise: "http://127.0.0.1:1".into(),
            zone: String::new(),
            heartbeat_interval_ms: 200,
            meta_watch: true,
            reconcile_interval_ms: 100,
            repair_interval_ms: 60_000,
            peer_timeout_ms: 4 * NODE_TIMEOUT_MS,
        },
        ready_tx,
        async {
            let _ = stop_rx.await;
        },
    ));
    let me = ready_rx.await.unwrap();

    // A peer that completes TCP handshakes (the OS backlog) and never speaks.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = meta
        .register_node(pb::RegisterNodeRequest {
            name: "stalled".into(),
            address: format!("http://{}", stalled.local_addr().unwrap()),
            role: pb::NodeRole::Shard as i32,
            zone: String::new(),
        })
        .await
        .unwrap();
    assert_ne!(peer.id, me);
    // The next pass creates the replica, then waits on the stalled peer for up to 6 s.
    create_c_on(&meta, 4, &[&node]).await;
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_millis(3 * NODE_TIMEOUT_MS) {
        assert!(
            alive(&meta, me).await,
            "node {me} reported dead {} ms into a catch-up",
            watched.elapsed().as_millis()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !alive(&meta, peer.id).await,
        "the stalled peer, which never heartbeats, is dead: the liveness check is live"
    );
    let _ = stop_tx.send(());
    agent.await.unwrap().unwrap();
    meta_node.shutdown().await.unwrap();
}
