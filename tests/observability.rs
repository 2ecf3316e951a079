//! Observability across real processes: an embedder, a shard, a router and an answer tier
//! (`attest serve --role ...`) on loopback. One request id given by the caller shows up in the JSON logs of
//! every hop it crossed (router → embedder over HTTP, router → shard over gRPC, answer → router → shard over
//! gRPC); `/metrics` parses as Prometheus text on every role (meta included) and holds that role's metrics; `/healthz`,
//! `/readyz` and the gRPC health service answer on every role, `attest dev` included. The per-collection metrics
//! (`attest_collection_*`) of two collections move apart, and a collection past the label cap counts as `other`.

use crate::common;

use std::path::Path;

use common::{get_text, http, post, start, start_with_env, value_of, Logs, Proc};
use serde_json::{json, Value};

const TRACE_ID: &str = "req-observability-trace-1";
const ASK_TRACE_ID: &str = "req-observability-ask-2";

fn scrape(base: &str) -> prometheus_parse::Scrape {
    let (status, text) = get_text(&format!("{base}/metrics"));
    assert_eq!(status, 200);
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .unwrap_or_else(|e| panic!("{base}/metrics is not Prometheus text: {e}\n{text}"))
}

fn value(
    scrape: &prometheus_parse::Scrape,
    name: &str,
    label: Option<(&str, &str)>,
) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .find(|s| label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            _ => f64::NAN,
        })
}

fn has_histogram(scrape: &prometheus_parse::Scrape, stage: &str) -> bool {
    scrape.samples.iter().any(|s| {
        s.metric.starts_with("stage_latency_seconds") && s.labels.get("stage") == Some(stage)
    })
}

fn assert_health(base: &str) {
    assert_eq!(get_text(&format!("{base}/healthz")).0, 200, "{base}");
    assert_eq!(get_text(&format!("{base}/readyz")).0, 200, "{base}");
}

/// Every line is one JSON object with the required keys; returns the lines that carry `TRACE_ID`.
fn traced_lines(log: &Path) -> Vec<Value> {
    lines_with(log, TRACE_ID)
}

fn lines_with(log: &Path, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            for key in ["timestamp", "level", "component", "request_id", "event"] {
                assert!(v.get(key).is_some(), "{key} missing: {l}");
            }
            v
        })
        .filter(|v| v["request_id"] == id)
        .collect()
}

