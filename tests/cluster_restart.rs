//! Every shard process of a cluster restarted at once (a rollout that replaces every pod, a power cut): each node
//! catches up from peers that are starting too, and serves well within the per-peer limit of its first pass.
//! Before the startup gate (attest_shard::startup_gate) a starting node answered nothing until it was ready, so
//! nodes restarted together waited on each other to `agent.peer_timeout_ms` for every replica, one after another:
//! two minutes late for a node of four replicas at the default 30 s. The real binary, through
//! `scripts/local-cluster.sh`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::local_cluster::LocalCluster;
use crate::common::{http, post};

/// The per-peer limit of the test's first passes: a node that waited on a peer to it would be late by minutes.
const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether shard node `i`'s `/readyz` says it is ready.
fn ready(cluster: &LocalCluster, i: u16) -> bool {
    let url = format!("http://127.0.0.1:{}/readyz", cluster.shard_http_port(i));
    matches!(http().get(url).send(), Ok(r) if r.status().as_u16() == 200)
}

#[test]
fn shard_nodes_restarted_together_are_ready_without_waiting_on_each_other() {
    let timeout_ms = PEER_TIMEOUT.as_millis().to_string();
    let cluster =
        LocalCluster::up_with_shard_env(&[("ATTEST__AGENT__PEER_TIMEOUT_MS", &timeout_ms)]);
    // Three shards, two replicas each, on three nodes: every node holds two replicas whose peers are elsewhere.
    let (s, b) = post(
        &format!("{}/v1/collections", cluster.router),
        &json!({"name": "c", "shards": 3, "replication": 2}),
    );
    assert_eq!(s, 201, "{b}");
    let docs: Vec<Value> = (0..30)
        .map(|i| json!({"id": format!("d{i}"), "text": format!("Restart note {i} about the harbour crane.")}))
        .collect();
    let (s, b) = post(
        &format!("{}/v1/collections/c/documents", cluster.router),
        &json!({"documents": docs}),
    );
    assert_eq!(s, 200, "{b}");

    for i in 1..=3 {
        cluster.kill(&format!("shard-{i}"));
    }
    let restarted = Instant::now();
    for i in 1..=3 {
        cluster.start_shard(i);
    }
    let limit = PEER_TIMEOUT / 2;
    while !(1..=3).all(|i| ready(&cluster, i)) {
        assert!(
            restarted.elapsed() < limit,
            "shard nodes restarted together not ready after {limit:?}: {:?} ready",
            (1..=3).map(|i| ready(&cluster, i)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "every shard node ready {:?} after the restart",
        restarted.elapsed()
    );

    // Their first passes reached their peers: none timed out, and the cluster answers whole.
    let logs = std::fs::read_dir(cluster.dir.path().join("logs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("-restart-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    assert!(
        !logs.contains("catch_up_timed_out"),
        "a first pass timed out on a peer:\n{logs}"
    );
    // The router's connections to the old processes are gone: it answers whole once it has reached the new ones.
    let query = json!({"query": "harbour crane", "k": 5, "lanes": ["bm25"]});
    let answered = Instant::now();
    loop {
        let (s, b) = cluster.search(&query);
        if s == 200 && b["degraded"] == false {
            assert_eq!(b["hits"].as_array().map(Vec::len), Some(5), "{b}");
            break;
        }
        assert!(
            answered.elapsed() < Duration::from_secs(30),
            "no whole answer after the restart: {s} {b}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
