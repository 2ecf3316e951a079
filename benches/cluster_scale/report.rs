//! The measured steps of `cluster_scale` (the baseline engine run; ingest, serving, a shard killed, catch-up on
//! the local cluster) and the summary that sets them against the prediction and plans 100M vectors from the
//! corrected model.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use attest_lab::bench::cluster_plan::{self, ClusterEstimate, Corrections, Machine, Overheads};
use attest_lab::bench::fit::CostModel;
use attest_lab::bench::mixture::Mixture;
use serde::Serialize;
use serde_json::{json, Value};

use crate::common::cluster::Cluster;
use crate::serve::{load, Lanes, LoadFigures, QuerySet};
use crate::{
    corpus, create_collection, ingest, procs, replica_documents, replica_layout, router_client,
    settled_recall_estimate, wait_for_tunings, Args, Steps,
};

/// The single engine's sustained ingest of one replica's rows (`engine_ingest`).
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub vectors: usize,
    pub nlist: u32,
    pub seconds: f64,
    pub vectors_per_s: f64,
    pub line: String,
}

/// `engine_ingest --vectors rows --skip-one-shot --nlist nlist`, the example beside this one, with both cores for
/// BLAS (as its figures in docs/BENCHMARKS.md were measured).
pub fn baseline(rows: usize, nlist: u32) -> anyhow::Result<Baseline> {
    let exe = std::env::current_exe()?;
    let engine = exe.with_file_name("engine_ingest");
    eprintln!(
        "baseline: engine_ingest --vectors {rows} --nlist {nlist} (the single engine, alongside)"
    );
    let out = Command::new(&engine)
        .args([
            "--vectors",
            &rows.to_string(),
            "--skip-one-shot",
            "--nlist",
            &nlist.to_string(),
        ])
        .env("OPENBLAS_NUM_THREADS", "2")
        .output()
        .with_context(|| format!("running {}", engine.display()))?;
    ensure!(
        out.status.success(),
        "engine_ingest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("engine "))
        .context("no `engine` line in engine_ingest's output")?
        .to_string();
    // "engine   N vectors   S s   ..."
    let seconds: f64 = line
        .split_whitespace()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .context("engine_ingest's time")?;
    Ok(Baseline {
        vectors: rows,
        nlist,
        seconds,
        vectors_per_s: rows as f64 / seconds,
        line,
    })
}

/// What the summary needs from the measured steps.
pub struct Measured {
    pub ingest_accepted: u64,
    /// Ingest through the router until every replica was sealed (None: not measured by this run).
    pub ingest_seconds: Option<f64>,
    pub disk_bytes: u64,
    pub healthy_dense_one: LoadFigures,
    /// The replicas' live recall estimate after the healthy phases, and its samples.
    pub live_recall: Option<(f64, u64)>,
    /// The dense phase with `--threads` clients: the machine saturated, so its QPS gives the CPU per search.
    pub healthy_dense_many: LoadFigures,
}

/// The router's HTTP address (`scripts/local-cluster.sh` writes it).
fn router_http(dir: &Path) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(dir.join("router.addr"))?
        .trim()
        .to_string())
}

async fn phases(
    router: &attest_proto::v1::router_service_client::RouterServiceClient<
        tonic::transport::Channel,
    >,
    queries: &Arc<QuerySet>,
    cases: &[(Lanes, usize)],
    seconds: f64,
) -> Vec<LoadFigures> {
    let mut out = Vec::new();
    for &(lanes, threads) in cases {
        let f = load(router, queries, lanes, threads, seconds).await;
        eprintln!(
            "  {lanes:?} × {threads}: {:.1} QPS, p50 {:.2} ms, p95 {:.2} ms, recall@10 {}, failed {}, degraded {}",
            f.qps,
            f.p50_ms,
            f.p95_ms,
            f.recall_at_10.map_or("-".into(), |r| format!("{r:.3}")),
            f.failed,
            f.degraded
        );
        out.push(f);
    }
    out
}

/// Waits until the shard processes have settled (together under `idle_cpu_s` CPU-seconds in 10 s): after a
/// bulk load every replica merges its segments and RocksDB compacts, and serving measured meanwhile measures
/// that. Settled is not silent: anti-entropy and heartbeats keep 12 replicas at ~0.28 cores here.
async fn settle(dir: &Path, idle_cpu_s: f64) -> f64 {
    let started = Instant::now();
    let shards = |all: std::collections::BTreeMap<String, procs::ProcFigures>| {
        all.into_iter()
            .filter(|(n, _)| n.starts_with("shard"))
            .collect()
    };
    while started.elapsed() < Duration::from_secs(3600) {
        let before = shards(procs::snapshot(dir));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let (_, cpu) = procs::delta(&before, &shards(procs::snapshot(dir)));
        if cpu < idle_cpu_s {
            break;
        }
        eprintln!("settling: the shard processes used {cpu:.1} CPU-s in 10 s");
    }
    started.elapsed().as_secs_f64()
}

