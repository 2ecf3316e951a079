//! The cluster as a user runs it: `scripts/local-cluster.sh up` starts 3 meta + 3 shard + 1 router processes on
//! loopback; then, under ingest and query load, a shard process is SIGKILLed and restarted (no acknowledged write
//! lost, no failed query, the replica catches up), both replicas of a shard are killed (degraded results naming
//! it), the Raft leader is killed (a new leader, metadata writes resume; the failover time is printed), and a
//! 4th shard node is added and `attest cluster rebalance` moves replicas onto it without losing anything; that
//! node is then drained as a pod's preStop hook does (routers turn to its peers), restarted (the drain ends), and
//! decommissioned with `attest cluster drain --move` (its replicas move off; it is then killed, nothing lost).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use common::local_cluster::LocalCluster;
use common::{http, post};
use serde_json::{json, Value};

/// Searches shard node `i` has served (its `stage_latency_seconds{stage="shard_search"}` count).
fn shard_searches(cluster: &LocalCluster, i: u16) -> u64 {
    let text = http()
        .get(format!(
            "http://127.0.0.1:{}/metrics",
            cluster.shard_http_port(i)
        ))
        .send()
        .and_then(|r| r.text())
        .unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("stage_latency_seconds_count{") && l.contains("stage=\"shard_search\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// What shard node 4 serves of `searches` searches of both collections through the router.
fn served_by_node_4(cluster: &LocalCluster, searches: usize) -> u64 {
    let before = shard_searches(cluster, 4);
    for _ in 0..searches {
        for collection in ["c", "after_failover"] {
            let (s, b) = post(
                &format!("{}/v1/collections/{collection}/search", cluster.router),
                &json!({"query": "field note near the river", "k": 3, "lanes": ["bm25"]}),
            );
            assert_eq!(s, 200, "{b}");
            assert_eq!(b["degraded"], false, "{b}");
        }
    }
    shard_searches(cluster, 4) - before
}

fn node_of<'a>(state: &'a Value, name: &str) -> &'a Value {
    state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap()
}

/// Replicas (any state) the node `id` holds over every collection.
fn replicas_on(state: &Value, id: u64) -> usize {
    state["collections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["placement"].as_array().unwrap().iter())
        .flat_map(|s| s["replicas"].as_array().unwrap().iter())
        .filter(|r| r["node"].as_u64() == Some(id))
        .count()
}

/// A word that only document `i` contains (no vowels, so no stemmer touches it).
fn token(i: usize) -> String {
    let letters = b"bcdfghjklm";
    format!(
        "zq{}x",
        format!("{i:06}")
            .bytes()
            .map(|c| letters[(c - b'0') as usize] as char)
            .collect::<String>()
    )
}

fn doc(i: usize) -> Value {
    json!({"id": format!("d{i}"), "title": format!("Note {i}"),
        "text": format!("Field note {i} mentions {} near the river bank.", token(i))})
}

/// Waits until `check` holds, polling; panics with `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while started.elapsed() < limit {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out after {limit:?} waiting for {what}");
}

