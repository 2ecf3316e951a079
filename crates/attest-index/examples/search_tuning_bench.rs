//! Benchmark of the recall target (issue 73) in one shard engine: clustered rows served with the fixed defaults
//! before targets (nprobe 32, the best 2 × k re-scored from the full vectors) and with the setting the replica
//! tuned for `recall_target`, alternately in one run. Prints the tuned setting and how long the tuning took, the
//! recall@10 each delivers on queries the tuning never saw (against an exact scan), their throughput and p95 on
//! one thread, and the throughput ratio tuned / fixed.
//!
//! `cargo run -p attest-index --example search_tuning_bench -- [ROWS] [TARGET] [ROUNDS]`
//! (defaults 200000, 0.95, 5; 128-d, 1,000 queries per round).

use std::time::{Duration, Instant};

use attest_index::search_tuning::SearchTuningConfig;
use attest_index::{EngineConfig, Filter, SearchParams, ShardEngine};

#[path = "shared/clustered.rs"]
mod clustered;
use clustered::{arg, build, ivfpq_for, recall_of, Built, DIM, K};

const QUERIES: usize = 1_000;
/// The nprobe every search was served with before recall targets (`attest_core::limits::DEFAULT_NPROBE`).
const FIXED_NPROBE: u32 = 32;

fn config(rows: usize, recall_target: f64) -> EngineConfig {
    EngineConfig {
        dimension: DIM,
        ivfpq: ivfpq_for(rows, FIXED_NPROBE),
        recall_target,
        search_tuning: SearchTuningConfig {
            cpu_share: 1.0,
            ..SearchTuningConfig::default()
        },
        seal_threshold: rows,
        max_unsealed_rows: rows * 2,
        seal_idle_ms: 0,
        ..EngineConfig::default()
    }
}

/// One round over every query with `nprobe` (None: the tuned setting): searches per second, p95 ms and the ids.
fn serve(
    engine: &ShardEngine,
    queries: &[Vec<f32>],
    nprobe: Option<u32>,
) -> (f64, f64, Vec<Vec<usize>>) {
    let filter = Filter::default();
    let mut took = Vec::with_capacity(queries.len());
    let mut found = Vec::with_capacity(queries.len());
    let started = Instant::now();
    for q in queries {
        let p = SearchParams::dense("t", q, K, nprobe, &filter);
        let one = Instant::now();
        let hits = engine.search(&p).expect("search").dense;
        took.push(one.elapsed().as_secs_f64() * 1e3);
        found.push(
            hits.iter()
                .map(|h| h.doc_id.parse().expect("row id"))
                .collect(),
        );
    }
    let qps = queries.len() as f64 / started.elapsed().as_secs_f64();
    took.sort_by(f64::total_cmp);
    (qps, took[took.len() * 95 / 100], found)
}

fn main() {
    let rows = arg(0, 200_000.0) as usize;
    let target = arg(1, 0.95);
    let rounds = arg(2, 5.0) as usize;

    let Built {
        dir,
        queries,
        truth,
    } = build(rows, QUERIES, config(rows, 0.0));

    // Opened with the target: the replica tunes itself in the background, as after a restart.
    let engine = ShardEngine::open(dir.path(), config(rows, target)).expect("reopen");
    let deadline = Instant::now() + Duration::from_secs(1_800);
    let tuned = loop {
        if let Some(t) = engine.stats().tuned {
            break t;
        }
        assert!(Instant::now() < deadline, "no tuning");
        std::thread::sleep(Duration::from_millis(50));
    };
    println!(
        "rows {rows}, nlist {}, target {target}: tuned nprobe {} exact_refine {} (recall {:.4} on {} sampled queries, reached {}) in {:.1} s",
        engine.config().ivfpq.nlist,
        tuned.setting.nprobe,
        tuned.setting.exact_refine,
        tuned.recall,
        tuned.queries,
        tuned.reached,
        tuned.took_ms as f64 / 1e3
    );

    serve(&engine, &queries, Some(FIXED_NPROBE)); // warm the page cache and the engine
    let (mut fixed, mut tuned_runs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        fixed.push(serve(&engine, &queries, Some(FIXED_NPROBE)));
        tuned_runs.push(serve(&engine, &queries, None));
    }
    let summary = |runs: &[(f64, f64, Vec<Vec<usize>>)]| {
        let qps = runs.iter().map(|r| r.0).sum::<f64>() / runs.len() as f64;
        let p95 = runs.iter().map(|r| r.1).sum::<f64>() / runs.len() as f64;
        (qps, p95, recall_of(&runs[0].2, &truth))
    };
    let (fixed_qps, fixed_p95, fixed_recall) = summary(&fixed);
    let (tuned_qps, tuned_p95, tuned_recall) = summary(&tuned_runs);
    println!(
        "fixed (nprobe {FIXED_NPROBE}, re-score 2×k): recall@{K} {fixed_recall:.4}, {fixed_qps:.0} searches/s, p95 {fixed_p95:.3} ms"
    );
    println!(
        "tuned: recall@{K} {tuned_recall:.4}, {tuned_qps:.0} searches/s, p95 {tuned_p95:.3} ms: **{:.2}× the fixed throughput**",
        tuned_qps / fixed_qps
    );
}
