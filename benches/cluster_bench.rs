//! Cluster benchmarks on a real local cluster (`scripts/local-cluster.sh`: 3 meta processes under Raft, N shard
//! processes, 1 router; every role its own process, all on 127.0.0.1). Prints one JSON object per line.
//!
//! `cluster_bench overhead --shards N` — router overhead. A collection with N shards and replication 1 over N
//! shard processes, so each routed search reaches every shard process exactly once. For each query, one at a
//! time: (a) the routed search, `attest.v1.RouterService/Search` over gRPC, timed at the client; (b) the same
//! query sent by this client straight to every shard's `attest.v1.ShardService/Search`, concurrently (as the
//! router fans out), with the request the router sends (same shard, tenant, k = lane depth, nprobe, payloads
//! inlined, exact re-scoring; the query vector from the same local MiniLM model the router embeds with), each
//! shard call timed on its own. The router's settings are read as its process reads them (`ATTEST__ROUTER__*`
//! variables in this process's environment reach the cluster's processes too). overhead = p50(routed) −
//! p50(slowest shard of each query). Two lane settings: `hybrid` (dense + BM25; every query is sent through the
//! router once before timing, so the router answers its embedding from its query cache and embedding is in
//! neither side) and `bm25` (no embedding anywhere).
//! The routed side includes: client→router gRPC, validation, the query-cache lookup, the fan-out through the
//! per-replica tower stacks, waiting for the slowest shard, per-lane merge + RRF + provenance, the response.
//! As a check that (b) is the request the router sends, the shard answers are fused here with
//! `attest_router::fanout::fuse` and compared with the routed top 10 (`top10_agreement`); `inlined_top10` is
//! the share of queries whose fused top 10 all came with their payloads (the router then fetches nothing).
//!
//! Corpus (`--docs`, default 3,000): the squad-sample paragraphs, then synthetic documents of 3–5 of their
//! sentences; each document comes with a pseudo-random 384-d unit vector over the HTTP API (the ingest path
//! without the embedder: the local model embeds 2–10 passages/s on 2 cores), so BM25 is real and the dense lane
//! scans real vectors whose ranking means nothing — search cost is the same. `--embed`: the router embeds.
//!
//! `cluster_bench resilience` — 3 shard processes, a collection with 3 shards and replication 2. `--threads`
//! clients search (hybrid, cached embeddings) back to back for `--seconds`: QPS, failed and degraded answers;
//! then one shard process is SIGKILLed (its pid file) and the same is measured again right away. Then the
//! killed shard is restarted and the meta leader is SIGKILLed `--failovers` times (restarted each time with the
//! script's command line): the time from SIGKILL to the first successful metadata write through the router
//! (`CreateCollection` over gRPC), beside the same write's latency with every meta node up.
//!
//! Build with the workspace (`cargo build --workspace --all-targets`), then run
//! `$CARGO_TARGET_DIR/debug/examples/cluster_bench overhead --shards 2`. `ATTEST_BIN` overrides the `attest`
//! binary next to the example's directory. `benches/bench-cluster.sh` runs every case.

mod common;

use common::cluster::{repo_root, wait_for, Cluster};
use std::path::PathBuf;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use attest_embed::{build_embedder, EmbedderConfig};
use attest_lab::bench::metrics::percentile;
use attest_proto::v1 as pb;
use attest_router::fanout::{fuse, FanOut, ShardHit};
use attest_router::payloads::payload_top;
use clap::{Args, Parser, Subcommand};
use pb::router_service_client::RouterServiceClient;
use pb::shard_service_client::ShardServiceClient;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tonic::transport::Channel;

