//! The circuit breaker end to end: a router whose embedder is a remote service on loopback (a stand-in for a
//! GPU embedding server, which is outside the system) that answers, fails with 500, answers slower than the
//! timeout, and dies. Searches never fail: they fall back to BM25 with `fallback_mode: true` (the answer tier
//! reduces its confidence by `answer.fallback_confidence_factor`);
//! after 5 failures the breaker opens and the service is not called at all; after the open timeout one probe
//! goes through and 2 successes close it. The metrics move as docs/SPEC.md names them. Time is moved by hand
//! (`ManualClock`) instead of waiting 30 s.

use crate::common;

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use attest_embed::breaker::ManualClock;
use attest_embed::{
    BreakerConfig, BreakerState, CircuitBreaker, GuardedEmbedder, RemoteEmbedder,
    RemoteEmbedderConfig,
};
use attest_ingest::SourceDocument;
use attest_proto::v1 as pb;
use attest_router::{IngestDocument, Router, RouterError};
use attest_telemetry::metrics as m;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

const DIM: usize = 384;
const OK: u8 = 0;
const FAIL_500: u8 = 1;
const SLOW: u8 = 2;
const TIMEOUT_MS: u64 = 300;

/// Bag-of-words hashing vectors: texts sharing words point the same way, so dense search means something.
fn vector_of(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = word.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
        v[(h % DIM as u64) as usize] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

#[derive(Clone, Default)]
struct FakeEmbedder {
    mode: Arc<AtomicU8>,
    calls: Arc<AtomicUsize>,
}

async fn embeddings(State(fake): State<FakeEmbedder>, Json(body): Json<Value>) -> Response {
    fake.calls.fetch_add(1, Ordering::SeqCst);
    match fake.mode.load(Ordering::SeqCst) {
        FAIL_500 => return (StatusCode::INTERNAL_SERVER_ERROR, "gpu on fire").into_response(),
        SLOW => tokio::time::sleep(Duration::from_millis(TIMEOUT_MS * 4)).await,
        _ => {}
    }
    let data: Vec<Value> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"index": i, "embedding": vector_of(t.as_str().unwrap())}))
        .collect();
    Json(json!({"data": data})).into_response()
}

fn scrape() -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(m::render().lines().map(|l| Ok(l.to_string()))).unwrap()
}

fn metric(name: &str) -> f64 {
    scrape()
        .samples
        .iter()
        .find(|s| s.metric == name)
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            _ => panic!("{name} is not a counter or gauge"),
        })
        .unwrap_or(0.0)
}

fn search_req(query: &str, lanes: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        collection: "c".into(),
        query: query.into(),
        k: Some(5),
        lanes: lanes.iter().map(|l| l.to_string()).collect(),
        rrf_k: None,
        weights: Default::default(),
        filter: None,
        tenant: String::new(),
        nprobe: None,
        vector: Vec::new(),
    }
}

struct Harness {
    router: Router,
    fake: FakeEmbedder,
    clock: Arc<ManualClock>,
    embedder: Arc<GuardedEmbedder<RemoteEmbedder>>,
    queries: AtomicUsize,
}

impl Harness {
    /// A fresh query each time, so the query-embedding cache never hides the service's state.
    async fn search(&self) -> pb::SearchResponse {
        let n = self.queries.fetch_add(1, Ordering::SeqCst);
        self.router
            .search()
            .run(
                search_req(&format!("where does the owl live q{n}"), &[]),
                format!("t{n}"),
            )
            .await
            .expect("a search never fails because of the embedder")
    }

    fn state(&self) -> BreakerState {
        self.embedder.breaker_state().unwrap()
    }
}

fn assert_fallback(resp: &pb::SearchResponse) {
    assert!(resp.fallback_mode, "{resp:?}");
    assert!(!resp.hits.is_empty());
    assert!(resp
        .hits
        .iter()
        .all(|h| h.dense.is_none() && h.bm25.is_some()));
}