#[test]
fn request_ids_cross_every_hop_and_every_role_serves_metrics() {
    let dir = common::RunDir::new();
    let logs = |name: &str| dir.path().join(format!("{name}.log"));

    let (mut embedder, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "embedder",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
        ],
        None,
        Logs::InfoTo(&logs("embedder")),
    );
    let (embedder_url, embedder_grpc) = (value_of(&line, "http="), value_of(&line, "grpc="));
    let (mut meta, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "meta",
            "--meta-id",
            "1",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        Some(&dir.path().join("meta")),
        Logs::InfoTo(&logs("meta")),
    );
    let meta_ops = value_of(&line, "http=");
    let meta_url = format!("http://{}", value_of(&line, "grpc="));
    let (mut shard, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "shard",
            "--meta",
            &meta_url,
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        Some(&dir.path().join("shard")),
        Logs::InfoTo(&logs("shard")),
    );
    let (shard_grpc, shard_url) = (value_of(&line, "grpc="), value_of(&line, "http="));
    let (mut router, line) = start(
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
            &meta_url,
            "--embedder-url",
            &embedder_url,
        ],
        Some(&dir.path().join("router")),
        Logs::InfoTo(&logs("router")),
    );
    let (router_url, router_grpc) = (value_of(&line, "http="), value_of(&line, "grpc="));
    let (mut answer, line) = start(
        &[
            "serve",
            "--insecure",
            "--role",
            "answer",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--router",
            &format!("http://{router_grpc}"),
        ],
        None,
        Logs::InfoTo(&logs("answer")),
    );
    let (answer_url, answer_grpc) = (value_of(&line, "http="), value_of(&line, "grpc="));

    let (s, b) = post(
        &format!("{router_url}/v1/collections"),
        &json!({"name": "c", "shards": 1, "replication": 1}),
    );
    assert_eq!(s, 201, "{b}");
    let docs = json!({"documents": [
        {"id": "owl", "text": "The barn owl hunts at night over open fields."},
        {"id": "fox", "text": "The red fox lives at the edge of the forest."},
        {"id": "eel", "text": "The European eel migrates to the Sargasso Sea to spawn."},
    ]});
    let (s, b) = post(&format!("{router_url}/v1/collections/c/documents"), &docs);
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(3)), "{b}");

    let resp = http()
        .post(format!("{router_url}/v1/collections/c/search"))
        .header("x-request-id", TRACE_ID)
        .json(&json!({"query": "which animal hunts at night", "k": 3}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["x-request-id"], TRACE_ID);
    let body: Value = resp.json().unwrap();
    assert_eq!(body["request_id"], TRACE_ID);
    assert_eq!(body["fallback_mode"], false);
    assert_eq!(body["hits"][0]["doc_id"], "owl", "{body}");

    // The answer tier reaches the shard through the router's gRPC service, carrying the id.
    let resp = http()
        .post(format!("{answer_url}/v1/collections/c/ask"))
        .header("x-request-id", ASK_TRACE_ID)
        .json(&json!({"question": "Which animal hunts at night over open fields?"}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let body: Value = resp.json().unwrap();
    assert_eq!(body["request_id"], ASK_TRACE_ID);
    assert_eq!(body["status"], "answered", "{body}");
    assert_eq!(body["citations"][0]["doc_id"], "owl", "{body}");

    // Metrics and health on every role.
    for base in [
        &router_url,
        &shard_url,
        &embedder_url,
        &answer_url,
        &meta_ops,
    ] {
        assert_health(base);
    }
    for addr in [&router_grpc, &shard_grpc, &embedder_grpc, &answer_grpc] {
        assert_eq!(
            common::grpc_health(addr, ""),
            1,
            "gRPC health SERVING on {addr}"
        );
    }
    let a = scrape(&answer_url);
    for stage in ["retrieve", "generate", "verify", "ask_total"] {
        assert!(has_histogram(&a, stage), "answer histogram {stage}");
    }
    assert!(value(&a, "claims_checked_total", None).unwrap() >= 1.0);
    let r = scrape(&router_url);
    assert!(value(&r, "embedding_request_total", None).unwrap() >= 2.0);
    assert_eq!(value(&r, "embedding_fallback_total", None), Some(0.0));
    assert_eq!(
        value(&r, "circuit_breaker_state", Some(("service", "embeddings"))),
        Some(0.0)
    );
    assert_eq!(
        value(
            &r,
            "circuit_breaker_trip_total",
            Some(("service", "embeddings"))
        ),
        Some(0.0)
    );
    for stage in ["embed", "fanout", "fuse", "total"] {
        assert!(has_histogram(&r, stage), "router histogram {stage}");
    }
    // Meta: term, leader, commit and applied index, proposals (the shard's registration, the collection) and
    // the election that made it leader.
    let m = scrape(&meta_ops);
    assert_eq!(value(&m, "raft_leader", Some(("meta_id", "1"))), Some(1.0));
    assert!(value(&m, "raft_term", Some(("meta_id", "1"))).unwrap() >= 1.0);
    let applied = value(&m, "raft_applied_index", Some(("meta_id", "1"))).unwrap();
    assert!(
        applied >= 3.0,
        "registration and collection applied: {applied}"
    );
    assert!(value(&m, "raft_commit_index", Some(("meta_id", "1"))).unwrap() >= applied);
    assert!(value(&m, "raft_proposals_total", Some(("meta_id", "1"))).unwrap() >= 2.0);
    assert!(value(&m, "raft_elections_total", Some(("meta_id", "1"))).unwrap() >= 1.0);
    let s = scrape(&shard_url);
    assert_eq!(
        value(&s, "shard_chunks", Some(("collection", "c"))),
        Some(3.0)
    );
    assert_eq!(
        value(&s, "shard_segments", Some(("collection", "c"))),
        Some(0.0)
    );
    assert!(has_histogram(&s, "shard_search"));
    let e = scrape(&embedder_url);
    assert!(value(&e, "embed_server_texts_total", None).unwrap() >= 4.0);
    assert!(has_histogram(&e, "embed"));

    // The trace id in every hop's logs.
    for p in [
        &mut answer,
        &mut router,
        &mut shard,
        &mut embedder,
        &mut meta,
    ] {
        p.terminate();
    }
    assert!(
        lines_with(&logs("answer"), ASK_TRACE_ID)
            .iter()
            .any(|l| l["event"] == "http_request"),
        "answer log"
    );
    assert!(
        lines_with(&logs("shard"), ASK_TRACE_ID)
            .iter()
            .any(|l| l["event"] == "shard_searched"),
        "the ask's id reached the shard"
    );
    let router_lines = traced_lines(&logs("router"));
    assert!(
        router_lines
            .iter()
            .any(|l| l["event"] == "http_request" && l["path"] == "/v1/collections/c/search"),
        "router: {router_lines:?}"
    );
    let shard_lines = traced_lines(&logs("shard"));
    assert!(
        shard_lines.iter().any(|l| l["event"] == "shard_searched"),
        "shard: {shard_lines:?}"
    );
    let embedder_lines = traced_lines(&logs("embedder"));
    assert!(
        embedder_lines.iter().any(|l| l["event"] == "embedded"),
        "embedder: {embedder_lines:?}"
    );
}

#[test]
fn dev_serves_metrics_and_health_on_its_one_address() {
    let dir = common::RunDir::new();
    let (_dev, line): (Proc, String) = start(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(dir.path()),
        Logs::Quiet,
    );
    let url = value_of(&line, "http=");
    assert_health(&url);
    let (s, b) = post(&format!("{url}/v1/collections"), &json!({"name": "c"}));
    assert_eq!(s, 201, "{b}");
    let (s, _) = post(
        &format!("{url}/v1/collections/c/documents"),
        &json!({"documents": [{"id": "a", "text": "Metrics are scraped by Prometheus."}]}),
    );
    assert_eq!(s, 200);
    let m = scrape(&url);
    assert!(value(&m, "embedding_request_total", None).unwrap() >= 1.0);
    let chunks: f64 = m
        .samples
        .iter()
        .filter(|s| s.metric == "shard_chunks" && s.labels.get("collection") == Some("c"))
        .map(|s| match s.value {
            prometheus_parse::Value::Gauge(v) => v,
            _ => 0.0,
        })
        .sum();
    assert_eq!(chunks, 1.0, "one chunk over the dev shard nodes");
}

/// The sum of `name`'s samples whose labels hold every pair of `labels`.
fn sum_where(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) => v,
            _ => 0.0,
        })
        .sum()
}

