//! Fetch only what is returned (issue 18): through the binary, a search fans out for ids and scores and the
//! router fetches the title, text and metadata of the hits it returns. The same searches against `attest dev`
//! with `router.payload_in_fanout` (the behaviour before) must give the same hits, field for field, while the
//! shards send a fraction of the bytes (`router_replica_response_bytes_total`).

mod common;

use common::{get_text, post, start_with_env, value_of, Logs, Proc};
use serde_json::{json, Value};

/// `attest dev` with these environment variables, the collection `c` made and `DOCS` documents ingested.
fn dev_with(env: &[(&str, &str)], dir: &std::path::Path) -> (Proc, String) {
    let (proc, line) = start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(dir),
        Logs::Quiet,
        env,
    );
    let url = value_of(&line, "http=");
    let (s, b) = post(
        &format!("{url}/v1/collections"),
        &json!({"name": "c", "shards": 2}),
    );
    assert_eq!(s, 201, "{b}");
    let docs: Vec<Value> = (0..DOCS)
        .map(|i| {
            json!({
                "id": format!("d{i}"),
                "title": format!("Harbour log {i}"),
                "text": format!(
                    "Entry {i}: the harbour master recorded ship {i} arriving with {} crates of tea and {} of \
                     salt. The tide was {} metres and the wind came from the {}. {}",
                    i * 7 % 50, i * 3 % 20, i % 6, ["north", "east", "south", "west"][i % 4],
                    "Cargo manifests were checked twice before unloading began at the eastern quay. ".repeat(3)
                ),
                "metadata": {"n": i, "quay": if i % 2 == 0 { "east" } else { "west" }},
            })
        })
        .collect();
    let (s, b) = post(
        &format!("{url}/v1/collections/c/documents"),
        &json!({ "documents": docs }),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["accepted"], DOCS, "{b}");
    (proc, url)
}

const DOCS: usize = 60;
const QUERIES: [&str; 4] = [
    "which ship arrived with crates of tea",
    "wind from the west",
    "harbour master tide metres",
    "cargo manifests checked at the eastern quay",
];

fn search_all(url: &str) -> Vec<Value> {
    QUERIES
        .iter()
        .map(|q| {
            let (s, b) = post(
                &format!("{url}/v1/collections/c/search"),
                &json!({"query": q, "k": 5}),
            );
            assert_eq!(s, 200, "{b}");
            assert_eq!(b["hits"].as_array().unwrap().len(), 5, "{b}");
            b["hits"].clone()
        })
        .collect()
}

/// Bytes the shard replicas sent for `call` so far.
fn bytes(url: &str, call: &str) -> f64 {
    let (s, text) = get_text(&format!("{url}/metrics"));
    assert_eq!(s, 200);
    text.lines()
        .filter(|l| {
            l.starts_with("router_replica_response_bytes_total{")
                && l.contains(&format!("call=\"{call}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn the_router_fetches_only_the_payloads_it_returns() {
    let (late_dir, fanout_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_late, late) = dev_with(&[], late_dir.path());
    let (_fanout, fanout) = dev_with(
        &[("ATTEST__ROUTER__PAYLOAD_IN_FANOUT", "true")],
        fanout_dir.path(),
    );
    let (late_before, fanout_before) = (bytes(&late, "search"), bytes(&fanout, "search"));
    let late_hits = search_all(&late);
    let fanout_hits = search_all(&fanout);
    for (a, b) in late_hits.iter().zip(&fanout_hits) {
        for (x, y) in a.as_array().unwrap().iter().zip(b.as_array().unwrap()) {
            for field in ["chunk_id", "doc_id", "title", "text", "metadata", "shard"] {
                assert_eq!(x[field], y[field], "{field} differs:\n{x}\n{y}");
            }
            assert!(
                x["text"].as_str().unwrap().contains("harbour master"),
                "{x}"
            );
        }
    }
    let late_bytes = bytes(&late, "search") - late_before + bytes(&late, "fetch_chunks");
    let fanout_bytes = bytes(&fanout, "search") - fanout_before;
    assert_eq!(
        bytes(&fanout, "fetch_chunks"),
        0.0,
        "payloads in the fan-out need no fetch"
    );
    assert!(bytes(&late, "fetch_chunks") > 0.0);
    eprintln!(
        "bytes from the shards for {} searches: {late_bytes} (fetch after fusion) vs {fanout_bytes} (payloads in \
         the fan-out), ratio {:.3}",
        QUERIES.len(),
        late_bytes / fanout_bytes
    );
    assert!(
        late_bytes * 3.0 < fanout_bytes,
        "{late_bytes} bytes with the fetch after fusion, {fanout_bytes} with payloads in the fan-out"
    );
}