fn assert_dense_back(resp: &pb::SearchResponse) {
    assert!(!resp.fallback_mode);
    assert!(resp.hits.iter().any(|h| h.dense.is_some()), "{resp:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_falls_back_to_bm25_probes_and_closes() {
    m::install();
    let fake = FakeEmbedder::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (kill, killed) = tokio::sync::oneshot::channel::<()>();
    let app = axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embeddings))
        .with_state(fake.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = killed.await;
            })
            .await
            .unwrap();
    });

    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new());
    let remote = RemoteEmbedder::new(RemoteEmbedderConfig {
        url: format!("http://{addr}"),
        timeout_ms: TIMEOUT_MS,
        ..Default::default()
    })
    .unwrap();
    let embedder = Arc::new(GuardedEmbedder::with_breaker(
        remote,
        CircuitBreaker::with_clock("embeddings", BreakerConfig::default(), clock.clone()),
    ));
    let (router, _plane) = common::router_with_collection_c(dir.path(), embedder.clone()).await;
    let animals = ["owl", "fox", "bear", "deer", "heron"];
    let docs: Vec<IngestDocument> = (0..30)
        .map(|i| {
            let text = format!(
                "The {} number {i} lives in the forest near river {}.",
                animals[i % animals.len()],
                i % 7
            );
            IngestDocument {
                vector: Some(vector_of(&text)),
                source: SourceDocument {
                    id: format!("d{i}"),
                    text,
                    ..Default::default()
                },
            }
        })
        .collect();
    router.ingest().run("c", docs, "setup").await.unwrap();
    let h = Harness {
        router,
        fake: fake.clone(),
        clock,
        embedder,
        queries: AtomicUsize::new(0),
    };

    // Healthy: hybrid search with the dense lane.
    assert_dense_back(&h.search().await);
    assert_eq!(h.state(), BreakerState::Closed);
    assert_eq!(metric(m::CIRCUIT_BREAKER_STATE), 0.0);
    let requests_before = metric(m::EMBEDDING_REQUEST_TOTAL);
    assert!(requests_before >= 1.0);

    // 500s: every search still answers, from BM25, as a BM25-only search does; the 5th failure opens the breaker.
    h.fake.mode.store(FAIL_500, Ordering::SeqCst);
    let bm25_only = h
        .router
        .search()
        .run(
            search_req("where does the owl live", &["bm25"]),
            "ref".into(),
        )
        .await
        .unwrap();
    for i in 1..=5 {
        let resp = h
            .router
            .search()
            .run(search_req("where does the owl live", &[]), format!("f{i}"))
            .await
            .unwrap();
        assert_fallback(&resp);
        assert_eq!(resp.hits[0].chunk_id, bm25_only.hits[0].chunk_id);
        assert!((resp.hits[0].score - bm25_only.hits[0].score).abs() < 1e-9);
        assert_eq!(metric(m::EMBEDDING_FALLBACK_TOTAL), i as f64);
        assert_eq!(metric(m::EMBEDDING_FAIL_TOTAL), i as f64);
        let expected = if i < 5 {
            BreakerState::Closed
        } else {
            BreakerState::Open
        };
        assert_eq!(h.state(), expected, "after {i} failures");
    }
    assert_eq!(metric(m::CIRCUIT_BREAKER_STATE), 2.0);
    assert_eq!(metric(m::CIRCUIT_BREAKER_TRIP_TOTAL), 1.0);
    assert_eq!(metric(m::EMBEDDING_REQUEST_TOTAL), requests_before + 5.0);

    // Open: the service is skipped entirely, the answer comes at once.
    h.fake.mode.store(OK, Ordering::SeqCst);
    let calls = h.fake.calls.load(Ordering::SeqCst);
    let resp = h.search().await;
    assert_fallback(&resp);
    assert!(resp.took_ms < TIMEOUT_MS as f64, "took {} ms", resp.took_ms);
    h.clock.advance(Duration::from_secs(29));
    assert_fallback(&h.search().await);
    assert_eq!(
        h.fake.calls.load(Ordering::SeqCst),
        calls,
        "no call while open"
    );
    assert_eq!(metric(m::EMBEDDING_FALLBACK_TOTAL), 7.0);
    assert_eq!(metric(m::EMBEDDING_REQUEST_TOTAL), requests_before + 5.0);

    // After 30 s one probe goes through (half-open); two successes close the breaker.
    h.clock.advance(Duration::from_secs(1));
    assert_dense_back(&h.search().await);
    assert_eq!(h.state(), BreakerState::HalfOpen);
    assert_eq!(metric(m::CIRCUIT_BREAKER_STATE), 1.0);
    assert_dense_back(&h.search().await);
    assert_eq!(h.state(), BreakerState::Closed);
    assert_eq!(metric(m::CIRCUIT_BREAKER_STATE), 0.0);

    // Slower than the timeout: each search waits one timeout at most, then falls back; 5 open the breaker.
    h.fake.mode.store(SLOW, Ordering::SeqCst);
    for _ in 0..5 {
        let resp = h.search().await;
        assert_fallback(&resp);
        assert!(
            resp.took_ms < (TIMEOUT_MS * 3) as f64,
            "took {} ms",
            resp.took_ms
        );
    }
    assert_eq!(h.state(), BreakerState::Open);
    assert_eq!(metric(m::CIRCUIT_BREAKER_TRIP_TOTAL), 2.0);

    // A probe that fails opens it again for another 30 s.
    h.clock.advance(Duration::from_secs(30));
    assert_fallback(&h.search().await);
    assert_eq!(h.state(), BreakerState::Open);
    assert_eq!(metric(m::CIRCUIT_BREAKER_TRIP_TOTAL), 3.0);

    // Killed: connection refused counts as failure too; ingest that needs the embedder gets a clear 503.
    h.fake.mode.store(OK, Ordering::SeqCst);
    h.clock.advance(Duration::from_secs(30));
    assert_dense_back(&h.search().await);
    assert_dense_back(&h.search().await);
    assert_eq!(h.state(), BreakerState::Closed);
    kill.send(()).unwrap();
    server.await.unwrap();
    for _ in 0..5 {
        assert_fallback(&h.search().await);
    }
    assert_eq!(h.state(), BreakerState::Open);
    assert_eq!(metric(m::CIRCUIT_BREAKER_TRIP_TOTAL), 4.0);
    let err = h
        .router
        .ingest()
        .run(
            "c",
            vec![IngestDocument {
                vector: None,
                source: SourceDocument {
                    id: "new".into(),
                    text: "A document that needs embedding.".into(),
                    ..Default::default()
                },
            }],
            "late",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RouterError::Unavailable(_)), "{err:?}");
}
