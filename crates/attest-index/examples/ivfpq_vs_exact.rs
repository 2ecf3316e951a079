//! Benchmark: IVF_PQ (memory-mapped, as a sealed segment serves it) against an exact scan over the same
//! clustered vectors, one query at a time, in one run. Prints recall@10 and the speed ratio.
//!
//! `cargo run --release -p attest-index --example ivfpq_vs_exact -- [N] [DIM] [QUERIES] [NPROBE]`

use std::time::Instant;

use attest_index::ivfpq::{exact_search, IvfPqIndex, IvfPqParams};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

fn normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

/// A Gaussian mixture: random unit centres, points = centre + noise, normalised.
fn mixture(n: usize, dim: usize, centres: &[Vec<f32>], sigma: f32, rng: &mut impl Rng) -> Vec<f32> {
    let noise = Normal::new(0.0, sigma).unwrap();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = &centres[rng.gen_range(0..centres.len())];
        let mut v: Vec<f32> = c.iter().map(|x| x + noise.sample(rng)).collect();
        normalise(&mut v);
        out.extend(v);
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("number"))
        .collect();
    let n = *args.first().unwrap_or(&1_000_000);
    let dim = *args.get(1).unwrap_or(&384);
    let queries = *args.get(2).unwrap_or(&200);
    let params = IvfPqParams {
        nprobe: args
            .get(3)
            .map(|&p| p as u32)
            .unwrap_or(IvfPqParams::default().nprobe),
        ..IvfPqParams::default()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let unit = Normal::new(0.0f32, 1.0).unwrap();
    let centres: Vec<Vec<f32>> = (0..2000)
        .map(|_| {
            let mut c: Vec<f32> = (0..dim).map(|_| unit.sample(&mut rng)).collect();
            normalise(&mut c);
            c
        })
        .collect();
    let sigma = 0.6 / (dim as f32).sqrt();
    let t = Instant::now();
    let base = mixture(n, dim, &centres, sigma, &mut rng);
    let qs = mixture(queries, dim, &centres, sigma, &mut rng);
    eprintln!("generated {n} x {dim} in {:.1}s", t.elapsed().as_secs_f64());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.faiss");
    let step = (n / 100_000).max(1);
    let train: Vec<f32> = (0..n)
        .step_by(step)
        .flat_map(|r| base[r * dim..(r + 1) * dim].iter().copied())
        .collect();
    let ids: Vec<i64> = (0..n as i64).collect();
    let t = Instant::now();
    let used = IvfPqIndex::build(&path, dim, &params, &train, &base, &ids).unwrap();
    let build_s = t.elapsed().as_secs_f64();
    let index = IvfPqIndex::open_mmap(&path).unwrap();

    let (mut exact_ms, mut ivf_ms, mut hits) = (Vec::new(), Vec::new(), 0usize);
    // The engine's pipeline: PQ candidates re-scored exactly with the full vectors kept on disk.
    let (mut rescored_ms, mut rescored_hits) = (Vec::new(), 0usize);
    let candidates = 100;
    for q in qs.chunks(dim) {
        let t = Instant::now();
        let truth = exact_search(&base, dim, q, 10);
        exact_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let got = index.search(q, 10, used.nprobe).unwrap();
        ivf_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let mut rescored: Vec<(i64, f32)> = index
            .search(q, candidates, used.nprobe)
            .unwrap()
            .into_iter()
            .map(|(id, _)| {
                (
                    id,
                    base[id as usize * dim..(id as usize + 1) * dim]
                        .iter()
                        .zip(q)
                        .map(|(a, b)| a * b)
                        .sum(),
                )
            })
            .collect();
        rescored.sort_by(|a, b| b.1.total_cmp(&a.1));
        rescored.truncate(10);
        rescored_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let truth: std::collections::HashSet<i64> = truth.iter().map(|(r, _)| *r as i64).collect();
        hits += got.iter().filter(|(id, _)| truth.contains(id)).count();
        rescored_hits += rescored.iter().filter(|(id, _)| truth.contains(id)).count();
    }
    exact_ms.sort_by(f64::total_cmp);
    ivf_ms.sort_by(f64::total_cmp);
    rescored_ms.sort_by(f64::total_cmp);
    let r50 = percentile(&rescored_ms, 0.5);
    let recall = hits as f64 / (10 * queries) as f64;
    let (e50, i50) = (percentile(&exact_ms, 0.5), percentile(&ivf_ms, 0.5));
    println!(
        "{}",
        serde_json::json!({
            "n": n, "dim": dim, "queries": queries, "params": used, "build_s": build_s,
            "disk_bytes": std::fs::metadata(&path).unwrap().len(),
            "ivfpq_p50_ms": i50, "ivfpq_p95_ms": percentile(&ivf_ms, 0.95),
            "exact_p50_ms": e50, "exact_p95_ms": percentile(&exact_ms, 0.95),
            "speedup_vs_exact_p50": e50 / i50, "recall_at_10": recall,
            "rescored_candidates": candidates, "rescored_p50_ms": r50, "rescored_p95_ms": percentile(&rescored_ms, 0.95),
            "rescored_speedup_vs_exact_p50": e50 / r50,
            "recall_at_10_rescored": rescored_hits as f64 / (10 * queries) as f64
        })
    );
}
