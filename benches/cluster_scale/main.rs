//! `cluster_scale`: the cluster at the scale users run (issue 43), every role its own process on this machine
//! (`scripts/local-cluster.sh`: 3 meta under Raft, 3 shard nodes, 1 router), one collection of `--shards` shards
//! with replication `--replication` holding `--vectors` 384-d vectors of `attest-lab bench`'s clustered mixture,
//! each document with 12 words of text for BM25.
//!
//! In order, each step printed as one JSON line (and to `--json`):
//! 1. `prediction`: the cost model (`docs/bench/cost-model.json`, `attest-lab bench --fit`) applied to this
//!    cluster ([`attest_lab::bench::cluster_plan`]) — ingest time, disk, p95 — before anything runs;
//! 2. `baseline`: the single engine's sustained ingest of one replica's rows (`engine_ingest --skip-one-shot`,
//!    the same vectors' generator and nlist), run alongside on the same machine (`--skip-baseline` leaves it out);
//! 3. `ingest`: the corpus through the router's gRPC `Ingest` with supplied vectors, then a seal of every
//!    replica; vectors/s, replica rows/s against the baseline's rate (the ratio), bytes written and CPU seconds of
//!    every process, disk per node, RSS per process;
//! 4. `serve`: recall@10 against the exact top 10 (brute force over every vector), p50/p95/QPS with 1 and
//!    `--threads` clients, dense and hybrid;
//! 5. `shard_down`: shard-1 SIGKILLed, the same searches (failed and degraded answers, recall), then
//!    `--outage-docs` documents written while it is down;
//! 6. `catch_up`: shard-1 restarted; the time until every shard's replicas hold the same live documents, then
//!    the searches again (recall against the truth that includes the documents written during the outage);
//! 7. `summary`: measured against predicted, and the 100M plan from the model corrected by those ratios.
//!
//! `benches/cluster-scale.sh` builds and runs it; `--dir` keeps the cluster's data and logs (default: a
//! directory under ~/.cache that is deleted at the end: at 10M the data is tens of GB).

#[path = "../common/mod.rs"]
mod common;
mod corpus;
mod ingest;
mod procs;
mod report;
mod serve;
mod shard_recall;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use attest_lab::bench::cluster_plan::{self, Corrections, Overheads, Shape};
use attest_lab::bench::fit::CostModel;
use attest_lab::bench::row_bytes::RowLayout;
use attest_proto::v1 as pb;
use clap::Parser;
use common::cluster::{repo_root, Cluster};
use pb::router_service_client::RouterServiceClient;
use pb::shard_service_client::ShardServiceClient;
use serde_json::{json, Value};
use tonic::transport::Channel;

use ingest::COLLECTION;

