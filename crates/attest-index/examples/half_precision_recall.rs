//! What storing a segment's full vectors in half precision (`vector_file`, version 2) does to an exact re-score:
//! the exact top 10 of each query over the rows as f32 (the truth) against the exact top 10 over the same rows
//! rounded to f16 (what a re-score now reads), on a Gaussian mixture of unit vectors (the cluster benchmark's
//! spread), at 384 dimensions. Prints recall@10 of the f16 ranking against the f32 one, and the largest change of
//! a score.
//!
//!     half_precision_recall [ROWS=100000] [QUERIES=300] [CENTRES=1000]
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

const DIM: usize = 384;
const K: usize = 10;

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .map_or(default, |a| a.parse().expect("a number"))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The `K` best rows for `query` (ties by lower row).
fn top(rows: &[Vec<f32>], query: &[f32]) -> Vec<usize> {
    let mut scored: Vec<(f32, usize)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (dot(query, r), i))
        .collect();
    scored.select_nth_unstable_by(K, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(K);
    scored.iter().map(|(_, i)| *i).collect()
}

fn main() {
    let (rows, queries, centres) = (arg(1, 100_000), arg(2, 300), arg(3, 1000));
    let mut rng = rand::rngs::StdRng::seed_from_u64(384);
    let unit = Normal::new(0.0f32, 1.0).unwrap();
    let noise = Normal::new(0.0, 1.5 / (DIM as f32).sqrt()).unwrap();
    let centre: Vec<Vec<f32>> = (0..centres)
        .map(|_| normalise((0..DIM).map(|_| unit.sample(&mut rng)).collect()))
        .collect();
    let mut point = || {
        let c = &centre[rng.gen_range(0..centres)];
        normalise(c.iter().map(|x| x + noise.sample(&mut rng)).collect())
    };
    let full: Vec<Vec<f32>> = (0..rows).map(|_| point()).collect();
    let asked: Vec<Vec<f32>> = (0..queries).map(|_| point()).collect();
    let halved: Vec<Vec<f32>> = full
        .iter()
        .map(|r| r.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect())
        .collect();
    let (mut found, mut worst) = (0usize, 0f32);
    for q in &asked {
        let truth = top(&full, q);
        let served = top(&halved, q);
        found += served.iter().filter(|r| truth.contains(r)).count();
        for r in &truth {
            worst = worst.max((dot(q, &full[*r]) - dot(q, &halved[*r])).abs());
        }
    }
    println!(
        "{rows} rows, {queries} queries, {centres} centres, {DIM}-d: recall@{K} of the f16 rows' exact ranking against \
         f32's {:.4}; largest score change {worst:.2e}; bytes per row {} (f16) against {} (f32)",
        found as f64 / (queries * K) as f64,
        DIM * 2,
        DIM * 4
    );
}
