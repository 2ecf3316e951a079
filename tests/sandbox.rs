//! The cluster's data path in one test process (a sandbox, quickwit-style): a meta node, shard nodes with their
//! cluster agents and a router over meta's shard map, all started through the same `serve` functions as the
//! binary, on 127.0.0.1. A shard node is stopped and restarted under writes (nothing acknowledged is lost, the
//! restarted replica catches up), both replicas of a shard are stopped (degraded, naming it), and a rebalance
//! onto a new node keeps every document.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use attest_embed::{build_embedder, Embedder, EmbedderConfig};
use attest_ingest::SourceDocument;
use attest_proto::v1 as pb;
use attest_proto::{FollowMode, MetaClient};
use attest_router::topology::ClusterView;
use attest_router::{IngestDocument, Router, RouterConfig};
use attest_shard::{ClusterAgentConfig, ShardNode, ShardNodeConfig};
use tokio::sync::oneshot;

/// How long a stopped node's tasks may take to finish before they are aborted.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// One shard node: its server and cluster agent, stopped together.
struct ShardProc {
    stop: Option<oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ShardProc {
    /// Asks the node to stop and waits for it; a task still running after the grace period (a graceful shutdown
    /// waiting on a peer's open connection) is aborted, as a process is killed after its grace period — never a
    /// test that waits for ever (one hung here for 18 minutes, every thread idle).
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        for mut t in self.tasks.drain(..) {
            if tokio::time::timeout(STOP_GRACE, &mut t).await.is_err() {
                t.abort();
                let _ = t.await;
            }
        }
    }
}

/// Starts (or restarts) shard node `i`: name `s{i}`, data under `root/s{i}`, listening on `addrs[i]`.
async fn start_nth_shard(meta: &MetaClient, root: &Path, addrs: &[String], i: usize) -> ShardProc {
    start_shard(
        meta,
        root.join(format!("s{i}")),
        addrs[i].clone(),
        &format!("s{i}"),
    )
    .await
}

