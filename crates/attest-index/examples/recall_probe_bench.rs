//! Benchmark of the live recall estimate (issue 73) in one shard engine: the same clustered rows and queries served
//! with the probe off and on (`engine.recall_probe`, default sample rate and CPU share), in one run. Prints the
//! throughput ratio (on / off: the probe's cost) and the estimate against the recall measured here from an exact
//! scan of the same queries.
//!
//! `cargo run -p attest-index --example recall_probe_bench -- [ROWS] [NPROBE] [ROUNDS] [SAMPLE_RATE] [CPU_SHARE]`
//! (defaults 200000, 4, 150, and the engine's defaults; 128-d, 1,000 queries per round).

use std::time::{Duration, Instant};

use attest_index::recall_probe::RecallProbeConfig;
use attest_index::{EngineConfig, Filter, SearchParams, ShardEngine};

#[path = "shared/clustered.rs"]
mod clustered;
use clustered::{arg, build, ivfpq_for, recall_of, Built, DIM, K};

const QUERIES: usize = 1_000;

fn config(rows: usize, sample_rate: f64, cpu_share: f64) -> EngineConfig {
    EngineConfig {
        dimension: DIM,
        ivfpq: ivfpq_for(rows, 32),
        recall_probe: RecallProbeConfig {
            sample_rate,
            cpu_share,
            ..RecallProbeConfig::default()
        },
        seal_idle_ms: 0,
        ..EngineConfig::default()
    }
}

/// Searches every query `rounds` times with `nprobe`; returns searches per second and the last round's ids.
fn serve(
    engine: &ShardEngine,
    queries: &[Vec<f32>],
    nprobe: u32,
    rounds: usize,
) -> (f64, Vec<Vec<usize>>) {
    let filter = Filter::default();
    let started = Instant::now();
    let mut last = Vec::new();
    for round in 0..rounds {
        last.clear();
        for q in queries {
            let p = SearchParams::dense("t", q, K, Some(nprobe), &filter);
            let hits = engine.search(&p).expect("search").dense;
            if round + 1 == rounds {
                last.push(
                    hits.iter()
                        .map(|h| h.doc_id.parse().expect("row id"))
                        .collect(),
                );
            }
        }
    }
    (
        (rounds * queries.len()) as f64 / started.elapsed().as_secs_f64(),
        last,
    )
}

fn main() {
    let rows = arg(0, 200_000.0) as usize;
    let nprobe = arg(1, 4.0) as u32;
    let rounds = arg(2, 150.0) as usize;
    let defaults = RecallProbeConfig::default();
    let sample_rate = arg(3, defaults.sample_rate);
    let cpu_share = arg(4, defaults.cpu_share);

    let Built {
        dir,
        queries,
        truth,
    } = build(rows, QUERIES, config(rows, 0.0, cpu_share));
    let recall_of = |found: &[Vec<usize>]| recall_of(found, &truth);

    // Off and on, each in its own opening of the same files; off twice around on, so drift shows.
    let run = |rate: f64| {
        let engine = ShardEngine::open(dir.path(), config(rows, rate, cpu_share)).expect("reopen");
        serve(&engine, &queries, nprobe, 2); // warm the page cache and the engine
        let (qps, found) = serve(&engine, &queries, nprobe, rounds);
        // Let the probe finish what it holds (bounded): the estimate read after the searches.
        std::thread::sleep(Duration::from_secs(2));
        (qps, recall_of(&found), engine.stats().recall)
    };
    let (off_a, measured, _) = run(0.0);
    let (on, _, estimate) = run(sample_rate);
    let (off_b, _, _) = run(0.0);
    let off = (off_a + off_b) / 2.0;
    println!(
        "rows {rows}, nprobe {nprobe}, {} searches per run: probe off {off_a:.0} / {off_b:.0} searches/s, on (sample rate {sample_rate}) {on:.0} searches/s: **{:.3}×**",
        rounds * QUERIES,
        on / off
    );
    match estimate {
        Some(e) => println!(
            "recall@{K} measured {measured:.4}; estimate {:.4} (95% {:.4}–{:.4}) from {} samples ({} measured, {} dropped): off by {:+.4}",
            e.recall,
            e.low,
            e.high,
            e.samples,
            e.measured,
            e.dropped,
            e.recall - measured
        ),
        None => println!("recall@{K} measured {measured:.4}; no estimate (no sample measured)"),
    }
}
