//! What crosses the wire between the router and its shards (issue 18), through the binary:
//! - fetch only what is returned: a search fans out for ids and scores, with the payloads of each shard's best
//!   few hits per lane, and the router fetches the title, text and metadata of the other hits it returns. The
//!   same searches against `attest dev` with `router.payload_inline_factor` 0 (every payload fetched) must give
//!   the same hits, field for field, with more fetches made (`router_replica_call_seconds_count{call}`);
//! - one fan-out per hop: a `SearchBatch` answers like its searches one by one with one call per shard, and an
//!   ask (rewrites, identifier lookups) costs one round trip per shard per hop.
//!
//! The bytes and calls these save against payloads in the fan-out and one `Search` per query are in
//! docs/bench/history.md ("Fetch only what is returned", "One fan-out per hop").

use crate::common;

use attest_proto::v1 as pb;
use attest_proto::v1::router_service_client::RouterServiceClient;
use common::{get_text, post, start_with_env, value_of, Logs, Proc};
use serde_json::{json, Value};

/// `attest dev` with these environment variables, the collection `c` made and `DOCS` documents ingested; its
/// HTTP and gRPC addresses.
fn dev_with(env: &[(&str, &str)], dir: &std::path::Path) -> (Proc, String) {
    let (proc, url, _) = dev_with_grpc(env, dir);
    (proc, url)
}

fn dev_with_grpc(env: &[(&str, &str)], dir: &std::path::Path) -> (Proc, String, String) {
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
    (proc, url, format!("http://{}", value_of(&line, "grpc=")))
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
    metric_sum(url, "router_replica_response_bytes_total{", call)
}

/// Calls made to shard replicas for `call` so far.
fn calls(url: &str, call: &str) -> f64 {
    metric_sum(url, "router_replica_call_seconds_count{", call)
}

/// The sum of the samples of `prefix` (a metric name and `{`) labelled `call="CALL"`.
fn metric_sum(url: &str, prefix: &str, call: &str) -> f64 {
    let (s, text) = get_text(&format!("{url}/metrics"));
    assert_eq!(s, 200);
    text.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(&format!("call=\"{call}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn the_router_fetches_only_the_payloads_it_returns() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    // The default: each shard inlines the payloads of its best few hits per lane; the rest are fetched.
    let (_inline, inline) = dev_with(&[], dirs[0].path());
    // Every payload fetched after fusion.
    let (_late, late) = dev_with(
        &[("ATTEST__ROUTER__PAYLOAD_INLINE_FACTOR", "0")],
        dirs[1].path(),
    );
    let servers = [&inline, &late];
    let before: Vec<f64> = servers.iter().map(|u| bytes(u, "search")).collect();
    let hits: Vec<Vec<Value>> = servers.iter().map(|u| search_all(u)).collect();
    for other in &hits[1..] {
        for (a, b) in hits[0].iter().zip(other) {
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
    }
    let received: Vec<f64> = servers
        .iter()
        .zip(&before)
        .map(|(u, b)| bytes(u, "search") - b + bytes(u, "fetch_chunks"))
        .collect();
    let [inline_bytes, late_bytes] = received[..] else {
        unreachable!()
    };
    let late_fetches = calls(&late, "fetch_chunks");
    assert!(late_fetches >= QUERIES.len() as f64, "{late_fetches}");
    let inline_fetches = calls(&inline, "fetch_chunks");
    assert!(
        inline_fetches < late_fetches,
        "{inline_fetches} fetches with the best hits inlined, {late_fetches} without"
    );
    eprintln!(
        "bytes from the shards for {} searches: {inline_bytes} (best hits inlined, {inline_fetches} fetches), \
         {late_bytes} (fetch after fusion, {late_fetches} fetches)",
        QUERIES.len(),
    );
}

fn search(query: &str, k: u32, lanes: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        collection: "c".into(),
        query: query.into(),
        k: Some(k),
        lanes: lanes.iter().map(|l| l.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn a_search_batch_answers_like_its_searches_with_one_call_per_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, url, grpc) = dev_with_grpc(&[], dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut router = rt.block_on(RouterServiceClient::connect(grpc)).unwrap();
    let searches = vec![
        search(QUERIES[0], 5, &[]),
        search(QUERIES[1], 3, &["bm25"]),
        search(QUERIES[2], 7, &["dense"]),
        search(QUERIES[3], 5, &[]),
    ];
    let one_by_one: Vec<pb::SearchResponse> = searches
        .iter()
        .map(|r| rt.block_on(router.search(r.clone())).unwrap().into_inner())
        .collect();
    let (search_calls, batch_calls) = (calls(&url, "search"), calls(&url, "search_batch"));
    let batch = rt
        .block_on(router.search_batch(pb::SearchBatchRequest {
            searches: searches.clone(),
        }))
        .unwrap()
        .into_inner();
    assert_eq!(
        calls(&url, "search_batch") - batch_calls,
        2.0,
        "one call per shard"
    );
    assert_eq!(calls(&url, "search"), search_calls, "no search one by one");
    assert_eq!(batch.results.len(), searches.len());
    for ((req, alone), batched) in searches.iter().zip(&one_by_one).zip(&batch.results) {
        assert_eq!(batched.hits.len(), req.k.unwrap() as usize, "{}", req.query);
        assert_eq!(alone.hits, batched.hits, "{}", req.query);
        assert!(!batched.degraded && !batched.fallback_mode);
    }
    assert!(batch.results[1].hits.iter().all(|h| h.dense.is_none()));
    assert!(batch.results[2].hits.iter().all(|h| h.bm25.is_none()));

    let refused = |searches: Vec<pb::SearchRequest>| {
        rt.block_on(
            router
                .clone()
                .search_batch(pb::SearchBatchRequest { searches }),
        )
        .unwrap_err()
    };
    let mut other = search("x", 5, &[]);
    other.collection = "d".into();
    let e = refused(vec![search("x", 5, &[]), other]);
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("searches[1]"), "{e:?}");
    let e = refused(vec![
        search("x", 5, &[]),
        search("y", 5, &[]),
        search(" ", 5, &[]),
    ]);
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("searches[2].query"), "{e:?}");
    let e = refused((0..33).map(|i| search(&format!("q{i}"), 5, &[])).collect());
    assert!(e.message().contains("at most 32"), "{e:?}");
    let e = refused(Vec::new());
    assert!(e.message().contains("empty batch"), "{e:?}");
}

#[test]
fn an_ask_costs_one_round_trip_per_shard_per_hop() {
    let dir = tempfile::tempdir().unwrap();
    let (_dev, url) = dev_with(&[], dir.path());
    // Rewrites (the question, its keywords) and an identifier lookup: three searches in the first hop.
    let question =
        "Which ship did the harbour master record arriving with crates of tea in entry ADR-12?";
    let ask = |url: &str| {
        let before = (calls(url, "search"), calls(url, "search_batch"));
        let (s, b) = post(
            &format!("{url}/v1/collections/c/ask"),
            &json!({ "question": question }),
        );
        assert_eq!(s, 200, "{b}");
        let after = (calls(url, "search"), calls(url, "search_batch"));
        (b, after.0 - before.0, after.1 - before.1)
    };
    let (b, search_calls, batch_calls) = ask(&url);
    let hops = b["hops"].as_f64().expect("hops in the response");
    assert!(hops >= 1.0, "{b}");
    assert_eq!(
        (search_calls, batch_calls),
        (0.0, 2.0 * hops),
        "one call per shard (2) per hop ({hops}); {b}"
    );
}
