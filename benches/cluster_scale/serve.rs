//! Searches through the router under load: `threads` clients send `RouterService/Search` back to back for
//! `seconds`, each query with its own vector (dense: the vector alone; hybrid: the vector and three words), and
//! every answer is scored against the exact top 10 (recall@10), counted as failed (an error) or degraded (a shard
//! missing, or BM25 only) and timed at the client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use attest_lab::bench::metrics::percentile;
use attest_proto::v1 as pb;
use pb::router_service_client::RouterServiceClient;
use serde::Serialize;
use tonic::transport::Channel;

use crate::corpus::{self, DIM, K};
use crate::ingest::COLLECTION;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lanes {
    Dense,
    Hybrid,
}

/// The queries and their exact answers.
pub struct QuerySet {
    pub vectors: Vec<f32>,
    pub truth: Vec<Vec<String>>,
    /// Lists probed per shard (the request's `nprobe`); `None`: the collection's.
    pub nprobe: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadFigures {
    pub lanes: Lanes,
    pub threads: usize,
    pub seconds: f64,
    pub searches: u64,
    pub failed: u64,
    pub degraded: u64,
    pub qps: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// Mean recall@10 of the answered searches against the exact (dense) top 10; dense searches only (a
    /// fusion with a BM25 lane of random words is not meant to return the dense neighbours).
    pub recall_at_10: Option<f64>,
    pub first_error: Option<String>,
}

#[derive(Default)]
struct Tally {
    latencies: Vec<f64>,
    recalls: Vec<f64>,
    failed: u64,
    degraded: u64,
    first_error: Option<String>,
}

fn request(queries: &QuerySet, q: usize, lanes: Lanes) -> pb::SearchRequest {
    pb::SearchRequest {
        collection: COLLECTION.into(),
        query: match lanes {
            Lanes::Dense => String::new(),
            Lanes::Hybrid => corpus::query_text(q),
        },
        k: Some(K as u32),
        lanes: match lanes {
            Lanes::Dense => vec!["dense".into()],
            Lanes::Hybrid => Vec::new(),
        },
        vector: queries.vectors[q * DIM..(q + 1) * DIM].to_vec(),
        nprobe: queries.nprobe,
        ..Default::default()
    }
}

/// `threads` clients searching back to back for `seconds`.
pub async fn load(
    router: &RouterServiceClient<Channel>,
    queries: &Arc<QuerySet>,
    lanes: Lanes,
    threads: usize,
    seconds: f64,
) -> LoadFigures {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let clients: Vec<_> = (0..threads)
        .map(|t| {
            let (mut router, queries, tally, stop) = (
                router.clone(),
                Arc::clone(queries),
                Arc::clone(&tally),
                Arc::clone(&stop),
            );
            tokio::spawn(async move {
                let count = queries.truth.len();
                let mut mine = Tally::default();
                let mut i = t * count / threads.max(1);
                while !stop.load(Ordering::Relaxed) {
                    let q = i % count;
                    i += 1;
                    let sent = Instant::now();
                    match router.search(request(&queries, q, lanes)).await {
                        Ok(r) => {
                            let r = r.into_inner();
                            if r.degraded || r.fallback_mode {
                                mine.degraded += 1;
                            }
                            let found: Vec<String> = r.hits.into_iter().map(|h| h.doc_id).collect();
                            mine.recalls.push(corpus::recall(&found, &queries.truth[q]));
                        }
                        Err(e) => {
                            mine.failed += 1;
                            mine.first_error
                                .get_or_insert_with(|| format!("{:?}: {}", e.code(), e.message()));
                        }
                    }
                    mine.latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                }
                let mut all = tally.lock().unwrap();
                all.latencies.extend(mine.latencies);
                all.recalls.extend(mine.recalls);
                all.failed += mine.failed;
                all.degraded += mine.degraded;
                if all.first_error.is_none() {
                    all.first_error = mine.first_error;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let t = std::mem::take(&mut *tally.lock().unwrap());
    let mut latencies = t.latencies;
    latencies.sort_by(f64::total_cmp);
    let answered = t.recalls.len();
    LoadFigures {
        lanes,
        threads,
        seconds: elapsed,
        searches: latencies.len() as u64,
        failed: t.failed,
        degraded: t.degraded,
        qps: answered as f64 / elapsed,
        p50_ms: percentile(&latencies, 0.5),
        p95_ms: percentile(&latencies, 0.95),
        p99_ms: percentile(&latencies, 0.99),
        recall_at_10: (lanes == Lanes::Dense)
            .then(|| t.recalls.iter().sum::<f64>() / answered.max(1) as f64),
        first_error: t.first_error,
    }
}
