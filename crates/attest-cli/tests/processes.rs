//! The same fan-out across processes: two `attest serve --role shard` processes on loopback behind
//! `attest serve --role router`, reached through the gRPC shard client. Killing a shard gives degraded results
//! that name it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `attest ARGS` and returns it with the value of `key=` from its first stdout line.
fn start(args: &[&str], data: &Path, key: &str) -> (Proc, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("ATTEST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let value = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        .to_string();
    (Proc(child), value)
}

fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
        .post(url)
        .json(body)
        .send()
        .unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

#[test]
fn router_fans_out_to_shard_processes_and_reports_missing_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (shard_a, addr_a) = start(
        &["serve", "--role", "shard", "--grpc", "127.0.0.1:0"],
        &dir.path().join("a"),
        "grpc=",
    );
    let (_shard_b, addr_b) = start(
        &["serve", "--role", "shard", "--grpc", "127.0.0.1:0"],
        &dir.path().join("b"),
        "grpc=",
    );
    let nodes = format!("http://{addr_a},http://{addr_b}");
    let (_router, url) = start(
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
