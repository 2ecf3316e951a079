//! A restarted shard agent goes on catching up from where it stood: the cursor on each peer's log is kept in the
//! replica's own log, so the first pass after a restart lists only what the peer changed since, not every
//! document it holds (2.5 minutes of CPU after each restart of a 10M-vector cluster). And nodes restarted
//! together catch up from each other in their first pass, each serving its peers' catch-up reads while it starts.
//! A real meta, two real shard nodes and their agents, in process, served over gRPC on loopback.

use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_auth::cluster::ClusterGuard;
use attest_index::{DocumentWrite, EngineConfig, LoggedChunk, ShardEngine};
use attest_proto::{ClusterCredential, MetaClient};
use attest_shard::catchup::PeerCursor;
use attest_shard::{ClusterAgentConfig, ShardNode, ShardNodeConfig, StartupGate};

use crate::common::meta::{create_c_on, start_meta};

const DIM: usize = 4;

fn doc(i: usize) -> DocumentWrite {
    let mut vector = vec![0.0; DIM];
    vector[i % DIM] = 1.0;
    DocumentWrite {
        doc_id: format!("doc-{i}"),
        tenant: "t".into(),
        chunks: vec![LoggedChunk {
            chunk_id: format!("doc-{i}#0"),
            title: String::new(),
            text: format!("document {i}"),
            metadata_json: "{}".into(),
            vector,
        }],
        version: 1000 + i as u64,
        near_dup: None,
    }
}

fn shard_node(dir: &std::path::Path) -> Arc<ShardNode> {
    ShardNode::open(ShardNodeConfig {
        data_dir: dir.to_path_buf(),
        engine_defaults: EngineConfig::default(),
    })
    .unwrap()
}

/// Runs `node`'s cluster agent as `name`; returns the node id (once ready), the sender that stops it and its task.
async fn start_agent(
    node: &Arc<ShardNode>,
    meta: &MetaClient,
    name: &str,
    advertise: &str,
) -> (
    u64,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    start_agent_with(node, meta, agent_config(name, advertise, 100, 5_000)).await
}

/// An agent's settings: quick passes and heartbeats, with the given repair interval and per-peer limit.
fn agent_config(
    name: &str,
    advertise: &str,
    repair_interval_ms: u64,
    peer_timeout_ms: u64,
) -> ClusterAgentConfig {
    ClusterAgentConfig {
        name: name.into(),
        advertise: advertise.into(),
        zone: String::new(),
        heartbeat_interval_ms: 200,
        meta_watch: true,
        reconcile_interval_ms: 50,
        repair_interval_ms,
        peer_timeout_ms,
    }
}

/// Runs `node`'s cluster agent with `config` until its first pass is done (ready).
async fn start_agent_with(
    node: &Arc<ShardNode>,
    meta: &MetaClient,
    config: ClusterAgentConfig,
) -> (
    u64,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(attest_shard::run_cluster_agent(
        Arc::clone(node),
        meta.clone(),
        config,
        ready_tx,
        async {
            let _ = stop_rx.await;
        },
    ));
    (ready_rx.await.unwrap(), stop_tx, agent)
}

/// Waits until `engine` holds `doc` at its version.
async fn until_copied(engine: &ShardEngine, i: usize) {
    let started = Instant::now();
    while engine.version_of("t", &format!("doc-{i}")) != 1000 + i as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "doc-{i} never copied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_goes_on_from_the_cursor_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (meta_node, meta) = start_meta(&dir.path().join("meta"), |_| ()).await;

    // The peer, served on loopback; the node under test is never asked anything (it advertises a dead port).
    let peer = shard_node(&dir.path().join("peer"));
    let peer_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer_address = format!("http://{}", peer_listener.local_addr().unwrap());
    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(attest_shard::serve(
        Arc::clone(&peer),
        peer_listener,
        ClusterGuard::new(&ClusterCredential::none()),
        async {
            let _ = serving_stopped.await;
        },
    ));
    let (peer_id, stop_peer, peer_agent) = start_agent(&peer, &meta, "peer", &peer_address).await;
    let node = shard_node(&dir.path().join("node"));
    let (me, stop_me, my_agent) = start_agent(&node, &meta, "node", "http://127.0.0.1:1").await;
    create_c_on(&meta, DIM as u32, &[&peer, &node]).await;
    let (peer_engine, engine) = (peer.get("c", 0).unwrap(), node.get("c", 0).unwrap());
    peer_engine.upsert((0..50).map(doc).collect()).unwrap();
    until_copied(&engine, 49).await;
    let _ = stop_me.send(());
    my_agent.await.unwrap().unwrap();

    // What the agent kept on the peer: a complete listing of the peer's log.
    let kept = PeerCursor::from_note(&engine.peer_note(peer_id).unwrap().unwrap()).unwrap();
    assert_eq!(kept.peer_log_id, peer_engine.log_id());
    assert!(kept.under_way.is_none(), "{kept:?}");
    assert!(kept.complete_through >= 50, "{kept:?}");

    // While the agent is down the peer takes doc-50, and the kept cursor is moved past it (as if an earlier pass
    // had listed it): an agent that goes on from the kept cursor never lists doc-50, one that starts afresh
    // lists everything and copies it. doc-51 comes after the cursor: every agent copies it.
    peer_engine.upsert(vec![doc(50)]).unwrap();
    let moved = PeerCursor::complete_through(peer_engine.stats().last_seq, kept.peer_log_id);
    engine.keep_peer_note(peer_id, &moved.to_note()).unwrap();
    peer_engine.upsert(vec![doc(51)]).unwrap();
    let (again, stop_me, my_agent) = start_agent(&node, &meta, "node", "http://127.0.0.1:1").await;
    assert_eq!(again, me, "the same node");
    until_copied(&engine, 51).await;
    assert_eq!(
        engine.version_of("t", "doc-50"),
        0,
        "the restarted agent listed the peer in full instead of going on from its kept cursor"
    );

    let _ = stop_me.send(());
    my_agent.await.unwrap().unwrap();
    let _ = stop_peer.send(());
    peer_agent.await.unwrap().unwrap();
    let _ = stop_serving.send(());
    meta_node.shutdown().await.unwrap();
}