#[derive(Parser)]
#[command(
    about = "A local cluster at scale: ingest through the router, serving, a shard killed, catch-up"
)]
pub struct Args {
    #[arg(long, default_value_t = 10_000_000)]
    vectors: usize,
    #[arg(long, default_value_t = 6)]
    shards: u32,
    #[arg(long, default_value_t = 2)]
    replication: u32,
    /// Documents per ingest request.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Ingest requests outstanding at once.
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
    /// Queries (the mixture's query stream), each scored against its exact top 10.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Seconds of each search phase.
    #[arg(long, default_value_t = 15.0)]
    seconds: f64,
    /// Concurrent clients of the multi-client phases.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Documents written while shard-1 is down (caught up after its restart).
    #[arg(long, default_value_t = 20_000)]
    outage_docs: usize,
    #[arg(long, default_value_t = 17600)]
    port: u16,
    /// Cluster directory, kept; default: a fresh one under ~/.cache/attest-cluster-scale, deleted at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The cost model to predict with.
    #[arg(long, default_value = "docs/bench/cost-model.json")]
    model: PathBuf,
    /// The engine's sustained ingest time ÷ the one-shot build's (measured at 10M: 1.47).
    #[arg(long, default_value_t = 1.47)]
    sustained_factor: f64,
    /// What routing adds to a search's p50 (measured: 0.73–0.83 ms).
    #[arg(long, default_value_t = 0.8)]
    router_overhead_ms: f64,
    #[arg(long)]
    skip_baseline: bool,
    /// Serve the collection an earlier run left in `--dir` (same `--vectors`): no ingest; its ingest time, when
    /// given here (`--ingest-seconds`, from that run's output), still corrects the model.
    #[arg(long, requires = "dir")]
    existing: bool,
    #[arg(long)]
    ingest_seconds: Option<f64>,
    /// With `--existing`: measure the healthy cluster's serving only (no shard killed, nothing written).
    #[arg(long, requires = "existing")]
    serve_only: bool,
    /// Diagnose where recall is lost: shards asked directly (their own setting, every list) on this many queries.
    #[arg(long, default_value_t = 0)]
    shard_recall: usize,
    /// Inverted lists each shard probes per search (sent with every query); default: the collection's
    /// (`attest_core::limits::DEFAULT_NPROBE`). The recall / latency trade-off at a scale.
    #[arg(long)]
    nprobe: Option<u32>,
    /// Inverted lists of the collection; default: the cost model's choice for the rows a replica holds. More
    /// lists than that make nprobe 1 lossy at a small scale (what a 10M replica's tuning faces, in minutes).
    #[arg(long)]
    nlist: Option<u32>,
    /// Serving is measured once the shard processes use less than this many CPU-seconds in 10 s.
    #[arg(long, default_value_t = 4.0)]
    idle_cpu_s: f64,
    /// JSON lines of every step.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A client of the router's gRPC port with no deadline of its own (the ingest requests wait for durable writes).
async fn router_client(cluster: &Cluster) -> anyhow::Result<RouterServiceClient<Channel>> {
    let channel = tonic::transport::Endpoint::from_shared(cluster.router_grpc())?
        .tcp_nodelay(true)
        .connect()
        .await?;
    Ok(RouterServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20))
}

async fn create_collection(
    router: &mut RouterServiceClient<Channel>,
    args: &Args,
    nlist: u32,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let request = pb::CreateCollectionRequest {
            name: COLLECTION.into(),
            shards: Some(args.shards),
            replication: Some(args.replication),
            index: Some(pb::IndexRequest {
                nlist: Some(nlist),
                ..Default::default()
            }),
            ..Default::default()
        };
        match router.create_collection(request).await {
            Ok(_) => return Ok(()),
            Err(e) if started.elapsed() < Duration::from_secs(60) => {
                eprintln!("create collection: {} (retrying)", e.message());
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => anyhow::bail!("create collection: {e}"),
        }
    }
}

/// Each replica's live documents, by shard (from `ShardService/Stats` on the node holding it; None where the
/// node does not answer).
async fn replica_documents(cluster: &Cluster) -> anyhow::Result<BTreeMap<u32, Vec<Option<u64>>>> {
    Ok(replica_stats(cluster)
        .await?
        .into_iter()
        .map(|(shard, stats)| {
            (
                shard,
                stats
                    .iter()
                    .map(|s| s.as_ref().map(|s| s.live_documents))
                    .collect(),
            )
        })
        .collect())
}

/// Every replica's Stats (None: it did not answer), by shard, in placement order.
async fn replica_stats(
    cluster: &Cluster,
) -> anyhow::Result<BTreeMap<u32, Vec<Option<pb::ShardStatsResponse>>>> {
    let mut out = BTreeMap::new();
    for (shard, replicas) in cluster.placement(COLLECTION)? {
        let mut stats = Vec::new();
        for addr in replicas {
            let request = pb::ShardStatsRequest {
                collection: COLLECTION.into(),
                shard,
            };
            let answer = match ShardServiceClient::connect(addr).await {
                Ok(mut client) => client.stats(request).await.ok().map(|r| r.into_inner()),
                Err(_) => None,
            };
            stats.push(answer);
        }
        out.insert(shard, stats);
    }
    Ok(out)
}

/// What each replica serves from: its growing rows (scanned flat by every search) and sealed segments.
async fn replica_layout(cluster: &Cluster) -> anyhow::Result<Value> {
    let stats = replica_stats(cluster).await?;
    Ok(json!(stats
        .into_iter()
        .map(|(shard, replicas)| {
            let each: Vec<Value> = replicas
                .into_iter()
                .map(|s| s.map_or(Value::Null, |s| json!({
                    "growing_rows": s.growing_rows, "sealed_segments": s.sealed_segments,
                    // The replica's live recall estimate (its probe's exact re-runs of real searches) and the
                    // setting it tuned for the collection's target.
                    "recall": s.recall.map(|r| json!({"recall": r.recall, "low": r.low, "high": r.high, "samples": r.samples})),
                    "tuned": s.tuned.map(|t| json!({"nprobe": t.nprobe, "exact_refine": t.exact_refine, "recall": t.recall, "reached": t.reached})),
                })))
                .collect();
            (shard.to_string(), json!(each))
        })
        .collect::<BTreeMap<_, _>>()))
}