#[test]
fn collections_are_metered_apart_and_past_the_cap_as_other() {
    let dir = common::RunDir::new();
    // Two collections (and two tenants) get their own series; a third is `other`.
    let (_dev, line) = start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(dir.path()),
        Logs::Quiet,
        &[
            ("ATTEST__ROUTER__METRICS_LABEL_CAP", "2"),
            ("ATTEST__ANSWER__METRICS_LABEL_CAP", "2"),
        ],
    );
    let url = value_of(&line, "http=");
    for name in ["alpha", "beta", "gamma"] {
        let (s, b) = post(&format!("{url}/v1/collections"), &json!({"name": name}));
        assert_eq!(s, 201, "{b}");
    }
    let alpha_texts = [
        "Prometheus scrapes the router every fifteen seconds.",
        "Grafana draws the latency of each collection as a line.",
        "Alert rules fire when the error ratio stays above one percent.",
    ];
    let docs: Vec<Value> = alpha_texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("a{i}"), "text": t}))
        .collect();
    let (s, b) = post(
        &format!("{url}/v1/collections/alpha/documents"),
        &json!({"documents": docs}),
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(3)), "{b}");
    // One request, two tenants: the request is `mixed`, the documents count under their own tenants.
    let (s, b) = post(
        &format!("{url}/v1/collections/beta/documents"),
        &json!({"documents": [
            {"id": "b0", "text": "Tomatoes ripen faster next to bananas."},
            {"id": "b1", "text": "Basil keeps best in a glass of water.", "tenant": "acme"},
        ]}),
    );
    assert_eq!((s, b["accepted"].as_u64()), (200, Some(2)), "{b}");
    let (s, b) = post(
        &format!("{url}/v1/collections/gamma/documents"),
        &json!({"documents": [{"id": "g0", "text": "Granite is an igneous rock."}]}),
    );
    assert_eq!(s, 200, "{b}");
    for _ in 0..3 {
        let (s, b) = post(
            &format!("{url}/v1/collections/alpha/search"),
            &json!({"query": "scrape interval"}),
        );
        assert_eq!(s, 200, "{b}");
    }
    let (s, b) = post(
        &format!("{url}/v1/collections/beta/search"),
        &json!({"query": "basil"}),
    );
    assert_eq!(s, 200, "{b}");
    let (s, b) = post(
        &format!("{url}/v1/collections/gamma/search"),
        &json!({"query": "rock"}),
    );
    assert_eq!(s, 200, "{b}");
    // A collection that does not exist takes no slot and no series of its own.
    let (s, _) = post(
        &format!("{url}/v1/collections/nope/search"),
        &json!({"query": "anything"}),
    );
    assert_eq!(s, 404);
    let (s, asked) = post(
        &format!("{url}/v1/collections/alpha/ask"),
        &json!({"question": "How often does Prometheus scrape the router?"}),
    );
    assert_eq!(s, 200, "{asked}");

    let m = scrape(&url);
    let requests = "attest_collection_requests_total";
    let req = |collection: &str, op: &str, code: &str| {
        sum_where(
            &m,
            requests,
            &[("collection", collection), ("op", op), ("code", code)],
        )
    };
    assert_eq!(req("alpha", "search", "OK"), 3.0);
    assert_eq!(req("beta", "search", "OK"), 1.0);
    assert_eq!(req("alpha", "ingest", "OK"), 1.0);
    assert_eq!(req("beta", "ingest", "OK"), 1.0);
    assert_eq!(req("alpha", "ask", "OK"), 1.0);
    assert_eq!(req("beta", "ask", "OK"), 0.0);
    assert_eq!(
        sum_where(
            &m,
            requests,
            &[
                ("collection", "beta"),
                ("op", "ingest"),
                ("tenant", "mixed")
            ]
        ),
        1.0
    );
    // Past the cap of 2: gamma is `other`, and so is the missing collection's NOT_FOUND.
    assert_eq!(req("other", "search", "OK"), 1.0);
    assert_eq!(req("other", "ingest", "OK"), 1.0);
    assert_eq!(req("other", "search", "NOT_FOUND"), 1.0);
    for name in ["gamma", "nope"] {
        assert!(
            !m.samples
                .iter()
                .any(|s| s.labels.get("collection") == Some(name)
                    && s.metric.starts_with("attest_collection_")),
            "{name} has series of its own"
        );
    }

    let docs_total = "attest_collection_ingest_documents_total";
    assert_eq!(sum_where(&m, docs_total, &[("collection", "alpha")]), 3.0);
    assert_eq!(
        sum_where(
            &m,
            docs_total,
            &[("collection", "beta"), ("tenant", "acme")]
        ),
        1.0
    );
    assert_eq!(
        sum_where(
            &m,
            docs_total,
            &[("collection", "beta"), ("tenant", "default")]
        ),
        1.0
    );
    let alpha_bytes: usize = alpha_texts.iter().map(|t| t.len()).sum();
    assert_eq!(
        sum_where(
            &m,
            "attest_collection_ingest_bytes_total",
            &[("collection", "alpha")]
        ),
        alpha_bytes as f64
    );
    assert!(m.samples.iter().any(
        |s| s.metric.starts_with("attest_collection_request_seconds")
            && s.labels.get("collection") == Some("alpha")
            && s.labels.get("op") == Some("search")
    ));
    let abstained = f64::from(u8::from(asked["status"] != "answered"));
    let abstentions = "attest_collection_abstentions_total";
    assert_eq!(
        sum_where(&m, abstentions, &[("collection", "alpha")]),
        abstained,
        "{asked}"
    );
    assert_eq!(sum_where(&m, abstentions, &[("collection", "beta")]), 0.0);
}

