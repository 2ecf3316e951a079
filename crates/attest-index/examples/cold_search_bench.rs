//! A shard engine's dense search when the page cache cannot hold its rows (a node serving more rows than its
//! memory, as at 10M), with `engine.prefetch_rows` on and off in alternating rounds of one run.
//!
//! `build DIR [ROWS=1000000]` writes ROWS rows (384-d unit vectors of a 500-centre mixture, ~600-byte texts) into
//! one sealed, compacted segment in DIR. `serve DIR [ROUNDS=6] [QUERIES=500]` opens it with every default but a
//! fixed nprobe 8 and the default re-score (2 × k from the full vectors), no recall target and no live probe (their
//! exact scans would read the whole segment), and times one-thread dense searches, each round on an engine opened
//! afresh, prefetch on and off alternately. Prints p50 / p95 / mean of each and the ratios on / off.
//!
//! Run `serve` where memory is short, e.g. in a memory cgroup smaller than the segment's files, after dropping the
//! page cache (`echo 1 > /proc/sys/vm/drop_caches`): docs/BENCHMARKS.md has the commands.

use std::path::Path;
use std::time::Instant;

use attest_index::recall_probe::RecallProbeConfig;
use attest_index::{EngineConfig, Filter, IvfPqParams, SearchParams, ShardEngine};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

#[path = "shared/clustered.rs"]
mod clustered;
use clustered::{normalise, write_rows_with_text, K};

const DIM: usize = 384;
const NPROBE: u32 = 8;

/// Points of a 500-centre mixture of unit vectors, the same every run for the same seed.
fn points(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(73);
    let unit = Normal::new(0.0f32, 1.0).unwrap();
    let centres: Vec<Vec<f32>> = (0..500)
        .map(|_| normalise((0..DIM).map(|_| unit.sample(&mut rng)).collect()))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let noise = Normal::new(0.0, 1.5 / (DIM as f32).sqrt()).unwrap();
    (0..n)
        .map(|_| {
            let c = &centres[rng.gen_range(0..centres.len())];
            normalise(c.iter().map(|x| x + noise.sample(&mut rng)).collect())
        })
        .collect()
}

fn config(rows: usize, prefetch_rows: bool) -> EngineConfig {
    let nlist = ((rows as f64).sqrt().ceil() as u32).next_power_of_two();
    EngineConfig {
        dimension: DIM,
        ivfpq: IvfPqParams {
            nlist,
            nprobe: NPROBE,
            ..IvfPqParams::default()
        },
        seal_threshold: rows,
        max_unsealed_rows: rows * 2,
        seal_idle_ms: 0,
        recall_probe: RecallProbeConfig {
            sample_rate: 0.0,
            ..RecallProbeConfig::default()
        },
        prefetch_rows,
        ..EngineConfig::default()
    }
}

fn build(dir: &Path, rows: usize) {
    let started = Instant::now();
    let engine = ShardEngine::open(dir, config(rows, true)).expect("open");
    let base = points(rows, 1);
    write_rows_with_text(&engine, &base, 0, |n| {
        let text = format!("Passage {n}, about six hundred bytes of text. ").repeat(12);
        (format!("Document {n}"), text)
    });
    engine.seal().expect("seal");
    engine.compact().expect("compact");
    // The rows count is read back by `serve` from the engine itself.
    std::fs::write(dir.join("cold-search-rows"), rows.to_string()).expect("rows file");
    eprintln!(
        "built {rows} rows in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

fn serve(dir: &Path, rounds: usize, queries: usize) {
    let rows: usize = std::fs::read_to_string(dir.join("cold-search-rows"))
        .expect("run build first")
        .trim()
        .parse()
        .expect("rows");
    // Each round its own queries: a round must not find the rows its predecessor read for the same ones.
    let asked = points(queries * rounds * 2, 2);
    let filter = Filter::default();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for round in 0..rounds * 2 {
        // on, off, off, on, on, off ...: each side as often first after the other.
        let prefetch = (round % 4 == 0) || (round % 4 == 3);
        let engine = ShardEngine::open(dir, config(rows, prefetch)).expect("open");
        let mut took = Vec::with_capacity(queries);
        for q in &asked[round * queries..(round + 1) * queries] {
            let p = SearchParams::dense("t", q, K, None, &filter);
            let started = Instant::now();
            let hits = engine.search(&p).expect("search").dense;
            took.push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(hits.len(), K);
        }
        drop(engine);
        if prefetch {
            on.extend(took)
        } else {
            off.extend(took)
        }
    }
    let summary = |mut ms: Vec<f64>| {
        ms.sort_by(f64::total_cmp);
        let at = |p: usize| ms[(ms.len() * p / 100).min(ms.len() - 1)];
        (at(50), at(95), ms.iter().sum::<f64>() / ms.len() as f64)
    };
    let (on, off) = (summary(on), summary(off));
    println!("{rows} rows, nprobe {NPROBE}, re-score 2 × k, {rounds} rounds of {queries} searches each way");
    println!(
        "prefetch off: p50 {:.3} / p95 {:.3} / mean {:.3} ms",
        off.0, off.1, off.2
    );
    println!(
        "prefetch on:  p50 {:.3} / p95 {:.3} / mean {:.3} ms",
        on.0, on.1, on.2
    );
    println!(
        "on / off: **p50 {:.2}×, p95 {:.2}×, mean {:.2}×**",
        on.0 / off.0,
        on.1 / off.1,
        on.2 / off.2
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: usize| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("build"), Some(dir)) => build(Path::new(dir), number(2, 1_000_000)),
        (Some("serve"), Some(dir)) => serve(Path::new(dir), number(2, 6), number(3, 500)),
        _ => eprintln!("usage: cold_search_bench build DIR [ROWS] | serve DIR [ROUNDS] [QUERIES]"),
    }
}
