//! Drift at scale (issue 73 item 3): one shard engine with a recall target holds rows of a first mixture, sealed,
//! trained and tuned; then as many rows again of a second mixture, in dimensions the quantizer never saw, are
//! written while a client searches both. Printed every few seconds until recall is back at the target: the live
//! recall estimate (the probe's exact re-runs of real searches, with its 95% interval), the tuned setting, the
//! quantizer retrains, and the recall@10 the client's queries get against an exact scan of every row.
//!
//! The seal-time drift check (`quantizer_drift_bound`, reconstruction error) is off here, as in the small-scale
//! test (`tests/search_tuning.rs`), so that what notices is the recall target's own path: no setting reaches
//! it, the replica retrains its quantizer in the background and tunes again, without a restart.
//!
//! `cargo run -p attest-index --example drift_bench -- [ROWS_PER_MIXTURE] [TARGET] [QUERIES]`
//! (defaults 500000, 0.95, 300; 128-d, 500 centres a mixture).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_index::search_tuning::SearchTuningConfig;
use attest_index::{EngineConfig, Filter, SearchParams, ShardEngine};
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

#[path = "shared/clustered.rs"]
mod clustered;
use clustered::{arg, exact_truth, ivfpq_for, normalise, points, recall_of, write_rows, DIM, K};

/// Longest wait for recall to come back after the second mixture is sealed.
const RECOVERY_LIMIT: Duration = Duration::from_secs(1_800);

/// Points of a 500-centre mixture whose centres lie in one half of the dimensions (`upper`: the other half).
fn half_mixture(n: usize, upper: bool, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let unit = Normal::new(0.0f32, 1.0).unwrap();
    let offset = if upper { DIM / 2 } else { 0 };
    let centres: Vec<Vec<f32>> = (0..500)
        .map(|_| {
            let mut c = vec![0.0f32; DIM];
            (0..DIM / 2).for_each(|d| c[offset + d] = unit.sample(&mut rng));
            normalise(c)
        })
        .collect();
    points(n, &centres, &mut rng)
}

fn split(mut rows: Vec<Vec<f32>>, at: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let tail = rows.split_off(at);
    (rows, tail)
}

/// recall@k of the replica's own setting on `queries`.
fn measured(engine: &ShardEngine, queries: &[Vec<f32>], truth: &[Vec<usize>]) -> f64 {
    let filter = Filter::default();
    let found: Vec<Vec<usize>> = queries
        .iter()
        .map(|q| {
            let p = SearchParams::dense("t", q, K, None, &filter);
            let hits = engine.search(&p).expect("search").dense;
            hits.iter().map(|h| h.doc_id.parse().expect("id")).collect()
        })
        .collect();
    recall_of(&found, truth)
}

fn report(engine: &ShardEngine, started: Instant, recall: f64) -> String {
    let s = engine.stats();
    let estimate = s.recall.map_or("none".into(), |r| {
        format!(
            "{:.3} ({:.3}–{:.3}, {} samples)",
            r.recall, r.low, r.high, r.samples
        )
    });
    let tuned = s.tuned.map_or("none".into(), |t| {
        format!(
            "nprobe {} re-score {} (sample {:.3}, reached {}, on {} rows)",
            t.setting.nprobe, t.setting.exact_refine, t.recall, t.reached, t.sealed_rows
        )
    });
    format!(
        "t {:>5.0} s | measured recall@{K} {recall:.3} | estimate {estimate} | tuned {tuned} | retrains {} | sealed {}",
        started.elapsed().as_secs_f64(),
        s.recall_retrains,
        s.sealed_rows
    )
}

fn main() {
    let rows = arg(0, 500_000.0) as usize;
    let target = arg(1, 0.95);
    let n_queries = arg(2, 300.0) as usize;
    let (half, rest) = (n_queries / 2, n_queries - n_queries / 2);
    // Each mixture's rows, then its queries (the same mixture, none of them a stored row).
    let (first, first_queries) = split(half_mixture(rows + half, false, 1), rows);
    let (second, second_queries) = split(half_mixture(rows + rest, true, 2), rows);
    let queries: Vec<Vec<f32>> = first_queries.into_iter().chain(second_queries).collect();
    let all: Vec<Vec<f32>> = first.iter().chain(&second).cloned().collect();
    let (truth_first, truth_all) = (exact_truth(&first, &queries), exact_truth(&all, &queries));

    let dir = tempfile::tempdir().expect("temp dir");
    let config = EngineConfig {
        dimension: DIM,
        // Sized for both mixtures, as an operator sizes a collection for the rows it will hold.
        ivfpq: ivfpq_for(2 * rows, attest_core::limits::DEFAULT_NPROBE),
        recall_target: target,
        quantizer_drift_bound: 1e9,
        search_tuning: SearchTuningConfig {
            cpu_share: 1.0,
            ..SearchTuningConfig::default()
        },
        seal_threshold: rows / 4,
        max_unsealed_rows: rows,
        ..EngineConfig::default()
    };
    let engine = ShardEngine::open(dir.path(), config).expect("open");
    let started = Instant::now();
    write_rows(&engine, &first, 0);
    engine.seal().expect("seal");
    engine.compact().expect("compact");
    let tuned_on = |engine: &ShardEngine| {
        let s = engine.stats();
        s.tuned
            .is_some_and(|t| t.sealed_rows == s.sealed_rows && s.sealed_rows > 0)
    };
    while !tuned_on(&engine) {
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "first mixture: {}",
        report(
            &engine,
            started,
            measured(&engine, &queries[..half], &truth_first[..half])
        )
    );

    // A client searching both mixtures all along (what the live estimate samples).
    let searching = Arc::new(AtomicBool::new(true));
    let client = {
        let (engine, queries, searching) = (engine.clone(), queries.clone(), searching.clone());
        std::thread::spawn(move || {
            let filter = Filter::default();
            let mut i = 0;
            while searching.load(Ordering::Relaxed) {
                let p = SearchParams::dense("t", &queries[i % queries.len()], K, None, &filter);
                let _ = engine.search(&p);
                i += 1;
            }
            i
        })
    };
    let written = Instant::now();
    write_rows(&engine, &second, rows);
    engine.seal().expect("seal");
    println!(
        "second mixture written and sealed in {:.0} s: {}",
        written.elapsed().as_secs_f64(),
        report(&engine, started, measured(&engine, &queries, &truth_all))
    );
    let sealed_at = Instant::now();
    let mut lowest = 1.0f64;
    loop {
        std::thread::sleep(Duration::from_secs(10));
        let recall = measured(&engine, &queries, &truth_all);
        lowest = lowest.min(engine.stats().recall.map_or(1.0, |r| r.recall));
        println!("{}", report(&engine, started, recall));
        let s = engine.stats();
        let back = s.recall_retrains > 0
            && tuned_on(&engine)
            && s.tuned.is_some_and(|t| t.reached)
            && recall >= target;
        if back || sealed_at.elapsed() > RECOVERY_LIMIT {
            println!(
                "**recall {recall:.3} against target {target} {:.0} s after the second mixture was sealed** ({} quantizer retrains; lowest live estimate {lowest:.3}; back: {back})",
                sealed_at.elapsed().as_secs_f64(),
                s.recall_retrains
            );
            break;
        }
    }
    searching.store(false, Ordering::Relaxed);
    let searches = client.join().expect("client");
    println!("client searches: {searches}");
}
