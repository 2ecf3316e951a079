//! The same fan-out across processes: two `attest serve --role shard` processes on loopback behind
//! `attest serve --role router`, reached through the gRPC shard client. Killing a shard gives degraded results
//! that name it.

mod common;

use common::{post, start, value_of, Logs};
use serde_json::{json, Value};

/// Starts `attest ARGS --data-dir DATA` quietly and returns it with the value of `key=` it printed.
fn start_role(args: &[&str], data: &std::path::Path, key: &str) -> (common::Proc, String) {
    let (proc, line) = start(args, Some(data), Logs::Quiet);
    (proc, value_of(&line, key))
}

#[test]
fn router_fans_out_to_shard_processes_and_reports_missing_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (shard_a, addr_a) = start_role(
        &["serve", "--role", "shard", "--grpc", "127.0.0.1:0"],
        &dir.path().join("a"),
        "grpc=",
    );
    let (_shard_b, addr_b) = start_role(
        &["serve", "--role", "shard", "--grpc", "127.0.0.1:0"],
        &dir.path().join("b"),
        "grpc=",
    );
    let nodes = format!("http://{addr_a},http://{addr_b}");
    let (_router, url) = start_role(
        &[
            "serve",
            "--role",
            "router",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--shard-nodes",
            &nodes,
        ],
        &dir.path().join("router"),
        "http=",
    );
    assert_eq!(
        post(
            &format!("{url}/v1/collections"),
            &json!({"name": "c", "shards": 2})
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

    drop(shard_a);
    let (s, b) = post(
        &format!("{url}/v1/collections/c/search"),
        &json!({"query": "where does the owl live", "k": 20}),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["degraded"], true);
    assert_eq!(b["missing_shards"], json!([0]));
    assert!(
        b["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["shard"] == 1),
        "{b}"
    );
}