/// The live recall estimate through the real binary (issue 73): with every search sampled, the shards run the
/// searches again exactly in the background and report the recall they measured in `GET .../stats` and as
/// `attest_search_recall_estimate`. The rows are unsealed (a flat scan, itself exact), so the recall is 1. Each
/// estimate counts the router's merge over the collection's shards: learned at creation (EnsureShard), and after a
/// restart from the node's pass over the shard map.
#[test]
fn searches_report_the_recall_they_delivered() {
    let dir = common::RunDir::new();
    let start_dev = || -> (Proc, String) {
        let (dev, line) = start_with_env(
            &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
            Some(dir.path()),
            Logs::Quiet,
            &[
                ("ATTEST__ENGINE__RECALL_PROBE__SAMPLE_RATE", "1"),
                ("ATTEST__ENGINE__RECALL_PROBE__CPU_SHARE", "1"),
                ("ATTEST__ENGINE__RECALL_PROBE__GATHER_MS", "0"),
            ],
        );
        (dev, value_of(&line, "http="))
    };
    let (mut dev, url) = start_dev();
    let (s, b) = post(&format!("{url}/v1/collections"), &json!({"name": "c"}));
    assert_eq!(s, 201, "{b}");
    let documents: Vec<Value> = (0..12)
        .map(|i| json!({"id": format!("d{i}"), "text": format!("Note {i} on recall, probes and lists.")}))
        .collect();
    let (s, b) = post(
        &format!("{url}/v1/collections/c/documents"),
        &json!({ "documents": documents }),
    );
    assert_eq!(s, 200, "{b}");
    let (estimates, shards) = estimates_after_searches(&url, |_| true);
    assert!(shards >= 2, "the default collection spans shards");
    for e in &estimates {
        assert_eq!(e["recall"].as_f64(), Some(1.0), "{e}");
        // Counted over the router's merge: each replica learned its collection's shard count.
        assert_eq!(e["shards"].as_u64(), Some(shards), "{e}");
        assert!(
            e["low"].as_f64().unwrap() <= 1.0 && e["high"].as_f64() == Some(1.0),
            "{e}"
        );
    }
    let m = scrape(&url);
    let recall = value(
        &m,
        "attest_search_recall_estimate",
        Some(("collection", "c")),
    );
    assert_eq!(recall, Some(1.0), "the gauge of a shard's estimate");

    // Restarted: no EnsureShard this time; the replicas learn the count from the shard map.
    dev.terminate();
    let (_dev, url) = start_dev();
    // The node's first pass over the shard map may follow the first samples by a moment: waited for, bounded.
    estimates_after_searches(&url, |estimates| {
        estimates
            .iter()
            .all(|e| e["shards"].as_u64() == Some(shards))
    });
}