/// Every answering replica's live recall estimate (`ShardStats.recall`).
async fn replica_recalls(cluster: &Cluster) -> anyhow::Result<Vec<pb::RecallEstimate>> {
    Ok(replica_stats(cluster)
        .await?
        .into_values()
        .flatten()
        .flatten()
        .filter_map(|s| s.recall)
        .collect())
}

/// The collection's live recall estimate: every replica's (its probe's exact re-runs of real searches) weighted by
/// its samples, with the samples behind it; None before any replica has one.
async fn live_recall_estimate(cluster: &Cluster) -> anyhow::Result<Option<(f64, u64)>> {
    let recalls = replica_recalls(cluster).await?;
    let samples: u64 = recalls.iter().map(|r| r.samples).sum();
    let weighted: f64 = recalls.iter().map(|r| r.recall * r.samples as f64).sum();
    Ok((samples > 0).then(|| (weighted / samples as f64, samples)))
}

/// How long no replica's probe may measure a sample before the searches it gathered count as measured: twice
/// the probe's gathering (`engine.recall_probe.gather_ms`), which also outlasts one replica's scan at 10M (tens
/// of seconds from disk).
fn probe_quiet() -> Duration {
    Duration::from_millis(2 * attest_index::recall_probe::RecallProbeConfig::default().gather_ms)
}

/// The live estimate once the probes have measured what the searches before offered them (the traffic stopped):
/// waits, up to `limit`, until no replica has measured a sample for [`probe_quiet`]; returns the estimate and
/// the seconds waited.
async fn settled_recall_estimate(
    cluster: &Cluster,
    limit: Duration,
) -> anyhow::Result<(Option<(f64, u64)>, f64)> {
    let started = Instant::now();
    let measured = || async {
        anyhow::Ok(
            replica_recalls(cluster)
                .await?
                .iter()
                .map(|r| r.measured)
                .sum::<u64>(),
        )
    };
    let (mut last, mut since) = (measured().await?, Instant::now());
    while since.elapsed() < probe_quiet() && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let now = measured().await?;
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    Ok((
        live_recall_estimate(cluster).await?,
        started.elapsed().as_secs_f64(),
    ))
}

/// Waits (up to `limit`) until every replica has tuned its search setting on all the rows it has sealed: after a
/// bulk load each process's one tuning thread measures its replicas one after another, resting between them
/// (`engine.search_tuning.cpu_share`), and a replica not yet tuned serves with the configured `nprobe`. Returns
/// the seconds waited and the replicas still untuned then.
async fn wait_for_tunings(cluster: &Cluster, limit: Duration) -> anyhow::Result<(f64, usize)> {
    let started = Instant::now();
    loop {
        let untuned = replica_stats(cluster)
            .await?
            .into_values()
            .flatten()
            .filter(|s| {
                s.as_ref().is_none_or(|s| {
                    s.sealed_rows > 0 && s.tuned.is_none_or(|t| t.sealed_rows < s.sealed_rows)
                })
            })
            .count();
        if untuned == 0 || started.elapsed() >= limit {
            return Ok((started.elapsed().as_secs_f64(), untuned));
        }
        eprintln!("tuning: {untuned} replicas not yet tuned on all their sealed rows");
        tokio::time::sleep(Duration::from_secs(15)).await;
    }
}

/// The steps measured so far, printed and written to `--json` as each is done (a failed run keeps them).
pub struct Steps {
    all: Vec<Value>,
    path: Option<PathBuf>,
}

