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
use crate::{corpus, create_collection, ingest, procs, replica_documents, router_client, Args};

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
    pub steps: Vec<Value>,
    pub ingest_accepted: u64,
    pub ingest_seconds: f64,
    pub disk_bytes: u64,
    pub healthy_dense_one: LoadFigures,
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

/// Steps 3–6: up, ingest, serve, kill shard-1, write, restart, catch up, serve again.
pub async fn run(
    args: &Args,
    dir: &Path,
    mixture: &Arc<Mixture>,
    nlist: u32,
    query_vectors: Vec<f32>,
    before: Vec<Vec<String>>,
    after: Vec<Vec<String>>,
) -> anyhow::Result<Measured> {
    let cluster = Cluster::up(3, Some(dir), args.port)?;
    let mut router = router_client(&cluster).await?;
    create_collection(&mut router, args, nlist).await?;
    let mut steps = Vec::new();

    let procs_before = procs::snapshot(dir);
    let ingested = ingest::ingest(
        &router,
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
    steps.push(json!({
        "step": "ingest", "vectors": args.vectors, "accepted": ingested.accepted,
        "near_duplicates": ingested.near_duplicates, "rejected": ingested.rejected,
        "acked_s": acked_s, "sealed_s": ingest_seconds,
        "vectors_per_s": ingested.accepted as f64 / ingest_seconds,
        "replica_rows_per_s": replica_rows as f64 / ingest_seconds,
        "bytes_written": written, "cpu_seconds": cpu,
        "disk_bytes": disk_bytes, "disk_by_node": disk, "processes": procs_after,
    }));
    eprintln!(
        "ingest: {} documents acknowledged in {acked_s:.0} s, sealed at {ingest_seconds:.0} s; {:.1} GB written, {:.1} GB on the shard nodes",
        ingested.accepted,
        written as f64 / 1e9,
        disk_bytes as f64 / 1e9
    );

    let truth_before = Arc::new(QuerySet {
        vectors: query_vectors.clone(),
        truth: before,
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
    let healthy = phases(
        &router,
        &truth_before,
        &[
            (Lanes::Dense, 1),
            (Lanes::Dense, t),
            (Lanes::Hybrid, 1),
            (Lanes::Hybrid, t),
        ],
        args.seconds,
    )
    .await;
    steps.push(json!({"step": "serve", "phases": healthy, "processes": procs::snapshot(dir)}));

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
    steps.push(json!({
        "step": "shard_down", "killed": "shard-1", "phases": down,
        "written_while_down": outage.accepted, "write_seconds": outage.seconds,
    }));

    cluster.restart("shard-1")?;
    let restarted = Instant::now();
    let expected = ingested.accepted + outage.accepted;
    let mut last = String::new();
    let caught_up = loop {
        ensure!(
            restarted.elapsed() < Duration::from_secs(3600),
            "replicas still disagree an hour after the restart: {last}"
        );
        if cluster.alive_shards().unwrap_or(0) == 3 {
            match replica_documents(&cluster).await {
                Ok(counts) => {
                    let agree = counts.values().all(|c| c.iter().all(|x| *x == c[0]));
                    let total: u64 = counts.values().map(|c| c[0]).sum();
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
    });
    let again = phases(
        &router,
        &truth_after,
        &[(Lanes::Dense, 1), (Lanes::Dense, t)],
        args.seconds,
    )
    .await;
    steps.push(json!({
        "step": "catch_up", "seconds_to_agree": caught_up, "documents": expected, "phases": again,
    }));
    let healthy_dense_one = healthy[0].clone();
    Ok(Measured {
        steps,
        ingest_accepted: ingested.accepted,
        ingest_seconds,
        disk_bytes,
        healthy_dense_one,
    })
}

/// This machine as a node of the 100M plan: its memory, and the disk of the filesystem the run used.
fn this_machine() -> Machine {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let ram_kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    // SAFETY: statvfs fills the struct it is given.
    let disk = unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        let home =
            std::ffi::CString::new(std::env::var("HOME").unwrap_or_else(|_| "/".into())).unwrap();
        if libc::statvfs(home.as_ptr(), &mut s) == 0 {
            s.f_blocks as f64 * s.f_frsize as f64
        } else {
            0.0
        }
    };
    Machine {
        ram_bytes: ram_kb * 1024.0,
        disk_bytes: disk,
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
    let replica_rows_per_s =
        (m.ingest_accepted * u64::from(predicted.shape.replication)) as f64 / m.ingest_seconds;
    let corrections = Corrections {
        ingest: m.ingest_seconds / predicted.ingest_s,
        disk: m.disk_bytes as f64 / predicted.disk_bytes,
    };
    // What routing really added to the slowest shard's p95 at this size (gRPC, fan-out, merge, payloads).
    let corrected = Overheads {
        router_overhead_ms: (m.healthy_dense_one.p95_ms - predicted.shard_p95_ms).max(0.0),
        ..overheads
    };
    let plan = cluster_plan::plan(
        model,
        100_000_000,
        predicted.shape.replication,
        predicted.shape.nprobe,
        this_machine(),
        corrected,
        corrections,
    );
    json!({
        "step": "summary",
        "ingest_s": {"predicted": predicted.ingest_s, "measured": m.ingest_seconds},
        "disk_bytes": {"predicted": predicted.disk_bytes, "measured": m.disk_bytes},
        "p95_ms_dense_one_client": {"predicted": predicted.p95_ms, "measured": m.healthy_dense_one.p95_ms},
        "corrections": corrections,
        "routed_p95_overhead_ms": corrected.router_overhead_ms,
        "replica_rows_per_s": replica_rows_per_s,
        "baseline_vectors_per_s": baseline.map(|b| b.vectors_per_s),
        "ingest_ratio_to_single_engine": baseline.map(|b| replica_rows_per_s / b.vectors_per_s),
        "plan_100m": plan,
    })
}
