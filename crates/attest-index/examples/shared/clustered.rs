//! Clustered rows and queries for the engine benchmarks: a Gaussian mixture of unit vectors written to one
//! engine (document id = the row's place), and recall@k measured against an exact scan of the same rows.

use attest_index::{DocumentWrite, LoggedChunk, ShardEngine};
use rand::Rng;
use rand_distr::{Distribution, Normal};

pub const DIM: usize = 128;
pub const K: usize = 10;

pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// `n` random unit centres.
pub fn centres(n: usize, rng: &mut impl Rng) -> Vec<Vec<f32>> {
    let unit = Normal::new(0.0f32, 1.0).unwrap();
    (0..n)
        .map(|_| normalise((0..DIM).map(|_| unit.sample(rng)).collect()))
        .collect()
}

/// Points of a Gaussian mixture around `centres`.
pub fn points(n: usize, centres: &[Vec<f32>], rng: &mut impl Rng) -> Vec<Vec<f32>> {
    let noise = Normal::new(0.0, 1.5 / (DIM as f32).sqrt()).unwrap();
    (0..n)
        .map(|_| {
            let c = &centres[rng.gen_range(0..centres.len())];
            normalise(c.iter().map(|x| x + noise.sample(rng)).collect())
        })
        .collect()
}

/// Writes every row (tenant `t`, its place as its id) in batches, then seals and compacts them into one segment.
pub fn write_sealed(engine: &std::sync::Arc<ShardEngine>, base: &[Vec<f32>]) {
    for (b, batch) in base.chunks(5_000).enumerate() {
        let docs = batch
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let id = (b * 5_000 + i).to_string();
                DocumentWrite {
                    doc_id: id.clone(),
                    tenant: "t".into(),
                    chunks: vec![LoggedChunk {
                        chunk_id: id,
                        title: String::new(),
                        text: String::new(),
                        metadata_json: "{}".into(),
                        vector: v.clone(),
                    }],
                    version: 0,
                    near_dup: None,
                }
            })
            .collect();
        engine.upsert(docs).expect("upsert");
    }
    engine.seal().expect("seal");
    engine.compact().expect("compact");
}

/// The exact top k rows of every query.
pub fn exact_truth(base: &[Vec<f32>], queries: &[Vec<f32>]) -> Vec<Vec<usize>> {
    queries
        .iter()
        .map(|q| {
            let mut scored: Vec<(usize, f32)> = base
                .iter()
                .enumerate()
                .map(|(i, v)| (i, v.iter().zip(q).map(|(a, b)| a * b).sum()))
                .collect();
            scored.select_nth_unstable_by(K, |a, b| b.1.total_cmp(&a.1));
            scored[..K].iter().map(|(i, _)| *i).collect()
        })
        .collect()
}

/// Mean recall@k of what was found against the exact top k.
pub fn recall_of(found: &[Vec<usize>], truth: &[Vec<usize>]) -> f64 {
    found
        .iter()
        .zip(truth)
        .map(|(f, t)| t.iter().filter(|i| f.contains(i)).count() as f64 / K as f64)
        .sum::<f64>()
        / truth.len() as f64
}