impl Steps {
    pub fn emit(&mut self, step: Value) -> anyhow::Result<()> {
        println!("{step}");
        self.all.push(step);
        if let Some(p) = &self.path {
            let lines: Vec<String> = self.all.iter().map(Value::to_string).collect();
            std::fs::write(p, lines.join("\n") + "\n")?;
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::env::set_current_dir(repo_root())?;
    let mut steps = Steps {
        all: Vec::new(),
        path: args.json.clone(),
    };
    let model: CostModel = serde_json::from_slice(
        &std::fs::read(&args.model).with_context(|| format!("reading {}", args.model.display()))?,
    )?;
    // The processes' settings come from the environment (`local-cluster.sh` passes no config file).
    let settings = attest_node::config::load(None, std::env::vars())?;
    let dedup = &settings.router.dedup;
    let shape = Shape {
        rows: RowLayout::cluster_benchmark(
            settings
                .engine
                .keep_sealed_vectors_in_log
                .for_replication(args.replication)
                .kept(),
            settings
                .router
                .check_near_duplicates
                .then(|| dedup.stored_band_count()),
        ),
        vectors: args.vectors as u64,
        shards: args.shards,
        replication: args.replication,
        nodes: 3,
        machines: 1,
        nprobe: args.nprobe.unwrap_or(attest_core::limits::DEFAULT_NPROBE),
    };
    let overheads = Overheads {
        sustained_factor: args.sustained_factor,
        router_overhead_ms: args.router_overhead_ms,
    };
    let predicted = cluster_plan::estimate(&model, shape, overheads, Corrections::NONE);
    steps.emit(json!({"step": "prediction", "estimate": predicted,
        "keep_sealed_vectors_in_log": settings.engine.keep_sealed_vectors_in_log,
        "check_near_duplicates": settings.router.check_near_duplicates}))?;

    let baseline = if args.skip_baseline {
        None
    } else {
        let b = report::baseline(predicted.rows_per_replica as usize, predicted.nlist)?;
        steps.emit(json!({"step": "baseline", "engine": b}))?;
        Some(b)
    };

    let mixture = Arc::new(corpus::mixture(args.vectors));
    let query_vectors = mixture.rows(corpus::QUERIES, 0, args.queries, 2);
    let truth_started = Instant::now();
    let before = corpus::exact_top_k(&mixture, &[(corpus::CORPUS, args.vectors)], &query_vectors)?;
    let after = corpus::exact_top_k(
        &mixture,
        &[
            (corpus::CORPUS, args.vectors),
            (corpus::OUTAGE, args.outage_docs),
        ],
        &query_vectors,
    )?;
    eprintln!(
        "exact top 10 of {} queries in {:.0} s",
        args.queries,
        truth_started.elapsed().as_secs_f64()
    );
    // The shards keep f16 vectors: their exact top 10 (what the live estimate holds a search to) is not the f32
    // vectors' top 10 the driver measures recall against, and no search of the stored vectors finds more of it
    // than this.
    let stored = corpus::exact_top_k_stored(
        &mixture,
        &[(corpus::CORPUS, args.vectors)],
        &query_vectors,
        true,
    )?;
    let stored_ceiling = stored
        .iter()
        .zip(&before)
        .map(|(s, t)| corpus::recall(s, t))
        .sum::<f64>()
        / before.len().max(1) as f64;
    eprintln!("the f16 vectors' exact top 10 hold {stored_ceiling:.4} of the f32 vectors'");
    steps.emit(json!({"step": "truth", "stored_f16_exact_recall_at_10": stored_ceiling}))?;

    let (dir, owned) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => {
            let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
            let d = PathBuf::from(home).join(".cache/attest-cluster-scale");
            let _ = std::fs::remove_dir_all(&d);
            (d, true)
        }
    };
    let result = attest_benches::stopped_on_signal(report::run(
        &args,
        &dir,
        &mixture,
        args.nlist.unwrap_or(predicted.nlist),
        (query_vectors, before, after),
        &mut steps,
    ))
    .await;
    let measured = match result {
        Ok(m) => m,
        Err(e) => {
            eprintln!("the run failed; its logs are in {}/logs", dir.display());
            return Err(e);
        }
    };
    let summary = report::summary(&model, &predicted, &measured, baseline.as_ref(), overheads);
    steps.emit(summary)?;
    if owned {
        std::fs::remove_dir_all(&dir).ok();
    }
    ensure!(measured.ingest_accepted > 0, "nothing was ingested");
    Ok(())
}