#[derive(Parser)]
#[command(about = "Router overhead, QPS with a replica down and meta failover on a local cluster")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Routed search against each shard's own search (replication 1: every shard process once per query).
    Overhead {
        /// Shard processes (= shards of the collection).
        #[arg(long, default_value_t = 2)]
        shards: usize,
        /// Times the query set is run (timed); 150 queries each.
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        #[command(flatten)]
        common: Common,
    },
    /// QPS before and after a shard process is killed (replication 2 over 3), then meta leader failovers.
    Resilience {
        /// Concurrent clients.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Seconds of load per phase.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Meta leader kills.
        #[arg(long, default_value_t = 3)]
        failovers: usize,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// Documents ingested: the squad-sample corpus, then synthetic documents made of its sentences.
    #[arg(long, default_value_t = 3000)]
    docs: usize,
    /// Let the router embed every document (candle MiniLM on this CPU: ~2–10 chunks/s). Default: each document
    /// comes with its own vector (a pseudo-random unit vector, fixed seed) over the HTTP API, the ingest path
    /// without the embedder — search cost does not depend on what the vectors mean.
    #[arg(long)]
    embed: bool,
    /// Base port (ATTEST_CLUSTER_PORT).
    #[arg(long, default_value_t = 17600)]
    port: u16,
    /// Cluster directory (data, logs, pids); a temporary one if not given. Left in place.
    #[arg(long)]
    dir: Option<PathBuf>,
}

const COLLECTION: &str = "bench";
const K: u32 = 10;

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The squad-sample corpus, then synthetic documents of 3–5 of its sentences (fixed seed) up to `n`.
fn documents(n: usize) -> anyhow::Result<Vec<pb::Document>> {
    let corpus = std::fs::read(repo_root().join("data/squad-sample/corpus.jsonl"))?;
    let parsed = attest_ingest::parse_jsonl(&corpus).documents;
    let sentences: Vec<String> = parsed
        .iter()
        .flat_map(|d| d.text.split(". ").map(str::trim).map(str::to_string))
        .filter(|s| s.len() > 30)
        .collect();
    let mut docs: Vec<pb::Document> = parsed
        .iter()
        .take(n)
        .map(|d| pb::Document {
            id: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
            ..Default::default()
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for j in 0..n.saturating_sub(docs.len()) {
        let count = rng.gen_range(3..=5);
        let text: Vec<&str> = (0..count)
            .map(|_| sentences[rng.gen_range(0..sentences.len())].as_str())
            .collect();
        docs.push(pb::Document {
            id: format!("syn-{j:05}"),
            title: format!("Synthetic note {j}"),
            text: format!("{}.", text.join(". ")),
            ..Default::default()
        });
    }
    Ok(docs)
}

fn queries() -> anyhow::Result<Vec<String>> {
    Ok(
        std::fs::read_to_string(repo_root().join("data/squad-sample/queries.jsonl"))?
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|q| q["text"].as_str().map(|t| t.trim().to_string()))
            .collect(),
    )
}

async fn router_client(cluster: &Cluster) -> anyhow::Result<RouterServiceClient<Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(cluster.router_grpc())?
        .tcp_nodelay(true)
        .connect()
        .await?;
    Ok(RouterServiceClient::new(channel))
}