/// Starts `node`'s agent with a gated gRPC server on `listener`, as the node binary does; opens the gate once
/// the first pass is done. Returns what the node held of `missed` at that moment (its version), the time it took
/// and the senders that stop the agent and the server.
async fn restart_gated(
    node: Arc<ShardNode>,
    listener: tokio::net::TcpListener,
    meta: MetaClient,
    config: ClusterAgentConfig,
    missed: usize,
) -> (
    u64,
    Duration,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let started = Instant::now();
    let (gate, gated) = StartupGate::closed();
    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(attest_shard::serve_gated(
        Arc::clone(&node),
        listener,
        ClusterGuard::new(&ClusterCredential::none()),
        gated,
        async {
            let _ = serving_stopped.await;
        },
    ));
    let (_, stop, agent) = start_agent_with(&node, &meta, config).await;
    let held = node
        .get("c", 0)
        .map_or(0, |e| e.version_of("t", &format!("doc-{missed}")));
    gate.open();
    (held, started.elapsed(), stop, agent, stop_serving)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_restarted_together_catch_up_from_each_other_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let (meta_node, meta) = start_meta(&dir.path().join("meta"), |_| ()).await;

    // Two nodes whose listeners stay bound throughout and are served only after the "restart": before it, the
    // agents place the replicas and their catch-ups find nobody answering (200 ms each).
    let (a, b) = (
        shard_node(&dir.path().join("a")),
        shard_node(&dir.path().join("b")),
    );
    let (a_listener, b_listener) = (
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    );
    let a_address = format!("http://{}", a_listener.local_addr().unwrap());
    let b_address = format!("http://{}", b_listener.local_addr().unwrap());
    let (_, stop_a, a_agent) =
        start_agent_with(&a, &meta, agent_config("a", &a_address, 100, 200)).await;
    let (_, stop_b, b_agent) =
        start_agent_with(&b, &meta, agent_config("b", &b_address, 100, 200)).await;
    create_c_on(&meta, DIM as u32, &[&a, &b]).await;
    let _ = stop_a.send(());
    a_agent.await.unwrap().unwrap();
    let _ = stop_b.send(());
    b_agent.await.unwrap().unwrap();

    // While both are down, each holds a write the other missed.
    a.get("c", 0).unwrap().upsert(vec![doc(1)]).unwrap();
    b.get("c", 0).unwrap().upsert(vec![doc(2)]).unwrap();

    // Both come back at once, each waiting up to a minute on a peer. A node that answered nothing until it was
    // ready would wait on the other's first pass while the other waited on it: one of them would run to the
    // minute and serve without the write it missed.
    let peer_timeout = Duration::from_secs(60);
    let slow = |name: &str, address: &str| {
        agent_config(name, address, 600_000, peer_timeout.as_millis() as u64)
    };
    let (
        (a_held, a_took, stop_a, a_agent, stop_a_serving),
        (b_held, b_took, stop_b, b_agent, stop_b_serving),
    ) = tokio::join!(
        restart_gated(
            Arc::clone(&a),
            a_listener,
            meta.clone(),
            slow("a", &a_address),
            2
        ),
        restart_gated(
            Arc::clone(&b),
            b_listener,
            meta.clone(),
            slow("b", &b_address),
            1
        ),
    );
    assert_eq!(a_held, 1002, "a was ready without the write it missed");
    assert_eq!(b_held, 1001, "b was ready without the write it missed");
    assert!(
        a_took < peer_timeout && b_took < peer_timeout,
        "a first pass waited on a peer to its limit: {a_took:?} / {b_took:?}"
    );

    for (stop, agent, stop_serving) in [
        (stop_a, a_agent, stop_a_serving),
        (stop_b, b_agent, stop_b_serving),
    ] {
        let _ = stop.send(());
        agent.await.unwrap().unwrap();
        let _ = stop_serving.send(());
    }
    meta_node.shutdown().await.unwrap();
}