/// Steps 3–6: up, ingest (unless `--existing`), settle, serve, kill shard-1, write, restart, catch up, serve.
pub async fn run(
    args: &Args,
    dir: &Path,
    mixture: &Arc<Mixture>,
    nlist: u32,
    (query_vectors, before, after): (Vec<f32>, Vec<Vec<String>>, Vec<Vec<String>>),
    steps: &mut Steps,
) -> anyhow::Result<Measured> {
    let cluster = Cluster::up(3, Some(dir), args.port)?;
    let mut router = router_client(&cluster).await?;
    let (accepted, ingest_seconds) = if args.existing {
        let held = documents_held(&cluster).await?;
        // The truth after an outage counts `--outage-docs` documents of the outage stream: a run on data whose
        // outage wrote another number measures against documents that are not there (a serve-only run at 1M
        // with the default 20,000 on data holding 10,000 read recall 0.011 low).
        let outage = held.saturating_sub(args.vectors as u64);
        ensure!(
            outage == 0 || outage == args.outage_docs as u64,
            "the collection holds {held} documents: {outage} beyond the corpus, written during an earlier run's \
             outage; pass --outage-docs {outage}"
        );
        (held, args.ingest_seconds)
    } else {
        create_collection(&mut router, args, nlist).await?;
        let (accepted, seconds) = ingest_step(args, dir, &router, mixture, steps).await?;
        (accepted, Some(seconds))
    };
    let mut settle_s = settle(dir, args.idle_cpu_s).await;
    eprintln!("the shard processes are idle {settle_s:.0} s after the ingest");
    // Searches that name no nprobe are served with each replica's tuned setting: measured once every replica has
    // one for the rows it holds (a tuning thread rests between tunings, so idle is not yet tuned).
    let (mut tuned_s, mut untuned) = (0.0, 0);
    if args.nprobe.is_none() {
        (tuned_s, untuned) = wait_for_tunings(&cluster, Duration::from_secs(3600)).await?;
        eprintln!("every replica tuned {tuned_s:.0} s after settling ({untuned} not)");
        settle_s += tuned_s + settle(dir, args.idle_cpu_s).await;
    }
    let disk_bytes: u64 = ["shard-1", "shard-2", "shard-3"]
        .iter()
        .map(|n| procs::disk_bytes(&dir.join(n)))
        .sum();

    // An earlier run's collection also holds the documents it wrote while its shard was down, unless that run
    // stopped before (it then holds the corpus alone).
    let holds_outage_docs = accepted > args.vectors as u64;
    let truth_before = Arc::new(QuerySet {
        vectors: query_vectors.clone(),
        truth: if holds_outage_docs {
            after.clone()
        } else {
            before
        },
        nprobe: args.nprobe,
    });
    // One untimed pass, so the first phase does not pay for cold pages alone.
    load(
        &router,
        &truth_before,
        Lanes::Dense,
        args.threads,
        args.seconds / 3.0,
    )
    .await;
    let t = args.threads;
    let mut healthy = phases(
        &router,
        &truth_before,
        &[(Lanes::Dense, 1), (Lanes::Dense, t)],
        args.seconds,
    )
    .await;
    // The estimate of the dense phases' searches, read before the hybrid ones: a hybrid search's dense lane is
    // searched `router.lane_depth` (50) deep, and its samples measure a recall@50 that the driver's recall@10
    // does not (read after them, the window held mostly those).
    let (live_recall, probe_wait_s) =
        settled_recall_estimate(&cluster, Duration::from_secs(900)).await?;
    healthy.extend(
        phases(
            &router,
            &truth_before,
            &[(Lanes::Hybrid, 1), (Lanes::Hybrid, t)],
            args.seconds,
        )
        .await,
    );
    steps.emit(json!({
        "step": "serve", "settle_s": settle_s, "tuned_s": tuned_s, "untuned_replicas": untuned, "documents": accepted, "disk_bytes_settled": disk_bytes,
        "nprobe": args.nprobe, "phases": healthy, "processes": procs::snapshot(dir),
        "replicas": replica_layout(&cluster).await?, "live_recall_estimate": live_recall,
        "probe_wait_s": probe_wait_s,
    }))?;
    let measured = Measured {
        ingest_accepted: accepted,
        ingest_seconds,
        disk_bytes,
        healthy_dense_one: healthy[0].clone(),
        healthy_dense_many: healthy[1].clone(),
        live_recall,
    };
    if args.shard_recall > 0 {
        let diagnosis =
            crate::shard_recall::measure(&cluster, &truth_before, args.shard_recall, nlist).await?;
        steps.emit(diagnosis)?;
    }
    if args.serve_only {
        return Ok(measured);
    }

    cluster.kill("shard-1")?;
    eprintln!("shard-1 SIGKILLed");
    let down = phases(
        &router,
        &truth_before,
        &[(Lanes::Dense, 1), (Lanes::Dense, t), (Lanes::Hybrid, t)],
        args.seconds,
    )
    .await;
    let outage = ingest::ingest(
        &router,
        mixture,
        corpus::OUTAGE,
        args.outage_docs,
        args.batch,
        args.in_flight,
    )
    .await?;
    steps.emit(json!({
        "step": "shard_down", "killed": "shard-1", "phases": down,
        "written_while_down": outage.accepted, "write_seconds": outage.seconds,
    }))?;

    // What the live replicas hold now (an --existing collection may already have had these ids).
    let expected = documents_held(&cluster).await?;
    cluster.restart("shard-1")?;
    let restarted = Instant::now();
    let mut last = String::new();
    let caught_up = loop {
        ensure!(
            restarted.elapsed() < Duration::from_secs(3600),
            "replicas still disagree an hour after the restart: {last}"
        );
        if cluster.alive_shards().unwrap_or(0) == 3 {
            match replica_documents(&cluster).await {
                Ok(counts) => {
                    let agree = counts
                        .values()
                        .all(|c| c.iter().all(|x| x.is_some() && *x == c[0]));
                    let total: u64 = counts.values().filter_map(|c| c[0]).sum();
                    if agree && total == expected {
                        break restarted.elapsed().as_secs_f64();
                    }
                    last = format!("{counts:?}");
                }
                Err(e) => last = e.to_string(),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("shard-1 caught up {caught_up:.1} s after its restart");
    let truth_after = Arc::new(QuerySet {
        vectors: query_vectors,
        truth: after,
        nprobe: args.nprobe,
    });
    let again = phases(
        &router,
        &truth_after,
        &[(Lanes::Dense, 1), (Lanes::Dense, t)],
        args.seconds,
    )
    .await;
    steps.emit(json!({
        "step": "catch_up", "seconds_to_agree": caught_up, "documents": expected, "phases": again,
    }))?;
    Ok(measured)
}

/// Documents the collection holds: per shard, the most any answering replica holds.
async fn documents_held(cluster: &Cluster) -> anyhow::Result<u64> {
    Ok(replica_documents(cluster)
        .await?
        .values()
        .map(|c| c.iter().flatten().copied().max().unwrap_or(0))
        .sum())
}

/// The corpus through the router, then a seal of every replica: (documents accepted, seconds).
async fn ingest_step(
    args: &Args,
    dir: &Path,
    router: &attest_proto::v1::router_service_client::RouterServiceClient<
        tonic::transport::Channel,
    >,
    mixture: &Arc<Mixture>,
    steps: &mut Steps,
) -> anyhow::Result<(u64, f64)> {
    let procs_before = procs::snapshot(dir);
    let ingested = ingest::ingest(
        router,
        mixture,
        corpus::CORPUS,
        args.vectors,
        args.batch,
        args.in_flight,
    )
    .await?;
    let acked_s = ingested.seconds;
    let seal_started = Instant::now();
    let sealed = reqwest::Client::new()
        .post(format!(
            "{}/v1/collections/{}/maintain",
            router_http(dir)?,
            ingest::COLLECTION
        ))
        .json(&json!({"seal": true}))
        .send()
        .await?;
    ensure!(
        sealed.status().is_success(),
        "seal: HTTP {}",
        sealed.status()
    );
    let ingest_seconds = acked_s + seal_started.elapsed().as_secs_f64();
    let procs_after = procs::snapshot(dir);
    let (written, cpu) = procs::delta(&procs_before, &procs_after);
    let disk: Vec<(String, u64)> = [
        "shard-1", "shard-2", "shard-3", "meta-1", "meta-2", "meta-3",
    ]
    .iter()
    .map(|n| (n.to_string(), procs::disk_bytes(&dir.join(n))))
    .collect();
    let disk_bytes: u64 = disk
        .iter()
        .filter(|(n, _)| n.starts_with("shard"))
        .map(|(_, b)| b)
        .sum();
    let replica_rows = ingested.accepted * u64::from(args.replication);
    steps.emit(json!({
        "step": "ingest", "vectors": args.vectors, "accepted": ingested.accepted,
        "near_duplicates": ingested.near_duplicates, "rejected": ingested.rejected,
        "acked_s": acked_s, "sealed_s": ingest_seconds,
        "slowest_batch_s": ingested.slowest_batch_s, "batches_resent": ingested.resent,
        "vectors_per_s": ingested.accepted as f64 / ingest_seconds,
        "replica_rows_per_s": replica_rows as f64 / ingest_seconds,
        "bytes_written": written, "cpu_seconds": cpu,
        "disk_bytes": disk_bytes, "disk_by_node": disk, "processes": procs_after,
    }))?;
    eprintln!(
        "ingest: {} documents acknowledged in {acked_s:.0} s, sealed at {ingest_seconds:.0} s; {:.1} GB written, {:.1} GB on the shard nodes",
        ingested.accepted,
        written as f64 / 1e9,
        disk_bytes as f64 / 1e9
    );
    Ok((ingested.accepted, ingest_seconds))
}

/// Bytes of the filesystem of $HOME: (its size, what is free now).
fn home_disk() -> (f64, f64) {
    let home = std::ffi::CString::new(std::env::var("HOME").unwrap_or_else(|_| "/".into()))
        .unwrap_or_default();
    // SAFETY: statvfs only fills the struct it is given.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(home.as_ptr(), &mut s) != 0 {
            return (0.0, 0.0);
        }
        let block = s.f_frsize as f64;
        (s.f_blocks as f64 * block, s.f_bavail as f64 * block)
    }
}

/// This machine as a node of the 100M plan: its memory, and the disk of the filesystem the run used.
fn this_machine() -> Machine {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let ram_kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    Machine {
        ram_bytes: ram_kb * 1024.0,
        disk_bytes: home_disk().0,
    }
}

/// Measured against predicted, and the 100M plan from the model corrected by those ratios.
pub fn summary(
    model: &CostModel,
    predicted: &ClusterEstimate,
    m: &Measured,
    baseline: Option<&Baseline>,
    overheads: Overheads,
) -> Value {
    let replica_rows_per_s = m
        .ingest_seconds
        .map(|s| (m.ingest_accepted * u64::from(predicted.shape.replication)) as f64 / s);
    // With every core busy (the many-client phase), each routed search cost cores ÷ QPS of CPU, spread over
    // one search per shard: what one shard's search costs here, against the model's p50 for it.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let shard_search_cpu_ms =
        cores * 1e3 / (m.healthy_dense_many.qps.max(1e-9) * f64::from(predicted.shape.shards));
    let corrections = Corrections {
        ingest: m.ingest_seconds.map_or(1.0, |s| s / predicted.ingest_s),
        disk: m.disk_bytes as f64 / predicted.disk_bytes,
        latency: shard_search_cpu_ms / predicted.shard_p50_ms.max(1e-9),
    };
    // The largest collection this machine's free disk (what the run's data left, plus that data) holds.
    let replica_rows = (m.ingest_accepted * u64::from(predicted.shape.replication)) as f64;
    let bytes_per_replica_row = m.disk_bytes as f64 / replica_rows.max(1.0);
    let holds = (home_disk().1 + m.disk_bytes as f64)
        / (bytes_per_replica_row * f64::from(predicted.shape.replication));
    let plan = cluster_plan::plan(
        model,
        cluster_plan::Shape {
            vectors: 100_000_000,
            ..predicted.shape
        },
        this_machine(),
        overheads,
        corrections,
    );
    json!({
        "step": "summary",
        "ingest_s": {"predicted": predicted.ingest_s, "measured": m.ingest_seconds},
        "disk_bytes": {"predicted": predicted.disk_bytes, "measured": m.disk_bytes},
        "p95_ms_dense_one_client": {"predicted": predicted.p95_ms, "measured": m.healthy_dense_one.p95_ms},
        // The live estimate against the recall the driver measured on the same searches (the dense phases).
        "live_recall_estimate": m.live_recall.map(|(estimate, samples)| json!({
            "estimate": estimate, "samples": samples,
            "measured": [m.healthy_dense_one.recall_at_10, m.healthy_dense_many.recall_at_10],
        })),
        "corrections": corrections,
        "disk_bytes_per_replica_row": bytes_per_replica_row,
        "vectors_this_disk_holds": holds,
        "shard_search_cpu_ms": shard_search_cpu_ms,
        "replica_rows_per_s": replica_rows_per_s,
        "baseline_vectors_per_s": baseline.map(|b| b.vectors_per_s),
        "ingest_ratio_to_single_engine": baseline
            .zip(replica_rows_per_s)
            .map(|(b, r)| r / b.vectors_per_s),
        "plan_100m": plan,
    })
}