/// Creates the collection (retrying while the router learns the shard nodes) and ingests `common.docs` into it:
/// over gRPC with the router embedding (`--embed`), else over HTTP with a vector per document.
async fn create_and_ingest(
    cluster: &Cluster,
    router: &mut RouterServiceClient<Channel>,
    shards: u32,
    replication: u32,
    common: &Common,
) -> anyhow::Result<(pb::CollectionInfo, Value)> {
    let started = Instant::now();
    let info = loop {
        match router
            .create_collection(pb::CreateCollectionRequest {
                name: COLLECTION.into(),
                shards: Some(shards),
                replication: Some(replication),
                index: None,
                ..Default::default()
            })
            .await
        {
            Ok(r) => break r.into_inner(),
            Err(e) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("create collection: {} (retrying)", e.message());
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => bail!("create collection: {e}"),
        }
    };
    let docs = documents(common.docs)?;
    let dim = info
        .spec
        .as_ref()
        .map(|s| s.dimension as usize)
        .unwrap_or(384);
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let http = reqwest::Client::new();
    let url = format!(
        "{}/v1/collections/{COLLECTION}/documents",
        std::fs::read_to_string(cluster.dir.join("router.addr"))?.trim()
    );
    let started = Instant::now();
    let (mut accepted, mut chunks, mut duplicates) = (0u64, 0u64, 0u64);
    for batch in docs.chunks(if common.embed { 32 } else { 100 }) {
        let body = (!common.embed).then(|| {
            let documents: Vec<Value> = batch
                .iter()
                .map(|d| {
                    let mut v: Vec<f32> = (0..dim).map(|_| rng.gen::<f32>() - 0.5).collect();
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.iter_mut().for_each(|x| *x /= norm);
                    json!({"id": d.id, "title": d.title, "text": d.text, "vector": v})
                })
                .collect();
            json!({ "documents": documents })
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let (a, c, dup) = loop {
            let result: anyhow::Result<(u64, u64, u64)> = match &body {
                None => router
                    .ingest(pb::IngestRequest {
                        collection: COLLECTION.into(),
                        documents: batch.to_vec(),
                    })
                    .await
                    .map(|r| {
                        let r = r.into_inner();
                        (u64::from(r.accepted), r.chunks, u64::from(r.duplicates))
                    })
                    .map_err(|e| anyhow::anyhow!("{e}")),
                Some(body) => {
                    async {
                        let resp = http.post(&url).json(body).send().await?;
                        let status = resp.status();
                        let b: Value = resp.json().await?;
                        ensure!(status.is_success(), "HTTP {status}: {b}");
                        Ok((
                            b["accepted"].as_u64().unwrap_or(0),
                            b["chunks"].as_u64().unwrap_or(0),
                            b["duplicates"].as_u64().unwrap_or(0),
                        ))
                    }
                    .await
                }
            };
            match result {
                Ok(r) => break r,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("ingest: {e} (retrying)");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => bail!("ingest: {e}"),
            }
        };
        accepted += a;
        chunks += c;
        duplicates += dup;
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "ingested {accepted} documents ({chunks} chunks, {duplicates} near-duplicates dropped) in {secs:.1}s"
    );
    Ok((
        info,
        json!({"documents": accepted, "chunks": chunks, "near_duplicates": duplicates,
               "ingest_seconds": round3(secs),
               "vectors": if common.embed { "router embeds (MiniLM)" } else { "supplied: pseudo-random unit vectors" }}),
    ))
}

fn search_request(query: &str, lanes: &[&str]) -> pb::SearchRequest {
    pb::SearchRequest {
        collection: COLLECTION.into(),
        query: query.into(),
        k: Some(K),
        lanes: lanes.iter().map(|l| l.to_string()).collect(),
        ..Default::default()
    }
}

/// Each shard's replica (replication 1) → a client of its node.
async fn shard_clients(
    cluster: &Cluster,
    shards: usize,
) -> anyhow::Result<Vec<(u32, String, ShardServiceClient<Channel>)>> {
    let mut out = Vec::new();
    for (shard, replicas) in cluster.placement(COLLECTION)? {
        ensure!(
            replicas.len() == 1,
            "shard {shard} has {} replicas",
            replicas.len()
        );
        let addr = replicas[0].clone();
        let channel = tonic::transport::Endpoint::from_shared(addr.clone())?
            .tcp_nodelay(true)
            .connect()
            .await?;
        out.push((shard, addr, ShardServiceClient::new(channel)));
    }
    out.sort_by_key(|(s, _, _)| *s);
    ensure!(out.len() == shards, "{} shards in placement", out.len());
    Ok(out)
}

struct Paired {
    routed: Vec<f64>,
    router_took: Vec<f64>,
    slowest: Vec<f64>,
    fanout_wall: Vec<f64>,
    slowest_took: Vec<f64>,
    diffs: Vec<f64>,
    agree: usize,
    /// Queries whose fused top 10 all came with their payloads from the fan-out.
    inlined: usize,
}

async fn overhead(shards: usize, rounds: usize, common: &Common) -> anyhow::Result<()> {
    let cluster = Cluster::up(shards, common.dir.as_deref(), common.port)?;
    let mut router = router_client(&cluster).await?;
    let (info, ingest) = create_and_ingest(&cluster, &mut router, shards as u32, 1, common).await?;
    let nprobe = info
        .spec
        .as_ref()
        .and_then(|s| s.index.as_ref())
        .map(|i| i.nprobe)
        .filter(|&n| n > 0);
    let clients = shard_clients(&cluster, shards).await?;
    let nodes: Vec<&str> = clients.iter().map(|(_, a, _)| a.as_str()).collect();
    eprintln!("placement: {nodes:?}");

    // The router's own settings (`local-cluster.sh` passes no config file; the environment reaches it).
    let cfg = attest_node::config::load(None, std::env::vars())?.router;
    let depth = cfg.lane_depth.max(K as usize).min(1000);
    let payload_top = payload_top(cfg.payload_inline_factor, K as usize, shards, depth);
    let queries = queries()?;
    // The query vectors the router computes: the same local model, the same (trimmed) text.
    let embedder = build_embedder(&EmbedderConfig::default())?;
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let vectors = tokio::task::block_in_place(|| embedder.embed(&refs))?;

    for lanes in [&[][..], &["bm25"][..]] {
        let lane_name = if lanes.is_empty() { "hybrid" } else { "bm25" };
        // Warm-up: every query once through the router (fills its query-embedding cache) and each shard.
        for q in &queries {
            router.search(search_request(q, lanes)).await?;
        }
        let mut res = Paired {
            routed: vec![],
            router_took: vec![],
            slowest: vec![],
            fanout_wall: vec![],
            slowest_took: vec![],
            diffs: vec![],
            agree: 0,
            inlined: 0,
        };
        for round in 0..rounds + 1 {
            let timed = round > 0; // round 0 warms the direct path
            for (qi, q) in queries.iter().enumerate() {
                let template = pb::ShardSearchRequest {
                    collection: COLLECTION.into(),
                    shard: 0,
                    tenant: cfg.default_tenant.clone(),
                    query_vector: if lanes.is_empty() {
                        vectors[qi].clone()
                    } else {
                        vec![]
                    },
                    query_text: q.clone(),
                    k: depth as u32,
                    nprobe,
                    filter: None,
                    include_payload: false,
                    payload_top,
                    exact_rescore: cfg.exact_rescore,
                };
                // Alternate which side goes first, so neither always follows the other.
                let routed_first = (qi + round) % 2 == 0;
                let mut routed = None;
                if routed_first {
                    routed = Some(time_routed(&mut router, q, lanes).await?);
                }
                let direct = time_direct(&clients, &template).await?;
                if !routed_first {
                    routed = Some(time_routed(&mut router, q, lanes).await?);
                }
                let (routed_ms, resp) = routed.expect("routed");
                ensure!(
                    !resp.degraded && !resp.fallback_mode,
                    "routed answer degraded"
                );
                if !timed {
                    continue;
                }
                let fused = fuse(&direct.fan, depth, K as usize, cfg.rrf_k, 1.0, 1.0);
                let a: Vec<&str> = fused.iter().map(|h| h.chunk_id.as_str()).collect();
                let b: Vec<&str> = resp.hits.iter().map(|h| h.chunk_id.as_str()).collect();
                if a == b {
                    res.agree += 1;
                }
                if fused.iter().all(|h| !h.text.is_empty()) {
                    res.inlined += 1;
                }
                res.routed.push(routed_ms);
                res.router_took.push(resp.took_ms);
                res.slowest.push(direct.slowest_ms);
                res.fanout_wall.push(direct.wall_ms);
                res.slowest_took.push(direct.slowest_took_ms);
                res.diffs.push(routed_ms - direct.slowest_ms);
            }
        }
        let n = res.routed.len();
        let routed = sorted(res.routed);
        let slowest = sorted(res.slowest);
        let overhead_p50 = percentile(&routed, 0.5) - percentile(&slowest, 0.5);
        println!(
            "{}",
            json!({
                "bench": "router_overhead", "lanes": lane_name, "shard_processes": shards,
                "shards": shards, "replication": 1, "k": K, "lane_depth": depth,
                "queries_timed": n, "corpus": ingest,
                "routed_p50_ms": round3(percentile(&routed, 0.5)),
                "routed_p95_ms": round3(percentile(&routed, 0.95)),
                "router_took_p50_ms": round3(percentile(&sorted(res.router_took), 0.5)),
                "slowest_shard_p50_ms": round3(percentile(&slowest, 0.5)),
                "slowest_shard_p95_ms": round3(percentile(&slowest, 0.95)),
                "slowest_shard_took_p50_ms": round3(percentile(&sorted(res.slowest_took), 0.5)),
                "direct_fanout_wall_p50_ms": round3(percentile(&sorted(res.fanout_wall), 0.5)),
                "overhead_p50_ms": round3(overhead_p50),
                "overhead_median_of_paired_diffs_ms": round3(percentile(&sorted(res.diffs), 0.5)),
                "overhead_over_slowest_shard_p50": round3(overhead_p50 / percentile(&slowest, 0.5)),
                "top10_agreement": round3(res.agree as f64 / n as f64),
                "payload_top": payload_top,
                "inlined_top10": round3(res.inlined as f64 / n as f64),
                "transport": "gRPC (tonic, HTTP/2, one connection per node, loopback)",
                "embedding": if lanes.is_empty() { "router: query-cache hit (warmed); direct: precomputed vector" } else { "none" },
            })
        );
    }
    Ok(())
}

async fn time_routed(
    router: &mut RouterServiceClient<Channel>,
    q: &str,
    lanes: &[&str],
) -> anyhow::Result<(f64, pb::SearchResponse)> {
    let req = search_request(q, lanes);
    let t = Instant::now();
    let resp = router.search(req).await?.into_inner();
    Ok((ms(t.elapsed()), resp))
}

struct Direct {
    slowest_ms: f64,
    slowest_took_ms: f64,
    wall_ms: f64,
    fan: FanOut,
}

/// Every shard searched at once, as the router does; each call timed on its own.
async fn time_direct(
    clients: &[(u32, String, ShardServiceClient<Channel>)],
    template: &pb::ShardSearchRequest,
) -> anyhow::Result<Direct> {
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .map(|(shard, _, client)| {
            let mut client = client.clone();
            let mut req = template.clone();
            req.shard = *shard;
            tokio::spawn(async move {
                let t = Instant::now();
                let r = client.search(req).await;
                (ms(t.elapsed()), r)
            })
        })
        .collect();
    let mut out = Direct {
        slowest_ms: 0.0,
        slowest_took_ms: 0.0,
        wall_ms: 0.0,
        fan: FanOut::default(),
    };
    for ((shard, _, _), task) in clients.iter().zip(tasks) {
        let (elapsed, r) = task.await?;
        let resp = r?.into_inner();
        out.slowest_ms = out.slowest_ms.max(elapsed);
        out.slowest_took_ms = out.slowest_took_ms.max(resp.took_ms);
        let shard = *shard;
        out.fan
            .dense
            .extend(resp.dense.into_iter().map(|hit| ShardHit { shard, hit }));
        out.fan
            .bm25
            .extend(resp.bm25.into_iter().map(|hit| ShardHit { shard, hit }));
    }
    out.wall_ms = ms(started.elapsed());
    Ok(out)
}

#[derive(Default)]
struct Load {
    ok: AtomicU64,
    failed: AtomicU64,
    degraded: AtomicU64,
    latencies: Mutex<Vec<f64>>,
    first_error: Mutex<Option<String>>,
}

/// `threads` clients searching back to back for `seconds`.
async fn load(
    router: &RouterServiceClient<Channel>,
    queries: &Arc<Vec<String>>,
    threads: usize,
    seconds: f64,
) -> Arc<Load> {
    let stats = Arc::new(Load::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..threads)
        .map(|t| {
            let (mut router, queries, stats, stop) = (
                router.clone(),
                Arc::clone(queries),
                Arc::clone(&stats),
                Arc::clone(&stop),
            );
            tokio::spawn(async move {
                let mut i = t * 37;
                let mut lat = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let q = &queries[i % queries.len()];
                    i += 1;
                    let t0 = Instant::now();
                    match router.search(search_request(q, &[])).await {
                        Ok(r) => {
                            let r = r.into_inner();
                            if r.degraded || r.fallback_mode {
                                stats.degraded.fetch_add(1, Ordering::Relaxed);
                            } else {
                                stats.ok.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            stats.failed.fetch_add(1, Ordering::Relaxed);
                            stats
                                .first_error
                                .lock()
                                .unwrap()
                                .get_or_insert_with(|| e.to_string());
                        }
                    }
                    lat.push(ms(t0.elapsed()));
                }
                stats.latencies.lock().unwrap().extend(lat);
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    stats
}

fn load_json(phase: &str, threads: usize, seconds: f64, l: &Load) -> Value {
    let (ok, failed, degraded) = (
        l.ok.load(Ordering::Relaxed),
        l.failed.load(Ordering::Relaxed),
        l.degraded.load(Ordering::Relaxed),
    );
    let lat = sorted(l.latencies.lock().unwrap().clone());
    json!({
        "bench": "replica_down_qps", "phase": phase, "shard_processes": 3, "shards": 3, "replication": 2,
        "client_threads": threads, "seconds": seconds, "lanes": "hybrid (cached query embeddings)",
        "queries": ok + failed + degraded, "qps": round3((ok + degraded) as f64 / seconds),
        "ok": ok, "failed": failed, "degraded": degraded,
        "p50_ms": round3(percentile(&lat, 0.5)), "p95_ms": round3(percentile(&lat, 0.95)),
        "p99_ms": round3(percentile(&lat, 0.99)), "max_ms": round3(percentile(&lat, 1.0)),
        "first_error": l.first_error.lock().unwrap().clone(),
    })
}

async fn resilience(
    threads: usize,
    seconds: f64,
    failovers: usize,
    common: &Common,
) -> anyhow::Result<()> {
    let cluster = Cluster::up(3, common.dir.as_deref(), common.port)?;
    let mut router = router_client(&cluster).await?;
    let (_, ingest) = create_and_ingest(&cluster, &mut router, 3, 2, common).await?;
    eprintln!("corpus: {ingest}");
    let queries = Arc::new(queries()?);
    for q in queries.iter() {
        router.search(search_request(q, &[])).await?;
    }

    let before = load(&router, &queries, threads, seconds).await;
    println!("{}", load_json("all_up", threads, seconds, &before));
    let victim = "shard-1";
    cluster.kill(victim)?;
    let after = load(&router, &queries, threads, seconds).await;
    let mut j = load_json("one_shard_process_killed", threads, seconds, &after);
    j["killed"] = json!(victim);
    j["qps_vs_all_up"] = json!(round3(
        j["qps"].as_f64().unwrap_or(0.0)
            / load_json("all_up", threads, seconds, &before)["qps"]
                .as_f64()
                .unwrap_or(1.0)
    ));
    println!("{j}");
    if failovers == 0 {
        return Ok(());
    }

    // Back to three shard nodes, so a new collection's replicas have live nodes to go to.
    cluster.restart(victim)?;
    wait_for(Duration::from_secs(60), "3 live shard nodes", || {
        let alive = cluster.alive_shards()?;
        ensure!(alive == 3, "{alive} alive");
        Ok(true)
    })?;

    // The same metadata write with every meta node up, for comparison.
    let mut baseline = Vec::new();
    for i in 0..3 {
        let t = Instant::now();
        create(&mut router, &format!("baseline_{i}")).await?;
        baseline.push(ms(t.elapsed()));
    }
    let baseline = sorted(baseline);
    let mut times = Vec::new();
    for round in 1..=failovers {
        let mut leader = 0;
        wait_for(Duration::from_secs(30), "a meta leader", || {
            leader = cluster.status()?["leader"].as_u64().unwrap_or(0);
            Ok((1..=3).contains(&leader))
        })?;
        let name = format!("meta-{leader}");
        let killed_at = Instant::now();
        cluster.kill(&name)?;
        let coll = format!("failover_{round}");
        let mut attempts = 0;
        loop {
            attempts += 1;
            match tokio::time::timeout(Duration::from_secs(15), create(&mut router, &coll)).await {
                Ok(Ok(())) => break,
                Ok(Err(e)) if killed_at.elapsed() < Duration::from_secs(60) => {
                    eprintln!("failover {round}: create: {e} (retrying)");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(_) if killed_at.elapsed() < Duration::from_secs(60) => {}
                other => bail!("no metadata write within 60 s of killing the leader: {other:?}"),
            }
        }
        let failover = ms(killed_at.elapsed());
        let mut new_leader = 0;
        wait_for(Duration::from_secs(10), "a new leader in status", || {
            new_leader = cluster.status()?["leader"].as_u64().unwrap_or(0);
            Ok(new_leader != 0 && new_leader != leader)
        })?;
        times.push(failover);
        println!(
            "{}",
            json!({"bench": "meta_failover", "round": round, "killed_leader": leader,
                   "new_leader": new_leader, "first_write_after_kill_ms": round3(failover),
                   "write_attempts": attempts, "write": "CreateCollection via router gRPC",
                   "baseline_write_p50_ms": round3(percentile(&baseline, 0.5))})
        );
        // Restart the old leader and let it catch up before the next round.
        cluster.restart(&name)?;
        wait_for(
            Duration::from_secs(60),
            "the restarted meta node to catch up",
            || {
                let st = cluster.status()?;
                let commit = st["commit_index"].as_u64().unwrap_or(u64::MAX);
                let metas = st["meta"].as_array().context("meta")?;
                let ok = metas.len() == 3
                    && metas.iter().all(|m| {
                        m["reachable"] == true && m["applied_index"].as_u64().unwrap_or(0) >= commit
                    });
                ensure!(ok, "commit index {commit}, meta {}", st["meta"]);
                Ok(true)
            },
        )?;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let t = sorted(times.clone());
    println!(
        "{}",
        json!({"bench": "meta_failover_summary", "rounds": times.len(),
               "first_write_after_kill_ms": times.iter().map(|x| round3(*x)).collect::<Vec<_>>(),
               "max_ms": round3(percentile(&t, 1.0)), "median_ms": round3(percentile(&t, 0.5)),
               "baseline_write_ms": baseline.iter().map(|x| round3(*x)).collect::<Vec<_>>(),
               "raft": "tick 100 ms, election_tick 10 (meta defaults)"})
    );
    Ok(())
}

async fn create(router: &mut RouterServiceClient<Channel>, name: &str) -> anyhow::Result<()> {
    match router
        .create_collection(pb::CreateCollectionRequest {
            name: name.into(),
            shards: Some(1),
            replication: Some(2),
            index: None,
            ..Default::default()
        })
        .await
    {
        Ok(_) => Ok(()),
        // An earlier attempt that timed out here was committed: the write went through.
        Err(e) if e.code() == tonic::Code::AlreadyExists => Ok(()),
        Err(e) => Err(anyhow::anyhow!("{:?}: {}", e.code(), e.message())),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.mode {
        Mode::Overhead {
            shards,
            rounds,
            common,
        } => attest_benches::stopped_on_signal(overhead(shards, rounds, &common)).await,
        Mode::Resilience {
            threads,
            seconds,
            failovers,
            common,
        } => {
            attest_benches::stopped_on_signal(resilience(threads, seconds, failovers, &common))
                .await
        }
    }
}
