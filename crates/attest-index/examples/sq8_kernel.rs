//! Benchmark: the SQ8 re-scoring kernel — the byte × f32 inner product a shard's dense search runs for every
//! pooled candidate (`k × compact_overfetch` = 640 rows per search by default) — AVX2 (`simd::dot_u8`, what
//! `Sq8File::score` runs) against the portable loop it replaced (`simd::dot_u8_portable`), on the same random
//! rows of the same codes, in one run; then `Sq8File::score` itself over a file of that shape, each row asked
//! for 8 candidates ahead (`Sq8File::prefetch`), as the shard's dense lane does.
//!
//! `cargo run -p attest-index --example sq8_kernel -- [ROWS] [QUERIES] [CANDIDATES] [DIM]`
//! (defaults 170000 rows, one replica of a 1M collection on 6 shards; 2,000 queries; 640; 384)

use std::time::Instant;

use attest_index::simd::{dot_u8, dot_u8_portable};
use attest_index::sq8::Sq8File;
use rand::{Rng, SeedableRng};

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .map(|a| a.parse().expect("a number"))
        .unwrap_or(default)
}

/// Seconds to score every query's candidate rows with `kernel`; the sum of the scores keeps the work.
fn time(
    codes: &[u8],
    dim: usize,
    queries: &[Vec<f32>],
    rows: &[Vec<usize>],
    kernel: fn(&[f32], &[u8]) -> f32,
) -> (f64, f64) {
    let start = Instant::now();
    let mut sum = 0f64;
    for (q, rows) in queries.iter().zip(rows) {
        for &r in rows {
            sum += f64::from(kernel(q, &codes[r * dim..(r + 1) * dim]));
        }
    }
    (start.elapsed().as_secs_f64(), sum)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (n, nq, cand, dim) = (arg(1, 170_000), arg(2, 2_000), arg(3, 640), arg(4, 384));
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let codes: Vec<u8> = (0..n * dim).map(|_| rng.gen()).collect();
    let queries: Vec<Vec<f32>> = (0..nq)
        .map(|_| (0..dim).map(|_| rng.gen_range(-0.01f32..0.01)).collect())
        .collect();
    let rows: Vec<Vec<usize>> = (0..nq)
        .map(|_| (0..cand).map(|_| rng.gen_range(0..n)).collect())
        .collect();

    // The two kernels agree (to f32 rounding) on every scored pair of the first queries.
    let mut worst = 0f32;
    for (q, rows) in queries.iter().zip(&rows).take(20) {
        for &r in rows {
            let c = &codes[r * dim..(r + 1) * dim];
            worst = worst.max((dot_u8(q, c) - dot_u8_portable(q, c)).abs());
        }
    }

    // Interleaved rounds, so that both see the same machine.
    let (mut portable, mut simd) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (t, a) = time(&codes, dim, &queries, &rows, dot_u8_portable);
        portable.push(t);
        let (t, b) = time(&codes, dim, &queries, &rows, dot_u8);
        simd.push(t);
        assert!((a - b).abs() <= 1e-3 * a.abs().max(1.0), "{a} vs {b}");
    }
    let (portable, simd) = (median(portable), median(simd));
    let per_search = |t: f64| t / nq as f64 * 1e3;

    // The product's path: a file of the same shape, scored through `Sq8File::score`.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rows.sq8");
    let vectors: Vec<f32> = codes.iter().map(|&c| f32::from(c) / 255.0 - 0.5).collect();
    Sq8File::write(&path, dim, &vectors).expect("write the SQ8 file");
    let file = Sq8File::open(&path).expect("open the SQ8 file");
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut sum = 0f64;
        for (q, rows) in queries.iter().zip(&rows) {
            let prepared = file.prepare(q).expect("a query of the file's dimension");
            for (at, &r) in rows.iter().enumerate() {
                if let Some(&ahead) = rows.get(at + 8) {
                    file.prefetch(ahead);
                }
                sum += f64::from(file.score(&prepared, r).expect("a row of the file"));
            }
        }
        assert!(sum.is_finite());
        rounds.push(start.elapsed().as_secs_f64());
    }
    let through_file = median(rounds);

    println!(
        "sq8 kernel: {n} rows × {dim} bytes, {nq} searches × {cand} candidates (median of 5 interleaved rounds)"
    );
    println!(
        "  portable loop (before)   {:.3} ms per search",
        per_search(portable)
    );
    println!(
        "  dot_u8 (avx2 where the CPU has it)  {:.3} ms per search   {:.2}x the portable loop's time",
        per_search(simd),
        simd / portable
    );
    println!(
        "  Sq8File::score + prefetch (the shard's path)   {:.3} ms per search   {:.2}x the portable loop's time",
        per_search(through_file),
        through_file / portable
    );
    println!("  largest difference between the kernels' scores: {worst:.2e}");
}
