//! Clustered rows and queries for the engine benchmarks: a Gaussian mixture of unit vectors written to one
//! engine (document id = the row's place), and recall@k measured against an exact scan of the same rows.
// Each benchmark uses its own part of this module.
#![allow(dead_code)]

use std::time::Instant;

use attest_index::{DocumentWrite, EngineConfig, IvfPqParams, LoggedChunk, ShardEngine};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

pub const DIM: usize = 128;

/// The `i`-th command-line argument as a number, or `default`.
pub fn arg(i: usize, default: f64) -> f64 {
    std::env::args()
        .nth(i + 1)
        .map_or(default, |a| a.parse().expect("a number"))
}
pub const K: usize = 10;

pub fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// IVF_PQ for `rows` of these vectors: nlist √rows rounded up to a power of two, 16 codes of 8 bits, and
/// `nprobe` (at most nlist).
pub fn ivfpq_for(rows: usize, nprobe: u32) -> IvfPqParams {
    let nlist = ((rows as f64).sqrt().ceil() as u32).next_power_of_two();
    IvfPqParams {
        nlist,
        m: 16,
        nbits: 8,
        nprobe: nprobe.min(nlist),
    }
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

/// A benchmark's data, built: an engine's files in `dir` (closed) holding the rows in one sealed segment, the
/// queries, and their exact top k.
pub struct Built {
    pub dir: tempfile::TempDir,
    pub queries: Vec<Vec<f32>>,
    pub truth: Vec<Vec<usize>>,
}

/// `rows` rows and `queries` queries of one 500-centre mixture (the same every run), the rows written with
/// `config` into a fresh directory.
pub fn build(rows: usize, queries: usize, config: EngineConfig) -> Built {
    let mut rng = rand::rngs::StdRng::seed_from_u64(73);
    let centres = centres(500, &mut rng);
    let base = points(rows, &centres, &mut rng);
    let queries = points(queries, &centres, &mut rng);
    let dir = tempfile::tempdir().expect("temp dir");
    let t = Instant::now();
    {
        let engine = ShardEngine::open(dir.path(), config).expect("open");
        write_sealed(&engine, &base);
    }
    eprintln!("built {rows} rows in {:.0} s", t.elapsed().as_secs_f64());
    let truth = exact_truth(&base, &queries);
    Built {
        dir,
        queries,
        truth,
    }
}

/// Writes every row (tenant `t`, its place as its id) in batches, then seals and compacts them into one segment.
pub fn write_sealed(engine: &std::sync::Arc<ShardEngine>, base: &[Vec<f32>]) {
    write_rows(engine, base, 0);
    engine.seal().expect("seal");
    engine.compact().expect("compact");
}

/// Writes every row in batches of 5,000, row i as document `first + i` of tenant `t`, with no title or text.
pub fn write_rows(engine: &std::sync::Arc<ShardEngine>, rows: &[Vec<f32>], first: usize) {
    write_rows_with_text(engine, rows, first, |_| (String::new(), String::new()));
}

/// [`write_rows`] with each document's title and text from `text` (given its id).
pub fn write_rows_with_text(
    engine: &std::sync::Arc<ShardEngine>,
    rows: &[Vec<f32>],
    first: usize,
    text: impl Fn(usize) -> (String, String),
) {
    for (b, batch) in rows.chunks(5_000).enumerate() {
        let docs = batch
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let n = first + b * 5_000 + i;
                let (title, text) = text(n);
                DocumentWrite {
                    doc_id: n.to_string(),
                    tenant: "t".into(),
                    chunks: vec![LoggedChunk {
                        chunk_id: n.to_string(),
                        title,
                        text,
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