/// Searches the collection `c` six times and waits (bounded) until the probe has sampled them, off the request
/// path, and `done` holds of the shards' estimates: the estimates and the shard count.
fn estimates_after_searches(url: &str, done: impl Fn(&[Value]) -> bool) -> (Vec<Value>, u64) {
    for i in 0..6 {
        let (s, b) = post(
            &format!("{url}/v1/collections/c/search"),
            &json!({"query": format!("note {i} on probes"), "k": 3}),
        );
        assert_eq!(s, 200, "{b}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (s, body) = get_text(&format!("{url}/v1/collections/c/stats"));
        assert_eq!(s, 200, "{body}");
        let stats: Value = serde_json::from_str(&body).unwrap();
        let shards = stats["shards"].as_array().unwrap().len() as u64;
        let estimates: Vec<Value> = stats["shards"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|shard| shard.get("recall").cloned())
            .collect();
        let samples: u64 = estimates.iter().filter_map(|e| e["samples"].as_u64()).sum();
        if samples >= 6 && done(&estimates) {
            return (estimates, shards);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no recall samples, or not as expected: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Clustered unit vectors of the dev embedder's dimension (the same every run): 20 centres, each row its centre
/// plus noise of about the same length.
fn clustered_vectors(n: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            let (centre, noise) = (
                common::unit(1_000 + (i % 20) as u64),
                common::unit(i as u64),
            );
            let v: Vec<f32> = centre
                .iter()
                .zip(&noise)
                .map(|(c, e)| c + 0.8 * e)
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect()
        })
        .collect()
}

/// The recall target through the real binary (issue 73): a collection states `index.recall_target`, `GET` shows
/// it (0.95 when the index names neither a target nor an nprobe; none when it names an nprobe alone), a target
/// out of range is refused, and after a seal each shard tunes its search setting in the background and reports
/// it in `GET .../stats`.
#[test]
fn a_collection_states_a_recall_target_and_its_shards_tune_for_it() {
    let dir = common::RunDir::new();
    let (_dev, line): (Proc, String) = start_with_env(
        &["dev", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
        Some(dir.path()),
        Logs::Quiet,
        &[("ATTEST__ENGINE__SEARCH_TUNING__CPU_SHARE", "1")],
    );
    let url = value_of(&line, "http=");
    let index_of = |name: &str| {
        let (s, body) = get_text(&format!("{url}/v1/collections/{name}"));
        assert_eq!(s, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["index"].clone()
    };
    for (body, shown) in [
        (json!({"name": "dflt"}), Some(0.95)),
        (json!({"name": "fixed", "index": {"nprobe": 4}}), None),
        (
            json!({"name": "t", "shards": 1, "index": {"nlist": 16, "recall_target": 0.9}}),
            Some(0.9),
        ),
    ] {
        let (s, b) = post(&format!("{url}/v1/collections"), &body);
        assert_eq!(s, 201, "{b}");
        let index = index_of(body["name"].as_str().unwrap());
        assert_eq!(index["recall_target"].as_f64(), shown, "{index}");
    }
    for target in [0.3, 1.5] {
        let (s, b) = post(
            &format!("{url}/v1/collections"),
            &json!({"name": "bad", "index": {"recall_target": target}}),
        );
        assert_eq!(
            (s, b["error"]["field"].as_str()),
            (400, Some("index.recall_target")),
            "{b}"
        );
    }

    let vectors = clustered_vectors(1_200);
    for batch in vectors.chunks(200).enumerate() {
        let (at, batch) = batch;
        let documents: Vec<Value> = batch
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let id = at * 200 + i;
                json!({"id": format!("d{id}"), "text": format!("Row {id}."), "vector": v})
            })
            .collect();
        let (s, b) = post(
            &format!("{url}/v1/collections/t/documents"),
            &json!({ "documents": documents }),
        );
        assert_eq!(s, 200, "{b}");
    }
    let (s, b) = post(
        &format!("{url}/v1/collections/t/maintain"),
        &json!({"seal": true}),
    );
    assert_eq!(s, 200, "{b}");
    // The tuning runs off the request path: wait (bounded) for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let tuned = loop {
        let (s, body) = get_text(&format!("{url}/v1/collections/t/stats"));
        assert_eq!(s, 200, "{body}");
        let stats: Value = serde_json::from_str(&body).unwrap();
        if let Some(tuned) = stats["shards"][0].get("tuned") {
            // Rows of one mixture, sealed once: nothing drifted from the quantizer.
            assert_eq!(stats["shards"][0]["recall_retrains"], json!(0), "{body}");
            break tuned.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no tuning after the seal: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(tuned["target"].as_f64(), Some(0.9), "{tuned}");
    assert_eq!(tuned["reached"], json!(true), "{tuned}");
    assert!(tuned["recall"].as_f64().unwrap() >= 0.9, "{tuned}");
    let nprobe = tuned["nprobe"].as_u64().unwrap();
    assert!((1..=16).contains(&nprobe), "{tuned}");
    assert!(tuned["queries"].as_u64().unwrap() >= 100, "{tuned}");
    // Served with the tuned setting, or with the nprobe a search names.
    for body in [
        json!({"query": "Row 7.", "vector": vectors[7], "k": 5}),
        json!({"query": "Row 7.", "vector": vectors[7], "k": 5, "nprobe": 16}),
    ] {
        let (s, b) = post(&format!("{url}/v1/collections/t/search"), &body);
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["hits"][0]["doc_id"], json!("d7"), "{b}");
        assert_eq!(b["hits"][0]["lanes"]["dense"]["rank"], json!(1), "{b}");
    }
}
