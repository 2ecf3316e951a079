//! A restarted shard agent goes on catching up from where it stood: the cursor on each peer's log is kept in the
//! replica's own log, so the first pass after a restart lists only what the peer changed since, not every
//! document it holds (2.5 minutes of CPU after each restart of a 10M-vector cluster). A real meta, two real shard
//! nodes and their agents, in process; one node serves the other over gRPC.

use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_auth::cluster::ClusterGuard;
use attest_index::{DocumentWrite, EngineConfig, LoggedChunk, ShardEngine};
use attest_meta::{MetaConfig, MetaNode};
use attest_proto::v1 as pb;
use attest_proto::{ClusterCredential, MetaClient};
use attest_shard::catchup::PeerCursor;
use attest_shard::{ClusterAgentConfig, ShardNode, ShardNodeConfig};

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

/// Runs `node`'s cluster agent as `name`; returns the node id and the sender that stops it.
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
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(attest_shard::run_cluster_agent(
        Arc::clone(node),
        meta.clone(),
        ClusterAgentConfig {
            name: name.into(),
            advertise: advertise.into(),
            zone: String::new(),
            heartbeat_interval_ms: 200,
            meta_watch: true,
            reconcile_interval_ms: 50,
            repair_interval_ms: 100,
            peer_timeout_ms: 5_000,
        },
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let meta_address = format!("http://{}", listener.local_addr().unwrap());
    let config = MetaConfig::new(1, meta_address.clone(), dir.path().join("meta"));
    let meta_node = MetaNode::start(config, listener).await.unwrap();
    let meta = MetaClient::new([meta_address.as_str()]).unwrap();

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
    meta.create_collection(pb::MetaCreateCollectionRequest {
        name: "c".into(),
        shards: 1,
        replication: 2,
        spec: Some(pb::CollectionSpec {
            dimension: DIM as u32,
            index: None,
            seal_threshold: 0,
            embedder: "test".into(),
            embedder_identity: None,
        }),
        chunking_json: String::new(),
        thresholds_json: String::new(),
        ..Default::default()
    })
    .await
    .unwrap();
    let created = Instant::now();
    while peer.get("c", 0).is_none() || node.get("c", 0).is_none() {
        assert!(
            created.elapsed() < Duration::from_secs(10),
            "replicas never created"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
