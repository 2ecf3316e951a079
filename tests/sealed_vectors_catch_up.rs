//! Sealed vectors out of the ingest log (`engine.keep_sealed_vectors_in_log`: `auto`, the default, drops them at
//! replication 2), through the real processes (`scripts/local-cluster.sh`): a replica that comes back with an empty
//! disk is copied whole from its peer, whose log no longer holds the sealed rows' vectors (its fetches read them
//! from its segments), and then, alone, answers every document's own vector with that document first. A
//! collection of replication 1 keeps them (nothing could copy a damaged segment's rows back).

use crate::common;

use std::time::{Duration, Instant};

use attest_index::wal::{IngestLog, LogOp};
use attest_proto::v1 as pb;
use common::local_cluster::LocalCluster;
use common::{post, unit};
use serde_json::{json, Value};

const DOCS: usize = 40;

/// Live documents of shard 0 of `c` on the shard node at `address` (None while it does not answer).
fn live_documents(address: &str) -> Option<u64> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = pb::shard_service_client::ShardServiceClient::connect(address.to_string())
            .await
            .ok()?;
        let request = pb::ShardStatsRequest {
            collection: "c".into(),
            shard: 0,
        };
        client
            .stats(request)
            .await
            .ok()
            .map(|r| r.into_inner().live_documents)
    })
}

/// (chunks with a vector, chunks without one) in the upserts of the ingest log at `wal` (its process stopped).
fn logged_vectors(wal: &std::path::Path) -> (usize, usize) {
    let log = IngestLog::open(wal).unwrap();
    let mut counts = (0, 0);
    for (_, op) in log.range(1, u64::MAX).unwrap() {
        if let LogOp::Upsert { chunks, .. } = op {
            for c in chunks {
                match c.vector.is_empty() {
                    false => counts.0 += 1,
                    true => counts.1 += 1,
                }
            }
        }
    }
    counts
}

#[test]
fn a_replica_copied_from_a_peer_whose_log_dropped_its_sealed_vectors_serves_them_exactly() {
    let cluster = LocalCluster::up();
    let router = cluster.router.clone();
    for (name, replication) in [("c", 2), ("solo", 1)] {
        let (s, b) = post(
            &format!("{router}/v1/collections"),
            &json!({"name": name, "shards": 1, "replication": replication}),
        );
        assert!(s == 200 || s == 201, "{b}");
    }
    let docs: Vec<Value> = (0..DOCS)
        .map(|i| json!({"id": format!("v{i}"), "text": format!("note {i} of the series"), "vector": unit(i as u64)}))
        .collect();
    let (s, b) = post(
        &format!("{router}/v1/collections/c/documents"),
        &json!({"documents": docs}),
    );
    assert_eq!(s, 200, "{b}");
    let (s, b) = post(
        &format!("{router}/v1/collections/c/maintain"),
        &json!({"seal": true}),
    );
    assert_eq!(s, 200, "{b}");

    let state = cluster.status();
    let node = |id: &Value| {
        state["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| &n["id"] == id)
            .cloned()
            .unwrap()
    };
    let collections = state["collections"].as_array().unwrap();
    let placed = |name: &str| collections.iter().find(|c| c["name"] == name).unwrap();
    let replicas: Vec<Value> = placed("c")["placement"][0]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| node(&r["node"]))
        .collect();
    let name = |n: &Value| n["name"].as_str().unwrap().to_string();
    let (peer, copy) = (name(&replicas[0]), name(&replicas[1]));

    // Each replica was created with the choice its collection's replication makes.
    for (collection, kept) in [("c", false), ("solo", true)] {
        for r in placed(collection)["placement"][0]["replicas"]
            .as_array()
            .unwrap()
        {
            let engine = cluster
                .dir
                .path()
                .join(name(&node(&r["node"])))
                .join(format!("collections/{collection}/shard-0/engine.json"));
            // Written once the replica is created (by the router at once, or by its node's next reconcile).
            let started = Instant::now();
            while !engine.exists() {
                assert!(started.elapsed() < Duration::from_secs(30), "{engine:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
            let engine: Value = serde_json::from_slice(&std::fs::read(&engine).unwrap()).unwrap();
            assert_eq!(engine["keep_sealed_vectors_in_log"], kept, "{collection}");
        }
    }
    let copy_address = replicas[1]["address"].as_str().unwrap().to_string();

    // The copy comes back with an empty disk under its name; catch-up lists everything and copies it.
    cluster.kill(&copy);
    std::fs::remove_dir_all(cluster.dir.path().join(&copy)).unwrap();
    cluster.start_shard(copy.strip_prefix("shard-").unwrap().parse().unwrap());
    let started = Instant::now();
    while live_documents(&copy_address) != Some(DOCS as u64) {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the emptied replica never caught up (holds {:?})",
            live_documents(&copy_address)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // What it copied came from the peer's segments: the peer's log holds none of those vectors.
    cluster.kill(&peer);
    let wal = cluster
        .dir
        .path()
        .join(&peer)
        .join("collections/c/shard-0/wal");
    assert_eq!(logged_vectors(&wal), (0, DOCS));
    for i in 0..DOCS {
        let (s, b) = cluster
            .search(&json!({"query": "", "lanes": ["dense"], "k": 1, "vector": unit(i as u64)}));
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["degraded"], false, "{b}");
        assert_eq!(b["hits"][0]["doc_id"], format!("v{i}"), "{b}");
    }
}
