//! The same fan-out across processes: a meta process, two `attest serve --role shard --meta ...` processes on
//! loopback and `attest serve --role router --meta ...`, the router reaching the shards through the gRPC shard
//! client. Killing a shard gives degraded results that name the shard it held.

mod common;

use common::{post, start, value_of, Logs};
use serde_json::{json, Value};

/// Starts `attest ARGS --data-dir DATA` quietly and returns it with the value of `key=` it printed.
fn start_role(args: &[&str], data: &std::path::Path, key: &str) -> (common::Proc, String) {
    let (proc, line) = start(args, Some(data), Logs::Quiet);
    (proc, value_of(&line, key))
}

/// The shards of collection `c` that node `node` holds, as `attest status --json` reports them.
fn shards_on(meta: &str, node: u64) -> Vec<u64> {
    let status = common::attest_json(&["status", "--json", "--meta", meta]);
    status["collections"][0]["placement"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["replicas"][0]["node"] == node)
        .map(|p| p["shard"].as_u64().unwrap())
        .collect()
}

#[test]
fn router_fans_out_to_shard_processes_and_reports_missing_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (_meta, meta_addr) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
        ],
        &dir.path().join("meta"),
        "grpc=",
    );
    let meta = format!("http://{meta_addr}");
    let shard = |name: &str| {
        let (proc, line) = start(
            &[
                "serve",
                "--insecure",
                "--role",
                "shard",
                "--meta",
                &meta,
                "--grpc",
                "127.0.0.1:0",
            ],
            Some(&dir.path().join(name)),
            Logs::Quiet,
        );
        let id: u64 = value_of(&line, "node_id=").parse().unwrap();
        (proc, id)
    };
    let (shard_a, node_a) = shard("a");
    let (_shard_b, _) = shard("b");
    let (_router, url) = start_role(
        &[
            "serve",
            "--insecure",
            "--role",
            "router",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--meta",
            &meta,
        ],
        &dir.path().join("router"),
        "http=",
    );
    assert_eq!(
        post(
            &format!("{url}/v1/collections"),
            &json!({"name": "c", "shards": 2, "replication": 1})
        )
        .0,
        201
    );
    let docs: Vec<Value> = (0..40)
        .map(|i| json!({"id": format!("d{i}"), "title": format!("Animal {i}"), "text": format!("Paragraph {i} is about animal number {i}: the {} lives in the forest.", ["fox", "owl", "bear", "deer"][i % 4])}))
        .collect();
    let (s, b) = post(
        &format!("{url}/v1/collections/c/documents"),
        &json!({"documents": docs}),
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(40)), "{b}");

    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 20}),
    );
    assert_eq!(s, 200, "{b}");
    let hits = b["hits"].as_array().unwrap();
    let shards: std::collections::HashSet<u64> =
        hits.iter().map(|h| h["shard"].as_u64().unwrap()).collect();
    assert_eq!(shards.len(), 2, "both shard processes answered: {b}");
    assert_eq!(b["degraded"], false);

    // Meta spreads the two shards over the two nodes: killing node a loses exactly the shard it held.
    let lost = shards_on(&meta, node_a);
    assert_eq!(lost.len(), 1, "one shard per node");
    drop(shard_a);
    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 20}),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["degraded"], true);
    assert_eq!(b["missing_shards"], json!(lost));
    assert!(
        b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["shard"] != lost[0]),
        "{b}"
    );
}
