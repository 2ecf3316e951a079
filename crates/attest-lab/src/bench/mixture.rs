//! Synthetic clustered vectors for `attest-lab bench`: a Gaussian mixture of unit-norm centres, each point = a
//! centre plus isotropic noise, L2-normalised (like sentence embeddings). Clustering is what makes recall a
//! meaningful figure: uniform random vectors in 384-d are all nearly orthogonal, so every "neighbour" is noise.
//!
//! Rows are generated block by block from seeds derived from the block number, so any range of rows can be
//! regenerated on demand and in parallel, and a 10M × 384 run never holds more than one batch in memory.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// Rows per seeded block: the unit of reproducibility (any batch size gives the same rows).
const BLOCK_ROWS: usize = 4096;

#[derive(Debug, Clone)]
pub struct Mixture {
    dim: usize,
    centres: Vec<f32>,
    sigma: f32,
    seed: u64,
}

impl Mixture {
    /// `clusters` centres drawn from `seed`; the per-coordinate noise is `spread / sqrt(dim)`, so a point's
    /// noise has norm ≈ `spread` against its unit centre.
    pub fn new(dim: usize, clusters: usize, spread: f32, seed: u64) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let unit = Normal::new(0.0f32, 1.0).expect("valid normal");
        let mut centres: Vec<f32> = (0..clusters.max(1) * dim)
            .map(|_| unit.sample(&mut rng))
            .collect();
        centres.chunks_exact_mut(dim).for_each(normalise);
        Mixture {
            dim,
            centres,
            sigma: spread / (dim as f32).sqrt(),
            seed,
        }
    }

    pub fn clusters(&self) -> usize {
        self.centres.len() / self.dim
    }

    /// Rows `start..start + count` of the stream `stream` (0 = the corpus, 1 = the queries, ...), row-major,
    /// generated on `threads` threads. The same arguments always give the same rows.
    pub fn rows(&self, stream: u64, start: usize, count: usize, threads: usize) -> Vec<f32> {
        let dim = self.dim;
        let mut out = vec![0f32; count * dim];
        let first_block = start / BLOCK_ROWS;
        let last_block = (start + count).div_ceil(BLOCK_ROWS);
        let blocks: Vec<usize> = (first_block..last_block).collect();
        let per_thread = blocks.len().div_ceil(threads.max(1)).max(1);
        // Each thread fills the slice of `out` its blocks overlap.
        let mut pieces: Vec<(usize, &mut [f32])> = Vec::new();
        let mut rest: &mut [f32] = &mut out;
        let mut row = start;
        for group in blocks.chunks(per_thread) {
            let end = ((group[group.len() - 1] + 1) * BLOCK_ROWS).min(start + count);
            let (head, tail) = rest.split_at_mut((end - row) * dim);
            pieces.push((row, head));
            rest = tail;
            row = end;
        }
        std::thread::scope(|scope| {
            for (first_row, piece) in pieces {
                scope.spawn(move || self.fill(stream, first_row, piece));
            }
        });
        out
    }

    /// Fills `out` with rows starting at `first_row`, regenerating each block from its seed.
    fn fill(&self, stream: u64, first_row: usize, out: &mut [f32]) {
        let dim = self.dim;
        let noise = Normal::new(0.0f32, self.sigma).expect("valid normal");
        let rows = out.len() / dim;
        let mut row = first_row;
        let mut written = 0;
        while written < rows {
            let block = row / BLOCK_ROWS;
            let mut rng = rand::rngs::StdRng::seed_from_u64(
                self.seed ^ (stream << 48) ^ (block as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            let block_start = block * BLOCK_ROWS;
            // Rows of this block before `row` are drawn and discarded so that every row depends only on its
            // block's seed, whatever batch boundaries the caller uses.
            let mut scratch = vec![0f32; dim];
            for r in block_start..(block_start + BLOCK_ROWS) {
                let keep = r >= row && written < rows;
                let target: &mut [f32] = if keep {
                    &mut out[written * dim..(written + 1) * dim]
                } else {
                    &mut scratch
                };
                let c = rng.gen_range(0..self.clusters());
                let centre = &self.centres[c * dim..(c + 1) * dim];
                for (t, x) in target.iter_mut().zip(centre) {
                    *t = x + noise.sample(&mut rng);
                }
                normalise(target);
                if keep {
                    written += 1;
                }
                if written == rows {
                    break;
                }
            }
            row = block_start + BLOCK_ROWS;
        }
    }
}

fn normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_do_not_depend_on_batching_or_threads() {
        let m = Mixture::new(8, 5, 0.5, 3);
        let whole = m.rows(0, 0, 10_000, 1);
        let mut pieced = Vec::new();
        for (start, count) in [(0, 123), (123, 4000), (4123, 5877)] {
            pieced.extend(m.rows(0, start, count, 2));
        }
        assert_eq!(whole, pieced);
        assert_eq!(m.rows(0, 5000, 10, 3), whole[5000 * 8..5010 * 8].to_vec());
        assert_ne!(m.rows(1, 0, 10, 1), whole[..80].to_vec(), "streams differ");
    }

    #[test]
    fn points_are_unit_and_clustered() {
        let m = Mixture::new(64, 4, 0.6, 9);
        let rows = m.rows(0, 0, 400, 2);
        for r in rows.chunks(64) {
            let norm: f32 = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4);
            // Each point is close to some centre (cosine ≈ 1/sqrt(1 + 0.36)) and far from the others.
            let best = m
                .centres
                .chunks(64)
                .map(|c| c.iter().zip(r).map(|(a, b)| a * b).sum::<f32>())
                .fold(f32::MIN, f32::max);
            assert!(best > 0.7, "best centre cosine {best}");
        }
    }
}
