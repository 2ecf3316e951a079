//! `attest dev` runs the cluster's control plane: a one-voter meta under `DATA_DIR/meta` and shard nodes that
//! register through the cluster agent. Restarting on the same data directory keeps collections, their chunking
//! and answer thresholds (kept in meta, applied by the answer tier without a restart) and documents (and the
//! nodes their ids); `attest status --meta <dev grpc address>` reports the nodes and the shard map.
//! `attest config check` prints the resolved configuration, or names every unknown key and invalid value.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{http, post, start_dev, Dev};
use serde_json::{json, Value};

const HERON: &str = "Which bird stands in shallow water waiting for fish?";

fn ask(dev: &Dev, question: &str) -> Value {
    let (s, b) = post(
        &format!("{}/v1/collections/notes/ask", dev.url),
        &json!({"question": question}),
    );
    assert_eq!(s, 200, "{b}");
    b
}

/// Asks until the answer tier's view of meta's thresholds gives `reason` (None: answered); the answer tier
/// applies meta's state a moment after meta does (its watch), so this waits on the condition, up to 20 s.
fn ask_until(dev: &Dev, question: &str, reason: Option<&str>) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let b = ask(dev, question);
        if b["reason"].as_str() == reason || std::time::Instant::now() > deadline {
            assert_eq!(b["reason"].as_str(), reason, "{b}");
            return b;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn put_thresholds(dev: &Dev, collection: &str, body: &Value) -> (u16, Value) {
    let r = http()
        .put(format!(
            "{}/v1/collections/{collection}/thresholds",
            dev.url
        ))
        .json(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn status(dev: &Dev) -> Value {
    common::attest_json(&["status", "--json", "--meta", &dev.grpc])
}

fn top_hit(dev: &Dev, query: &str) -> String {
    let (s, b) = post(
        &format!("{}/v1/collections/notes/search", dev.url),
        &json!({"query": query, "k": 3}),
    );
    assert_eq!(s, 200, "{b}");
    b["hits"][0]["doc_id"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// (node id, alive) of every shard node meta knows, sorted.
fn shard_nodes(status: &Value) -> Vec<(u64, bool)> {
    let mut nodes: Vec<(u64, bool)> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] == "shard")
        .map(|n| (n["id"].as_u64().unwrap(), n["alive"] == true))
        .collect();
    nodes.sort();
    nodes
}

#[test]
fn dev_restart_keeps_collections_documents_and_thresholds_in_meta() {
    let data = tempfile::tempdir().unwrap();
    let mut dev = start_dev(data.path());
    assert!(
        data.path().join("meta").is_dir(),
        "meta keeps its Raft log under DATA_DIR/meta"
    );
    let (s, b) = post(
        &format!("{}/v1/collections", dev.url),
        &json!({"name": "notes", "shards": 2, "chunking": {"max_tokens": 128}}),
    );
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["chunking"]["max_tokens"], 128, "{b}");
    assert_eq!(b["chunking"]["overlap_tokens"], 32, "{b}");
    let docs = json!({"documents": [
        {"id": "d0", "title": "Kestrels", "text": "The kestrel hovers over open fields while it hunts voles."},
        {"id": "d1", "title": "Beavers", "text": "Beavers build dams of branches and mud across slow streams."},
        {"id": "d2", "title": "Herons", "text": "A grey heron stands still in shallow water waiting for fish."},
    ]});
    let (s, b) = post(
        &format!("{}/v1/collections/notes/documents", dev.url),
        &docs,
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(3)), "{b}");
    assert_eq!(top_hit(&dev, "which bird waits in water for fish"), "d2");
    let answered = ask_until(&dev, HERON, None);
    assert!(
        answered["answer"].as_str().unwrap().contains("heron"),
        "{answered}"
    );

    // Thresholds go to meta through the router; the answer tier applies them without a restart.
    let (s, b) = put_thresholds(&dev, "notes", &json!({"min_confidence": 1.0}));
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["thresholds"]["min_confidence"], 1.0, "{b}");
    ask_until(&dev, HERON, Some("low_confidence"));
    for (body, field) in [
        (json!({"min_confidence": 1.5}), "min_confidence"),
        (json!({"min_confidence": 0.5, "coverage": -1}), "coverage"),
    ] {
        let (s, b) = put_thresholds(&dev, "notes", &body);
        assert_eq!((s, b["error"]["field"].as_str()), (400, Some(field)), "{b}");
    }
    let (s, b) = put_thresholds(&dev, "notes", &json!({"min_confidense": 0.5}));
    assert_eq!(s, 400, "unknown field: {b}");
    let (s, b) = put_thresholds(&dev, "nowhere", &json!({"min_confidence": 0.5}));
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (404, Some("NOT_FOUND")),
        "{b}"
    );

    let before = status(&dev);
    assert_eq!(before["leader"], 1, "{before}");
    assert_eq!(before["collections"][0]["name"], "notes", "{before}");
    assert_eq!(before["collections"][0]["shards"], 2, "{before}");
    assert_eq!(
        shard_nodes(&before),
        vec![(1, true), (2, true)],
        "two shard nodes registered through the agent: {before}"
    );

    dev.proc.terminate();
    let dev = start_dev(data.path());
    let listed: Value = http()
        .get(format!("{}/v1/collections", dev.url))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(listed["collections"][0]["name"], "notes", "{listed}");
    assert_eq!(
        top_hit(&dev, "which bird waits in water for fish"),
        "d2",
        "documents survive the restart"
    );
    assert_eq!(top_hit(&dev, "dams of mud"), "d1");
    assert_eq!(
        listed["collections"][0]["chunking"]["max_tokens"], 128,
        "{listed}"
    );
    assert_eq!(
        listed["collections"][0]["thresholds"]["min_confidence"], 1.0,
        "{listed}"
    );
    ask_until(&dev, HERON, Some("low_confidence"));
    let cleared: Value = http()
        .delete(format!("{}/v1/collections/notes/thresholds", dev.url))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(cleared["thresholds"], Value::Null, "{cleared}");
    ask_until(&dev, HERON, None);
    let after = status(&dev);
    assert_eq!(
        shard_nodes(&after),
        vec![(1, true), (2, true)],
        "the nodes registered again under their names, keeping their ids: {after}"
    );
    assert_eq!(
        after["collections"][0]["placement"], before["collections"][0]["placement"],
        "the shard map is the one meta kept"
    );
}