/// (collection shard) → live documents on each replica, read from every shard node's own Stats.
fn replica_counts(cluster: &LocalCluster, state: &Value) -> HashMap<u64, Vec<u64>> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let address: HashMap<u64, String> = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap(),
                n["address"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut out = HashMap::new();
    let c = state["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "c")
        .unwrap();
    for s in c["placement"].as_array().unwrap() {
        let shard = s["shard"].as_u64().unwrap();
        let mut counts = Vec::new();
        for r in s["replicas"].as_array().unwrap() {
            let addr = address[&r["node"].as_u64().unwrap()].clone();
            let count = rt.block_on(async {
                let mut client = pb::shard_service_client::ShardServiceClient::connect(addr)
                    .await
                    .ok()?;
                client
                    .stats(pb::ShardStatsRequest {
                        collection: "c".into(),
                        shard: shard as u32,
                    })
                    .await
                    .ok()
                    .map(|r| r.into_inner().live_documents)
            });
            counts.push(count.unwrap_or(u64::MAX));
        }
        out.insert(shard, counts);
    }
    let _ = cluster;
    out
}

fn assert_replicas_on_distinct_nodes(state: &Value) {
    for c in state["collections"].as_array().unwrap() {
        for s in c["placement"].as_array().unwrap() {
            let nodes: Vec<u64> = s["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["node"].as_u64().unwrap())
                .collect();
            let distinct: HashSet<u64> = nodes.iter().copied().collect();
            assert_eq!(
                distinct.len(),
                nodes.len(),
                "two replicas share a node: {s}"
            );
        }
    }
}

/// Every acknowledged document is found by its own word.
fn assert_all_found(cluster: &LocalCluster, acked: &[usize]) {
    let mut missing = Vec::new();
    for &i in acked {
        let (s, b) = cluster.search(&json!({"query": token(i), "k": 3, "lanes": ["bm25"]}));
        assert_eq!(s, 200, "{b}");
        if !b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["doc_id"] == format!("d{i}"))
        {
            missing.push(i);
        }
    }
    assert!(
        missing.is_empty(),
        "acknowledged documents lost: {missing:?}"
    );
}

#[test]
fn the_local_cluster_survives_shard_and_meta_failures_and_rebalances() {
    let cluster = LocalCluster::up();
    let state = cluster.status();
    let leader = state["leader"].as_u64().unwrap();
    assert!((1..=3).contains(&leader), "{state}");
    assert!(cluster.pid_file(&format!("meta-{leader}")).exists());
    assert_eq!(
        state["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["role"] == "shard")
            .count(),
        3
    );

    let (s, b) = post(
        &format!("{}/v1/collections", cluster.router),
        &json!({"name": "c", "shards": 2, "replication": 2}),
    );
    assert_eq!(s, 201, "{b}");
    let state = cluster.status();
    assert_replicas_on_distinct_nodes(&state);
    let placement = &state["collections"][0]["placement"];
    assert_eq!(placement.as_array().unwrap().len(), 2);
    assert!(placement
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["replicas"].as_array().unwrap().len() == 2));

    // Ingest and query load; SIGKILL shard 1 in the middle, then restart it.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<usize>::new()));
    let failed_queries = Arc::new(Mutex::new(Vec::<String>::new()));
    let queries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (stop, acked, url) = (
            Arc::clone(&stop),
            Arc::clone(&acked),
            cluster.router.clone(),
        );
        std::thread::spawn(move || {
            let mut next = 0;
            while !stop.load(Ordering::Relaxed) {
                let batch: Vec<Value> = (next..next + 5).map(doc).collect();
                let r = http()
                    .post(format!("{url}/v1/collections/c/documents"))
                    .json(&json!({"documents": batch}))
                    .send();
                if matches!(&r, Ok(r) if r.status().as_u16() == 200) {
                    acked.lock().unwrap().extend(next..next + 5);
                }
                next += 5;
            }
        })
    };
    let reader = {
        let (stop, failed, queries, url) = (
            Arc::clone(&stop),
            Arc::clone(&failed_queries),
            Arc::clone(&queries),
            cluster.router.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = http()
                    .post(format!("{url}/v1/collections/c/search"))
                    .json(&json!({"query": "field note near the river", "k": 5}))
                    .send();
                queries.fetch_add(1, Ordering::Relaxed);
                match r {
                    Ok(r) if r.status().as_u16() == 200 => {
                        let b: Value = r.json().unwrap();
                        if b["degraded"] == true {
                            failed.lock().unwrap().push(format!("degraded: {b}"));
                        }
                    }
                    Ok(r) => failed.lock().unwrap().push(format!(
                        "{}: {}",
                        r.status(),
                        r.text().unwrap_or_default()
                    )),
                    Err(e) => failed.lock().unwrap().push(e.to_string()),
                }
            }
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    cluster.kill("shard-1");
    std::thread::sleep(Duration::from_secs(4));
    cluster.start_shard(1);
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    reader.join().unwrap();
    let acked: Vec<usize> = acked.lock().unwrap().clone();
    let failed = failed_queries.lock().unwrap().clone();
    eprintln!(
        "load: {} documents acknowledged, {} queries, {} failed",
        acked.len(),
        queries.load(Ordering::Relaxed),
        failed.len()
    );
    assert!(
        acked.len() >= 50,
        "too few writes acknowledged: {}",
        acked.len()
    );
    assert!(
        failed.is_empty(),
        "queries failed with one replica down: {failed:?}"
    );

    // The restarted replica catches up: every replica of a shard ends with the same documents.
    wait_until(Duration::from_secs(60), "replicas to converge", || {
        let state = cluster.status();
        let counts = replica_counts(&cluster, &state);
        counts
            .values()
            .all(|c| c.iter().all(|n| *n == c[0] && *n != u64::MAX))
    });
    assert_all_found(&cluster, &acked);

    // Both replicas of shard 0 down → results degraded, naming shard 0.
    let state = cluster.status();
    let shard0: Vec<u64> = state["collections"][0]["placement"][0]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["node"].as_u64().unwrap())
        .collect();
    let name_of: HashMap<u64, String> = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap(),
                n["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for n in &shard0 {
        cluster.kill(&name_of[n]);
    }
    let (s, b) = cluster.search(&json!({"query": "field note near the river", "k": 5}));
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["degraded"], true, "{b}");
    assert_eq!(b["missing_shards"], json!([0]), "{b}");
    for n in &shard0 {
        let i: u16 = name_of[n].trim_start_matches("shard-").parse().unwrap();
        cluster.start_shard(i);
    }
    wait_until(Duration::from_secs(60), "shard 0 back", || {
        let (s, b) = cluster.search(&json!({"query": "field note near the river", "k": 5}));
        s == 200 && b["degraded"] == false
    });

    // Kill the Raft leader: a new one is elected and metadata writes resume.
    let leader = cluster.status()["leader"].as_u64().unwrap();
    let killed_at = Instant::now();
    cluster.kill(&format!("meta-{leader}"));
    let mut created = false;
    let mut new_leader = 0;
    let mut last = (0, Value::Null);
    while killed_at.elapsed() < Duration::from_secs(30) {
        last = post(
            &format!("{}/v1/collections", cluster.router),
            &json!({"name": "after_failover", "shards": 1, "replication": 2}),
        );
        // 200: an earlier try that timed out was applied after all (creating again is idempotent).
        if last.0 == 201 || last.0 == 200 {
            created = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let failover = killed_at.elapsed();
    assert!(
        created,
        "no metadata write succeeded after the leader was killed; last answer {} {}",
        last.0, last.1
    );
    wait_until(Duration::from_secs(10), "a new leader in status", || {
        let st = cluster.status();
        new_leader = st["leader"].as_u64().unwrap_or(0);
        new_leader != 0 && new_leader != leader
    });
    eprintln!("meta leader failover: leader {leader} killed, leader {new_leader} took writes after {failover:?}");

    // A 4th shard node; rebalance moves replicas onto it and loses nothing.
    cluster.start_shard(4);
    wait_until(Duration::from_secs(30), "shard node 4 registered", || {
        cluster.status()["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "shard-4" && n["alive"] == true)
    });
    let plan = common::attest_json(&["cluster", "rebalance", "--json", "--meta", &cluster.metas]);
    assert!(!plan["moves"].as_array().unwrap().is_empty(), "{plan}");
    wait_until(
        Duration::from_secs(60),
        "every moved replica active",
        || {
            let st = cluster.status();
            st["collections"].as_array().unwrap().iter().all(|c| {
                c["placement"].as_array().unwrap().iter().all(|s| {
                    s["replicas"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|r| r["state"] == "active")
                })
            })
        },
    );
    let state = cluster.status();
    assert_replicas_on_distinct_nodes(&state);
    let node4 = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "shard-4")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    let on_node4 = replicas_on(&state, node4);
    assert!(
        on_node4 >= 1,
        "rebalance put nothing on the new node: {state}"
    );
    assert!(state["collections"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["placement"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["replicas"].as_array().unwrap().len() == 2)));
    assert_all_found(&cluster, &acked);

    // A restart drain (the shard pod's preStop hook): routers read from the node's peers; nothing moves.
    let served_before = served_by_node_4(&cluster, 20);
    assert!(
        served_before >= 5,
        "node 4 served {served_before} searches before the drain: too few to compare"
    );
    let drained = common::attest_json(&[
        "cluster",
        "drain",
        "--node",
        "shard-4",
        "--wait",
        "--json",
        "--meta",
        &cluster.metas,
    ]);
    assert_eq!(drained["draining"], "restart", "{drained}");
    assert_eq!(drained["unserved"], json!([]), "{drained}");
    let state = cluster.status();
    assert_eq!(node_of(&state, "shard-4")["draining"], "restart", "{state}");
    assert_eq!(
        replicas_on(&state, node4),
        on_node4,
        "a restart drain moved replicas"
    );
    let served_draining = served_by_node_4(&cluster, 20);
    eprintln!("node 4 served {served_before} of 40 searches before its drain, {served_draining} while draining");
    assert!(
        served_draining * 4 <= served_before,
        "a draining node still serves reads: {served_draining} of 40 searches, {served_before} before the drain"
    );
    // The pod comes back: registering again ends a restart drain.
    cluster.kill("shard-4");
    cluster.start_shard(4);
    wait_until(Duration::from_secs(30), "shard-4 back in service", || {
        let node = node_of(&cluster.status(), "shard-4").clone();
        node["alive"] == true && node["draining"] == "none"
    });

    // Decommission before a scale-in: every replica moves off; then the node can go without losing anything.
    let drained = common::attest_json(&[
        "cluster",
        "drain",
        "--node",
        "shard-4",
        "--move",
        "--wait",
        "--timeout-secs",
        "120",
        "--json",
        "--meta",
        &cluster.metas,
    ]);
    assert_eq!(drained["draining"], "decommission", "{drained}");
    assert_eq!(drained["replicas"], 0, "{drained}");
    let state = cluster.status();
    assert_eq!(replicas_on(&state, node4), 0, "{state}");
    assert_replicas_on_distinct_nodes(&state);
    assert!(state["collections"].as_array().unwrap().iter().all(|c| {
        c["placement"].as_array().unwrap().iter().all(|s| {
            let replicas = s["replicas"].as_array().unwrap();
            replicas.len() == 2 && replicas.iter().all(|r| r["state"] == "active")
        })
    }));
    cluster.kill("shard-4");
    assert_all_found(&cluster, &acked);
}