async fn start_shard(meta: &MetaClient, dir: PathBuf, addr: String, name: &str) -> ShardProc {
    let node = ShardNode::open(ShardNodeConfig {
        data_dir: dir,
        engine_defaults: attest_index::EngineConfig::default(),
    })
    .unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let shared = futures::future::FutureExt::shared(async move {
        let _ = stop_rx.await;
    });
    let (ready_tx, ready_rx) = oneshot::channel();
    let agent = tokio::spawn({
        let (node, meta, stop) = (Arc::clone(&node), meta.clone(), shared.clone());
        let config = ClusterAgentConfig {
            name: name.to_string(),
            advertise: format!("http://{addr}"),
            repair_interval_ms: 500,
            ..Default::default()
        };
        async move {
            attest_shard::run_cluster_agent(node, meta, config, ready_tx, stop)
                .await
                .unwrap();
        }
    });
    ready_rx.await.unwrap();
    // The port may still be in TIME_WAIT from the node's previous life; retry briefly.
    let listener = loop {
        match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let server = tokio::spawn(async move {
        attest_shard::serve(node, listener, Default::default(), shared)
            .await
            .unwrap();
    });
    ShardProc {
        stop: Some(stop_tx),
        tasks: vec![server, agent],
    }
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn doc(i: usize) -> IngestDocument {
    IngestDocument {
        source: SourceDocument {
            id: format!("d{i}"),
            title: format!("Note {i}"),
            text: format!("Sandbox note {i} mentions {} by the lake.", word(i)),
            ..Default::default()
        },
        vector: None,
    }
}

/// A word that only document `i` contains (no vowels, so no stemmer touches it).
fn word(i: usize) -> String {
    let letters = b"bcdfghjklm";
    let w: String = format!("{i:05}")
        .bytes()
        .map(|c| letters[(c - b'0') as usize] as char)
        .collect();
    format!("zq{w}x")
}

async fn search_lake(router: &Router) -> pb::SearchResponse {
    router
        .search()
        .run(
            pb::SearchRequest {
                collection: "c".into(),
                query: "sandbox note by the lake".into(),
                ..Default::default()
            },
            "lake".into(),
        )
        .await
        .unwrap()
}

async fn found(router: &Router, i: usize) -> bool {
    let resp = router
        .search()
        .run(
            pb::SearchRequest {
                collection: "c".into(),
                query: word(i),
                k: Some(3),
                lanes: vec!["bm25".into()],
                ..Default::default()
            },
            format!("find-{i}"),
        )
        .await
        .unwrap();
    resp.hits.iter().any(|h| h.doc_id == format!("d{i}"))
}

async fn wait_for(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn replicas_of(state: &pb::ClusterState, shard: u32) -> Vec<u64> {
    state.collections[0].placement[shard as usize]
        .replicas
        .iter()
        .map(|r| r.node_id)
        .collect()
}

async fn live_docs(address: &str, shard: u32) -> Option<u64> {
    let mut c = pb::shard_service_client::ShardServiceClient::connect(address.to_string())
        .await
        .ok()?;
    c.stats(pb::ShardStatsRequest {
        collection: "c".into(),
        shard,
    })
    .await
    .ok()
    .map(|r| r.into_inner().live_documents)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sandbox_cluster_keeps_acknowledged_writes_through_node_failures_and_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let root: &Path = dir.path();

    // One meta node (the Raft group's own failures are tested in attest-meta).
    let meta_addr = free_addr();
    let meta_listener = tokio::net::TcpListener::bind(&meta_addr).await.unwrap();
    let (meta_stop, meta_stop_rx) = oneshot::channel::<()>();
    let meta_config = attest_meta::MetaConfig {
        node_timeout_ms: 1500,
        ..attest_meta::MetaConfig::new(1, format!("http://{meta_addr}"), root.join("meta"))
    };
    let meta_task = tokio::spawn(attest_meta::serve(meta_config, meta_listener, async move {
        let _ = meta_stop_rx.await;
    }));
    let meta = MetaClient::new(&[format!("http://{meta_addr}")]).unwrap();

    let addrs: Vec<String> = (0..4).map(|_| free_addr()).collect();
    let mut shards: Vec<Option<ShardProc>> = Vec::new();
    for i in 0..3 {
        shards.push(Some(start_nth_shard(&meta, root, &addrs, i).await));
    }

    let embedder: Arc<dyn Embedder> = build_embedder(&EmbedderConfig::default()).unwrap();
    let view = ClusterView::connect(meta.clone(), Default::default())
        .await
        .unwrap();
    view.spawn_watch(FollowMode::Watch, Duration::from_millis(200));
    let router = Router::new(RouterConfig::default(), Arc::clone(&view), embedder);
    router
        .collections()
        .create(
            pb::CreateCollectionRequest {
                name: "c".into(),
                shards: Some(2),
                replication: Some(2),
                index: None,
                ..Default::default()
            },
            "create",
        )
        .await
        .unwrap();
    let state = meta.cluster_state(true).await.unwrap();
    for s in 0..2 {
        let r = replicas_of(&state, s);
        assert_eq!(r.len(), 2);
        assert_ne!(r[0], r[1], "two replicas of shard {s} on one node");
    }
    let address_of = |state: &pb::ClusterState, id: u64| {
        state
            .nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap()
            .address
            .clone()
    };
    let index_of = |state: &pb::ClusterState, id: u64| {
        let a = address_of(state, id);
        addrs.iter().position(|x| a.ends_with(x.as_str())).unwrap()
    };

    let mut acked = Vec::new();
    router
        .ingest()
        .run("c", (0..40).map(doc).collect(), "w0")
        .await
        .unwrap();
    acked.extend(0..40);

    // Stop one shard node; writes still reach a quorum (1 of 2) and searches are not degraded.
    let victim = 0usize;
    shards[victim].take().unwrap().stop().await;
    for batch in 0..4 {
        let ids: Vec<usize> = (40 + batch * 10..50 + batch * 10).collect();
        router
            .ingest()
            .run("c", ids.iter().map(|&i| doc(i)).collect(), "w1")
            .await
            .unwrap();
        acked.extend(ids);
    }
    let resp = search_lake(&router).await;
    assert!(
        !resp.degraded,
        "one replica down must not degrade: {:?}",
        resp.missing_shards
    );
    for &i in &acked {
        assert!(
            found(&router, i).await,
            "d{i} not found with one replica down"
        );
    }

    // Restart it: it copies what it missed before serving; its replicas end equal to their peers'.
    shards[victim] = Some(start_nth_shard(&meta, root, &addrs, victim).await);
    let state = meta.cluster_state(true).await.unwrap();
    for s in 0..2u32 {
        let reps = replicas_of(&state, s);
        let a = address_of(&state, reps[0]);
        let b = address_of(&state, reps[1]);
        wait_for(
            "replicas to converge",
            Duration::from_secs(20),
            async || {
                let (x, y) = (live_docs(&a, s).await, live_docs(&b, s).await);
                x.is_some() && x == y
            },
        )
        .await;
    }

    // Both replicas of shard 0 down → degraded, naming shard 0.
    let both = replicas_of(&state, 0);
    for id in &both {
        let i = index_of(&state, *id);
        shards[i].take().unwrap().stop().await;
    }
    let resp = search_lake(&router).await;
    assert!(resp.degraded);
    assert_eq!(resp.missing_shards, vec![0]);
    for id in &both {
        let i = index_of(&state, *id);
        shards[i] = Some(start_nth_shard(&meta, root, &addrs, i).await);
    }

    // A fourth node and a rebalance: replicas move onto it, nothing is lost.
    shards.push(Some(start_nth_shard(&meta, root, &addrs, 3).await));
    let plan = meta.rebalance(false).await.unwrap();
    assert!(!plan.is_empty());
    wait_for(
        "moved replicas to turn active",
        Duration::from_secs(30),
        async || {
            let st = meta.cluster_state(false).await.unwrap();
            st.collections[0].placement.iter().all(|p| {
                p.replicas.len() == 2
                    && p.replicas
                        .iter()
                        .all(|r| r.state == pb::ReplicaState::Active as i32)
            })
        },
    )
    .await;
    let state = meta.cluster_state(true).await.unwrap();
    let new_node = state.nodes.iter().find(|n| n.name == "s3").unwrap().id;
    assert!(state.collections[0]
        .placement
        .iter()
        .any(|p| p.replicas.iter().any(|r| r.node_id == new_node)));
    view.refresh(true).await.unwrap();
    for &i in &acked {
        assert!(found(&router, i).await, "d{i} lost by the rebalance");
    }

    for s in shards.into_iter().flatten() {
        s.stop().await;
    }
    let _ = meta_stop.send(());
    meta_task.await.unwrap().unwrap();
}