#[test]
fn dev_refuses_a_data_directory_of_the_static_catalog() {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("router")).unwrap();
    std::fs::write(data.path().join("router/catalog.json"), "{}").unwrap();
    let out = Command::new(common::attest_bin())
        .args(["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data.path())
        .env("ATTEST_LOG", "warn")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("older `attest dev`") && stderr.contains("catalog.json"),
        "{stderr}"
    );
    assert!(
        !data.path().join("meta").exists(),
        "nothing was started over the old data"
    );
}

#[test]
fn config_check_prints_the_resolved_config_or_names_every_mistake() {
    let dir = tempfile::tempdir().unwrap();
    let run = |file: &Path, env: &[(&str, &str)]| {
        let mut cmd = Command::new(common::attest_bin());
        cmd.args(["config", "check", "--config"]).arg(file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "router:\n  max_k: 50\n").unwrap();
    let out = run(&good, &[("ATTEST__AGENT__REPAIR_INTERVAL_MS", "5000")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resolved: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(resolved["router"]["max_k"], 50);
    assert_eq!(resolved["agent"]["repair_interval_ms"], 5000);
    assert_eq!(
        resolved["router"]["default_k"], 10,
        "defaults are filled in"
    );

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "router:\n  top_k: 5\nanswer:\n  ground_threshold: 2\n",
    )
    .unwrap();
    let out = run(&bad, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("router.top_k: unknown key"), "{stderr}");
    assert!(
        stderr.contains("answer.ground_threshold: must be between 0 and 1 (got 2)"),
        "{stderr}"
    );

    // A role refuses to start on it, with the same message.
    let out = Command::new(common::attest_bin())
        .args([
            "dev",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&bad)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("router.top_k: unknown key"));
}
